"""The keys a job file takes, derived from ``pydistcp copy``'s own option definitions (driver).

A job file's settings are the copy command's flags, named like the API parameters
(the long flag with underscores), so the file, the CLI and ``distcp.copy`` share one
list of settings and one set of defaults: a flag added to ``copy`` becomes a job key
(a top-level one unless listed below) without a line here. Each key lands in one
section: the run (top level), each ``[[datasets]]`` table (what is read: the finder's
options and filters) or each ``[[branches]]`` table (where and how it is written).

The options are read duck-typed (``opts``, ``is_flag``, ``multiple``, ``type.name``)
so that this module needs no click: cli.py hands it ``copy_command.params``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from distcp.options import DURATIONS, SIZES

#: Copy flags that are a ``[[datasets]]`` key: what a dataset is and which files of it.
DATASET_KEYS = ("dataset_glob", "finder", "partition_pattern", "lookback", "ready_marker",
                "include", "exclude", "min_size", "max_size", "min_age",
                "max_age", "links", "files_from", "files_from_manifest")
#: Copy flags that are a ``[[branches]]`` key: each branch's converters and attributes.
BRANCH_KEYS = ("convert", "preserve", "chmod", "chown", "gpg_home", "gpg_recipient",
               "gpg_require_signature",
               "max_expansion_ratio", "max_expanded_bytes", "archive_links",
               "expand_into_parent", "check", "storage_class", "kms_key_id", "acl", "metadata",
               "tags", "requester_pays")
#: Copy flags with no job key, and what the file has instead: the storage tables
#: (options and their secrets by reference), ``log_level``, and ``pydistcp run``'s flags.
NOT_IN_FILE = {
    "src_option": "[storage]", "dst_option": "[storage]", "src_options_file": "[storage]",
    "dst_options_file": "[storage]", "verbose": "log_level", "quiet": "log_level",
    "dry_run": "pydistcp run --dry-run",
    "fork": "a [[branches]] table per destination", "fork_convert": "each [[branches]] "
    "table's convert",
}
#: Flags that read a secret from a file -> the job key that takes a secret reference.
SECRET_FLAGS = {"gpg_passphrase_file": "gpg_passphrase"}
#: ``pydistcp run``'s flags that have no key: they say how this one run behaves.
RUN_ONLY_FLAGS = ("dry_run", "verbose", "quiet")
#: The type names of click's parameter types, as the job file reads them.
_KINDS = {"boolean": "bool", "integer": "int", "integer range": "int", "float": "float",
          "float range": "float", "choice": "str", "path": "str", "file": "str",
          "directory": "str", "text": "str"}


@dataclass(frozen=True, slots=True)
class KeySpec:
    """One job-file key: its type, section and help, read from one option of ``copy``.

    ``kind`` is bool, int, float, str, size (bytes or "256M"), duration (seconds or
    "24h"), list (of strings), table (string values, e.g. Spark settings) or secret
    (a reference only). ``param`` is the click parameter it came from ("" for keys
    of the job file's own, like ``source``)."""

    name: str
    kind: str
    section: str
    help: str = ""
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    path: bool = False
    default: Any = None
    param: str = ""
    flag: str = ""


def long_name(option: Any) -> str:
    """``--gpg-recipient`` -> ``gpg_recipient``: the longest long flag, as the API names it."""
    longs = [o for o in option.opts if o.startswith("--")]
    return str(max(longs, key=len)[2:].replace("-", "_"))


def keys_from_options(options: Iterable[Any]) -> tuple[KeySpec, ...]:
    """The job keys of ``copy``'s options (click.Option objects), then the file's own."""
    specs = [_spec(o) for o in options if getattr(o, "opts", None) and hasattr(o, "is_flag")]
    return (*[s for s in specs if s is not None], *OWN_KEYS)


def _spec(option: Any) -> KeySpec | None:
    """The key of one option, or None for a flag the file does not take."""
    name = long_name(option)
    name = SECRET_FLAGS.get(name, name)
    if name in NOT_IN_FILE or option.count:
        return None
    section = ("dataset" if name in DATASET_KEYS else
               "branch" if name in BRANCH_KEYS or name in SECRET_FLAGS.values() else "run")
    kind, path = _kind(option, name)
    # click 8.3 marks "no default" with a sentinel object: only plain values are defaults
    plain = isinstance(option.default, (str, int, float)) and option.default is not False
    default = option.default if plain else None
    return KeySpec(name, kind, section, help=option.help or "",
                   choices=tuple(getattr(option.type, "choices", ()) or ()),
                   minimum=getattr(option.type, "min", None), path=path,
                   default=None if kind == "secret" else default, param=option.name,
                   flag=max((o for o in option.opts if o.startswith("--")), key=len))


def _kind(option: Any, name: str) -> tuple[str, bool]:
    """(kind, whether a relative value is a path under the job file's folder)."""
    if name in SECRET_FLAGS.values():
        return "secret", False
    if option.is_flag:
        return "bool", False
    if option.multiple:
        return ("table" if option.metavar == "KEY=VALUE" else "list"), False
    if name in SIZES:
        return "size", False
    if name in DURATIONS:
        return "duration", False
    type_name = option.type.name
    # click.Path is named path, file or directory after what it accepts
    path = type_name in ("path", "file", "directory") or option.metavar in ("FILE", "URL")
    return _KINDS.get(type_name, "str"), path


#: Keys of the job file's own (no copy flag): the dataset's source, the branch's
#: destination, name, publisher and routing (the fork's rules operator).
OWN_KEYS = (
    KeySpec("source", "str", "dataset", path=True,
            help="What the dataset reads: any URL or path a copy takes as SRC (required)."),
    KeySpec("name", "str", "branch",
            help="The branch's name (letters, digits, '.', '_', '-'); default fork_<index>."),
    KeySpec("destination", "str", "branch", path=True,
            help="Where the branch writes: any URL or path a copy takes as DST (required)."),
    KeySpec("publisher", "str", "branch", choices=("rename",), default="rename",
            help="How the branch's verified copies are published (rename: staged copies "
                 "are renamed into place per file set)."),
    KeySpec("route_glob", "list", "branch",
            help="The branch receives only files matching one of these globs (a glob with "
                 "'/' matches the path under the dataset root, else the file name)."),
    KeySpec("route_min_size", "size", "branch",
            help="The branch receives only files of at least this size (e.g. 1M)."),
    KeySpec("route_max_size", "size", "branch",
            help="The branch receives only files of at most this size."),
    KeySpec("route_dataset", "list", "branch",
            help="The branch receives only files of datasets whose URN matches one of these "
                 "globs."),
)


def run_flags(options: Iterable[Any]) -> list[Any]:
    """The options of ``copy`` that ``pydistcp run`` takes too: the run section's keys
    (a flag wins over the file's key) and the flags that have no key (RUN_ONLY_FLAGS)."""
    out = []
    for option in options:
        if not (getattr(option, "opts", None) and hasattr(option, "is_flag")):
            continue
        spec = _spec(option)
        if long_name(option) in RUN_ONLY_FLAGS or (spec is not None and spec.section == "run"):
            out.append(option)
    return out
