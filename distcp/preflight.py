"""Checks that need no Spark, run before it starts and before anything is written (driver).

A refusal found after Spark's start costs the user 15-30 s of JVM start (and, for
an unreachable standalone master, 70 s of retries and a Java stack); found here it
costs milliseconds. Each check raises one of our errors with a one-line message
naming the file or setting to fix: ConfigurationError / PlanningError (exit 2) for
what the command line says, an EnvironmentProblem (exit 3) for what the machine or
a service around it refuses.
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from distcp.converters.base import build_chain
from distcp.errors import (
    ConfigurationError,
    DestinationNotWritableError,
    PlanningError,
    SparkUnavailableError,
)
from distcp.spark.jvm import is_local_master
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage import writes as writeopts
from distcp.storage.filesystems import os_path

#: Seconds a TCP connect to a Spark master or an S3 request may take here.
PROBE_TIMEOUT = 5.0

_MASTER_PREFIXES = ("local[", "local-cluster[", "spark://", "sc://", "k8s://", "mesos://")
_MASTER_NAMES = ("local", "yarn")
_MASTER_SETTING = "--master / PYDISTCP_MASTER"


#: The local masters Spark parses: ``local``, ``local[N]``, ``local[*]``, each with
#: ``,F`` (task failures allowed). A small plan is copied without Spark (``run.here``),
#: so a typo here must be refused before any run, not left to Spark's start.
_LOCAL_MASTER = re.compile(r"local(\[([1-9][0-9]*|\*)(\s*,\s*[1-9][0-9]*)?\])?\Z")


def check_master(master: str) -> None:
    """A master string Spark knows, and a standalone / Connect master that answers TCP."""
    if master not in _MASTER_NAMES and not master.startswith(_MASTER_PREFIXES):
        raise ConfigurationError(
            f"{_MASTER_SETTING}: not a Spark master: {master!r} (use local[N], spark://HOST:PORT, "
            "sc://HOST:PORT, yarn, k8s://URL, mesos://URL or local-cluster[...])")
    if master.startswith("local") and not master.startswith("local-cluster[") \
            and not _LOCAL_MASTER.match(master):
        raise ConfigurationError(
            f"{_MASTER_SETTING}: not a local master: {master!r} (use local, local[N] or "
            "local[*] for N threads or one per core, local[N,F] to allow F task failures)")
    if master.startswith(("spark://", "sc://")):
        for host, port in _master_addresses(master):
            _connect(host, port, master)


def _master_addresses(master: str) -> list[tuple[str, int]]:
    """``spark://h1:7077,h2:7077`` (standby masters) -> [(h1, 7077), (h2, 7077)]."""
    scheme, rest = master.split("://", 1)
    default = 7077 if scheme == "spark" else 15002
    addresses = []
    for part in rest.split("/", 1)[0].split(";", 1)[0].split(","):
        parsed = urlsplit(f"//{part}")
        try:
            port = parsed.port or default
        except ValueError:
            raise ConfigurationError(f"{_MASTER_SETTING}: bad port in {master!r}") from None
        if not parsed.hostname:
            raise ConfigurationError(f"{_MASTER_SETTING}: no host in {master!r}")
        addresses.append((parsed.hostname, port))
    return addresses


def _connect(host: str, port: int, master: str) -> None:
    """One standby master answering is enough for Spark; here every listed one must
    answer, which is stricter but keeps the message about the one that did not."""
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT):
            return
    except OSError as exc:
        timed_out = isinstance(exc, TimeoutError)
        cause = f"no answer in {PROBE_TIMEOUT:.0f} s" if timed_out else exc.strerror or str(exc)
        raise SparkUnavailableError(
            f"Spark master {master} is unreachable: {host}:{port}: {cause}; start it or fix "
            f"{_MASTER_SETTING}", path=master) from None


def check_local_destination(root: str, destination: str,
                            options: Mapping[str, Any] | None = None) -> None:
    """The state directory's location can take a file: create and remove a probe in
    its nearest existing ancestor (nothing is left, no folder is created). Only where
    ``os`` calls reach it (a local disk); elsewhere the first write tells."""
    if not storage_for(root, dict(options or {})).capabilities.local_paths:
        return
    path = os_path(root)
    what = f"destination {fsutil.display(destination)}"
    ancestor = path
    while not os.path.lexists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise PlanningError(f"cannot write to {what}: {ancestor} is a file, not a directory; "
                            "choose another DST or --state-dir", path=destination)
    _probe(ancestor, what)


def _probe(directory: str, what: str) -> None:
    try:
        fd, probe = tempfile.mkstemp(prefix=".pydistcp-probe-", dir=directory)
    except OSError as exc:
        raise DestinationNotWritableError(f"cannot write to {what}: {exc.strerror or exc}",
                                          path=directory) from None
    os.close(fd)
    os.unlink(probe)


def check_output_file(path: str | None, flag: str = "--summary-json") -> None:
    """A file the run writes (``--summary-json``, ``--log-file``) can be written; found
    out now, not after the copy was published. ``-`` is stdout: nothing to check."""
    if not path or path == "-":
        return
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ConfigurationError(f"{flag}: {path} is a directory")
    if not os.path.isdir(directory):
        raise ConfigurationError(f"{flag}: {path}: no such directory {directory}")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise DestinationNotWritableError(f"{flag}: {path}: permission denied")
    _probe(directory, f"{flag} {path}")


def check_storage(url: str, options: Mapping[str, Any], side: str) -> None:
    """One cheap, bounded request per URL whose storage has one to make (an object
    store: credentials present and accepted, endpoint reachable); the storage words
    the cause. ``side`` is ``src`` or ``dst``, to name the setting."""
    storage_for(url, dict(options)).probe(url, f"--{side}-option / --{side}-options-file")


def check_links(links: str, destination: str, options: Mapping[str, Any]) -> None:
    """``--links copy`` needs a destination that can hold symbolic links; asked of the
    destination's filesystem (no request is sent: a capability of its kind)."""
    if links != "copy":
        return
    if not storage_for(destination, dict(options)).capabilities.symlinks:
        raise ConfigurationError(
            f"--links copy: destination {fsutil.display(destination)} cannot hold symbolic "
            "links (only a local disk can); use --links skip or --links follow")


def check_attributes(chmod: str | None, chown: str | None, destination: str,
                     options: Mapping[str, Any]) -> None:
    """--chmod/--chown need a destination that keeps modes and owners (asked of its
    kind, no request sent); --chown's names must exist here for a local one."""
    if chmod is None and chown is None:
        return
    caps = storage_for(destination, dict(options)).capabilities
    flag = "--chmod" if chmod is not None else "--chown"
    if not caps.mtimes:
        raise ConfigurationError(
            f"{flag}: destination {fsutil.display(destination)} keeps no file modes or "
            "owners (an object store); leave it unset")
    if chown is not None and caps.local_paths:
        from distcp.chown import parse_chown, unknown_ids

        problem = unknown_ids(parse_chown(chown))
        if problem:
            raise ConfigurationError(f"--chown {chown}: {problem}")


def check_writes(cfg: Any) -> None:
    """The write options (``--storage-class`` ...) are ones the destination's store has
    (asked of its kind, no request sent); ``--requester-pays`` one that a source or the
    destination has. One line naming the option and the store."""
    writes = cfg.writes
    if not writes:
        return
    dst = storage_for(cfg.destination, dict(cfg.dst_options))
    shown = fsutil.display(cfg.destination)
    problem = writeopts.write_problem(writes, cfg.destination, dst, shown)
    if problem is None and writes.requester_pays:
        stores = [(storage_for(s, dict(cfg.src_options)), fsutil.display(s))
                  for s in cfg.sources]
        problem = writeopts.requester_pays_problem([*stores, (dst, shown)])
    if problem:
        raise ConfigurationError(problem)


def check_run(cfg: Any) -> None:
    """The checks a copy run needs before it lists anything, in the order a user would
    fix them; a dry run starts no Spark, so its master is not asked."""
    check_writes(cfg)
    check_links(cfg.links, cfg.destination, cfg.dst_options)
    check_attributes(cfg.chmod, cfg.chown, cfg.destination, cfg.dst_options)
    if not cfg.dry_run:
        check_master(cfg.master)
    check_output_file(cfg.summary_json)
    check_output_file(cfg.log_file, "--log-file")
    check_output_file(cfg.metrics_file, "--metrics-file")
    check_events(cfg.events, cfg.events_timeout)
    for source in cfg.sources:
        check_storage(source, cfg.src_options, "src")
    check_storage(cfg.destination, cfg.dst_options, "dst")
    if cfg.converters and not cfg.dry_run and is_local_master(cfg.master):
        for converter in build_chain(cfg.converters, cfg.converter_options):
            converter.preflight()



def check_events(target: str | None, timeout: float) -> None:
    """``--events``: a URL must be http(s); a file's folder must exist."""
    if timeout <= 0:
        raise ConfigurationError(f"--events-timeout: must be more than 0 (got {timeout:g})")
    if not target or target == "-":
        return
    if "://" in target:
        if not target.startswith(("http://", "https://")):
            raise ConfigurationError(f"--events: {target.split('?', 1)[0]}: give a path, an "
                                     "http:// or https:// URL, or '-'")
        return
    check_output_file(target, "--events")
