"""pydistcp: distcp-style file replication on Spark, its public API (driver).

The public API is ``copy``, ``check``, ``status``, ``recover`` and ``cleanup``, typed; the CLI
(``pydistcp copy`` ...) is a thin layer over them.
Importing this package imports neither Spark nor any plugin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from distcp.errors import (
    CatalogError,
    ConfigurationError,
    ConversionError,
    CopyError,
    CredentialsError,
    DestinationBusyError,
    DestinationNameError,
    DestinationNotWritableError,
    DestinationWriteError,
    DistcpError,
    DuplicateDestinationError,
    EndpointUnreachableError,
    EngineRefusedError,
    EnvironmentProblem,
    IntegrityError,
    JavaMissingError,
    PlanningError,
    PluginError,
    PublishError,
    QualityCheckError,
    SourceReadError,
    SparkUnavailableError,
    StateCollisionError,
    StateError,
)

if TYPE_CHECKING:
    from distcp.callbacks import Callback
    from distcp.checking.report import CheckReport
    from distcp.summary import CleanupReport, Failure, StatusReport, Summary

#: The result types, imported when first asked for (``__getattr__``): the ``pydistcp``
#: command imports this package before it knows whether it runs here or hands its run to
#: the resident client (``distcp.resident``), and these imports were 40 ms of its start.
_LAZY = {"CheckReport": "distcp.checking.report", "CleanupReport": "distcp.summary",
         "Failure": "distcp.summary", "StatusReport": "distcp.summary",
         "Summary": "distcp.summary"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'distcp' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

# The error types are exported eagerly, the result types on first use (``_LAZY``); both
# are light (no Spark, no plugin): users catch ``distcp.DistcpError`` and annotate with
# ``distcp.Summary``.
__all__ = [
    "CatalogError", "CheckReport", "CleanupReport", "ConfigurationError", "ConversionError",
    "CopyError", "CredentialsError",
    "DestinationBusyError", "DestinationNameError", "DestinationNotWritableError", "DestinationWriteError", "DistcpError",
    "DuplicateDestinationError", "EndpointUnreachableError", "EngineRefusedError", "EnvironmentProblem",
    "Failure",
    "IntegrityError", "JavaMissingError", "PlanningError", "PluginError", "PublishError",
    "QualityCheckError",
    "SourceReadError", "SparkUnavailableError", "StateCollisionError", "StateError",
    "StatusReport", "Summary",
    "__version__", "check", "cleanup", "copy", "move", "recover", "status",
]
__version__ = "0.1.0"


def copy(
    sources: str | Sequence[str],
    destination: str,
    *,
    callback: Callback | None = None,
    # what is copied
    dataset_glob: str | None = None,
    finder: Literal["single", "glob", "stream", "delta", "iceberg"] | None = None,
    partition_pattern: str | None = None,
    lookback: float | str | None = None,
    ready_marker: str | None = None,
    include: str | Sequence[str] = (),
    exclude: str | Sequence[str] = (),
    min_size: int | str | None = None,
    max_size: int | str | None = None,
    min_age: float | str | None = None,
    max_age: float | str | None = None,
    links: Literal["skip", "follow", "copy"] = "skip",
    files_from: str | None = None,
    files_from_manifest: str | None = None,
    # how an existing destination file is compared (at most one of these)
    overwrite: bool = False,
    checksum: bool = False,
    size_only: bool = False,
    ignore_existing: bool = False,
    compare: Literal["default", "checksum", "size-only", "ignore-existing"] = "default",
    delete: bool = False,
    max_delete: int | None = None,
    dry_run: bool = False,
    preserve: str | None = None,
    chmod: str | None = None,
    chown: str | None = None,
    # converters
    convert: str | Sequence[str] = (),
    gpg_home: str | None = None,
    gpg_passphrase: str | None = None,
    gpg_recipient: str | Sequence[str] = (),
    gpg_require_signature: bool = False,
    max_expansion_ratio: float = 100.0,
    max_expanded_bytes: int | str | None = None,
    archive_links: Literal["refuse", "skip"] = "refuse",
    expand_into_parent: bool = False,
    # quality checks on each staged output
    check: str | Sequence[str] = (),
    # Spark and tasks
    master: str | None = None,
    engine: Literal["auto", "warm", "cold"] | None = None,
    listing: Literal["auto", "driver", "spark"] = "auto",
    publishing: Literal["auto", "driver", "spark"] = "auto",
    copying: Literal["auto", "driver", "spark"] | None = None,
    parallelism: int | None = None,
    tasks: int | None = None,
    conf: Mapping[str, str] | None = None,
    buffer_size: int | str | None = None,
    verify: Literal["digest", "size"] | None = None,
    split_size: int | str | None = None,
    bwlimit: int | str | None = None,
    visibility: Literal["file-set", "file"] = "file-set",
    # the fork: more destinations from the same one read
    fork: str | Sequence[str] = (),
    fork_convert: str | Sequence[str] = (),
    fork_policy: Literal["all", "independent"] = "all",
    fork_operator: str | None = None,
    fork_queue: int = 4,
    fork_queue_timeout: float | str = 600.0,
    # storages
    src_options: Mapping[str, Any] | None = None,
    dst_options: Mapping[str, Any] | None = None,
    # what every object written is created with (docs/guide/object-stores.md)
    storage_class: str | None = None,
    kms_key_id: str | None = None,
    acl: str | None = None,
    metadata: Mapping[str, str] | None = None,
    tags: Mapping[str, str] | None = None,
    requester_pays: bool = False,
    # state, commit and recovery
    state_dir: str | None = None,
    commit_policy: Literal["full", "successful", "partial"] = "successful",
    max_replays: int = 3,
    incremental: bool = False,
    recovery_retention: float | str = "24h",
    # a long-running copy: a streaming query publishing new files as they arrive
    continuous: bool = False,
    interval: float | str = 10.0,
    max_files_per_batch: int = 10_000,
    until_idle: bool = False,
    settle: float | str = 1.0,
    listing_after_seen: bool = False,
    full_listing_every: float | str = 600.0,
    # catalog registration of published partitions
    catalog_table: str | None = None,
    catalog_partitions: str | None = None,
    # Iceberg tables (finder="iceberg"): the destination SQL catalog and table name
    iceberg_catalog: str | None = None,
    iceberg_table: str | None = None,
    # output
    progress: bool = True,
    summary_json: str | None = None,
    metrics_file: str | None = None,
    events: str | None = None,
    events_timeout: float | str | None = None,
    log_dir: str | None = None,
    log_file: str | None = None,
    log_level: Literal["error", "notice", "info", "debug"] | None = None,
    # deprecated spellings of convert, conf and gpg_recipient (DeprecationWarning)
    converters: Sequence[str] | None = None,
    spark_conf: Mapping[str, str] | None = None,
    gpg_recipients: Sequence[str] | None = None,
) -> Summary:
    """Copy ``sources`` to ``destination`` as a Spark job and return the Summary.

    Each parameter is the CLI flag of the same name (``pydistcp copy --help``), with
    underscores: ``checksum=True`` is ``--checksum``, ``convert=["decrypt", "gunzip"]``
    is ``--convert decrypt,gunzip``. Where the CLI repeats ``KEY=VALUE`` the API takes
    a mapping (``conf``, ``src_options``, ``dst_options``, ``metadata``, ``tags``: the
    CLI's ``--metadata`` and ``--tag``); the CLI's ``--*-options-file``
    and ``--gpg-passphrase-file`` are for keeping secrets out of argv, here the values
    are passed directly (``gpg_passphrase``); ``progress=False`` is ``--no-progress``.
    Sizes take bytes or ``"256M"``, durations seconds or ``"24h"``. ``None`` means
    unset: the ``PYDISTCP_*`` variable (``master``, ``engine``, ``parallelism``,
    ``buffer_size``, ``verify``, ``preserve``, ``copying``) or the CLI's default applies.
    ``summary_json`` writes the Summary as JSON to that file (``"-"``: stdout);
    ``metrics_file`` writes Prometheus text-format metrics there, on ticks and at the end;
    ``events`` sends OpenLineage events there (a path, an http(s) URL, ``"-"``).

    An active SparkSession is used and left running; otherwise one is started with
    ``master`` and stopped at the end. Raises ``DistcpError`` subclasses: a bad value
    is a ``ConfigurationError``, a storage refusing the credentials a
    ``CredentialsError``, one not answering an ``EndpointUnreachableError``; per-file
    failures are reported in the summary (``summary.ok`` is False).
    """
    params = dict(locals())  # first: the parameters only, every one by its name
    for name in ("sources", "destination", "callback"):
        del params[name]
    from distcp.options import configuration_options

    # here, not in _copy: a deprecated spelling's warning points at the caller's line
    return _copy(sources, destination, callback, configuration_options(params), summary_json)


def move(sources: str | Sequence[str], destination: str, *, callback: Callback | None = None,
         delete_empty_src_dirs: bool = False, **options: Any) -> Summary:
    """``copy``, then each source file is deleted once its file set is published,
    recorded and its copy found at the destination with the copied size
    (``pydistcp move``). Takes ``copy``'s keyword parameters; ``max_delete`` refuses
    the run, before any change, when it would delete more source files (plus
    ``delete``'s extras). Files skipped as identical at the destination lose their
    source too; failed files, files skipped by ``ignore_existing``, symbolic links and
    archives expanded by a converter keep theirs. Source directories are left, unless
    ``delete_empty_src_dirs`` (``--delete-empty-src-dirs``): those left empty go too.
    A run killed at any instant loses no file: the commit log's replay finishes it."""
    import inspect

    known = inspect.signature(copy).parameters
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigurationError(f"{', '.join(unknown)}: not a parameter of distcp.move")
    params = {n: p.default for n, p in known.items()
              if n not in ("sources", "destination", "callback")}
    params.update(options)
    params["move"] = True
    params["delete_empty_src_dirs"] = delete_empty_src_dirs
    from distcp.options import configuration_options

    return _copy(sources, destination, callback, configuration_options(params),
                 params.get("summary_json"))


def _copy(sources: str | Sequence[str], destination: str, callback: Callback | None,
          options: dict[str, Any], summary_json: str | None) -> Summary:
    """``copy`` and ``move``: configuration options -> configuration -> one run on Spark."""
    from distcp.callbacks import DEFAULT_CALLBACK
    from distcp.configuration import CopyConfiguration
    from distcp.driver_errors import driver_errors
    from distcp.run.pipeline import run_copy

    srcs = [sources] if isinstance(sources, str) else list(sources)
    try:
        cfg = CopyConfiguration.build(srcs, destination, **options)
    except ConfigurationError:
        raise
    except (ValueError, TypeError) as exc:  # int("two") and the like: a bad value given
        raise ConfigurationError(f"bad option value: {exc}") from exc
    with driver_errors():
        if cfg.continuous:
            from distcp.run.continuous import run_continuous

            summary = run_continuous(cfg, callback or DEFAULT_CALLBACK)
        else:
            summary = run_copy(cfg, callback or DEFAULT_CALLBACK)
    _write_summary(summary, summary_json)
    return summary


def _write_summary(summary: Summary, target: str | None) -> None:
    """``summary_json``: the file (checked writable before the run), or ``-`` stdout."""
    if not target:
        return
    if target == "-":
        import sys

        sys.stdout.write(summary.to_json() + "\n")
        sys.stdout.flush()
    else:
        with open(target, "w", encoding="utf-8") as f:
            f.write(summary.to_json())


#: The finders ``check`` refuses, and why: one line each.
_NOT_CHECKED = {
    "stream": "not supported: check the topic folders as plain folders (--dataset-glob)",
}


def check(
    sources: str | Sequence[str],
    destination: str,
    *,
    callback: Callback | None = None,
    one_way: bool = False,
    size_only: bool = False,
    stored_digests: bool = True,
    # what is compared: as ``copy`` selects it
    finder: Literal["single", "glob", "stream", "delta", "iceberg"] | None = None,
    dataset_glob: str | None = None,
    include: str | Sequence[str] = (),
    exclude: str | Sequence[str] = (),
    min_size: int | str | None = None,
    max_size: int | str | None = None,
    min_age: float | str | None = None,
    max_age: float | str | None = None,
    links: Literal["skip", "follow", "copy"] = "skip",
    files_from: str | None = None,
    # Iceberg tables (finder="iceberg"): the destination SQL catalog and table name
    iceberg_catalog: str | None = None,
    iceberg_table: str | None = None,
    # report files (rclone check's)
    combined: str | None = None,
    missing_on_dst: str | None = None,
    missing_on_src: str | None = None,
    differ: str | None = None,
    match: str | None = None,
    error: str | None = None,
    # Spark, storages, state
    master: str | None = None,
    engine: Literal["auto", "warm", "cold"] | None = None,
    parallelism: int | None = None,
    tasks: int | None = None,
    conf: Mapping[str, str] | None = None,
    buffer_size: int | str | None = None,
    src_options: Mapping[str, Any] | None = None,
    dst_options: Mapping[str, Any] | None = None,
    state_dir: str | None = None,
    summary_json: str | None = None,
    log_dir: str | None = None,
    copying: Literal["auto", "driver", "spark"] = "auto",
) -> CheckReport:
    """Compare ``sources`` with their copy at ``destination``, like ``rclone check``.

    Both sides are listed as ``copy`` lists them (same dataset mapping and filters);
    each path is equal (``=``), only in the source (``-``), only in the destination
    (``+``), differing (``*``) or unreadable (``!``). Files of equal size are compared
    by digest; where the destination's state records the digest of a
    file whose source still has the size and mtime it had when copied, that digest
    stands in for the source and only the destination is read; few files are read in
    this process (``copying``, as ``copy`` copies: ``report.read_here`` says why), more
    on Spark. ``size_only``: sizes
    only, nothing read. ``one_way``: files only in the destination are not reported.
    ``stored_digests=False`` reads both sides of every file. A Delta table
    (``finder="delta"``, or a table a ``dataset_glob`` matches) is compared at the
    version the destination holds: that version's files and log, not the source's
    newer ones. An Iceberg table (``finder="iceberg"``) is compared at the snapshot the
    destination holds (its ``iceberg_catalog`` table's, else its newest metadata file's):
    that snapshot's data and delete files compared, its metadata file, manifest list and
    manifests (rewritten for the destination) only required to be there. A table behind
    its source is not a difference: ``report.tables`` says by how many versions or
    snapshots. ``finder="stream"`` is refused (ConfigurationError).

    ``combined`` ... ``error`` write rclone's report files (``combined``: one line per
    path with its symbol; the others: the paths of one verdict, one a line).
    ``summary_json`` writes the report as JSON (``"-"``: stdout). The other
    parameters are ``copy``'s. Returns the ``CheckReport``; ``report.ok`` is True only
    when both sides are identical.
    """
    params = dict(locals())
    reports = {name: params.pop(name) for name in
               ("combined", "missing_on_dst", "missing_on_src", "differ", "match", "error")}
    settings = {name: params.pop(name) for name in ("one_way", "size_only", "stored_digests")}
    for name in ("sources", "destination", "callback"):
        del params[name]
    from distcp.callbacks import DEFAULT_CALLBACK
    from distcp.checking.compare import CheckSettings
    from distcp.configuration import CopyConfiguration
    from distcp.driver_errors import driver_errors
    from distcp.options import configuration_options
    from distcp.run.pipeline import run_check

    srcs = [sources] if isinstance(sources, str) else list(sources)
    if finder in _NOT_CHECKED:
        raise ConfigurationError(f"check --finder {finder}: {_NOT_CHECKED[finder]}")
    try:
        cfg = CopyConfiguration.build(srcs, destination, **configuration_options(params))
    except ConfigurationError:
        raise
    except (ValueError, TypeError) as exc:
        raise ConfigurationError(f"bad option value: {exc}") from exc
    with driver_errors():
        report = run_check(cfg, CheckSettings(**settings), callback or DEFAULT_CALLBACK)
    report.write(reports)
    _write_text(report.to_json(), summary_json)
    return report


def _write_text(text: str, target: str | None) -> None:
    if target == "-":
        import sys

        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    elif target:
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)


def status(destination: str | None = None, *, state_dir: str | None = None,
           dst_options: Mapping[str, Any] | None = None) -> StatusReport:
    """The report ``pydistcp status --json`` prints (the CLI calls this): the running
    job, pending and set-aside commits, watermarks per dataset, recoverable copies."""
    from distcp.commit.status import existing_state_root, status_report
    from distcp.driver_errors import driver_errors

    options = dict(dst_options or {})
    with driver_errors(_display(state_dir or destination)):
        return status_report(existing_state_root(destination, state_dir, options)[0], options)


def recover(destination: str | None = None, *, state_dir: str | None = None,
            dst_options: Mapping[str, Any] | None = None, max_replays: int = 3,
            src_options: Mapping[str, Any] | None = None, events: str | None = None,
            events_timeout: float | str = 10.0) -> Summary:
    """Finish earlier runs' pending commits, copying nothing new (``pydistcp recover``).
    ``src_options``: the sources' storage options, for a pending move's deletions;
    ``events``: where the replayed commits' events go (as ``copy``'s ``events``)."""
    from distcp.commit.status import existing_state_root, recover_only
    from distcp.driver_errors import driver_errors
    from distcp.events.sinks import EventSink
    from distcp.preflight import check_events
    from distcp.quantities import parse_duration

    options = dict(dst_options or {})
    timeout = parse_duration(events_timeout)
    check_events(events, timeout)
    with driver_errors(_display(state_dir or destination)):
        root = existing_state_root(destination, state_dir, options)[0]
        return recover_only(root, options, max_replays, dict(src_options or {}),
                            EventSink(events, root, options, timeout), destination)


def cleanup(destination: str, *, older_than: float | str = "1h", state_dir: str | None = None,
            dst_options: Mapping[str, Any] | None = None, dry_run: bool = False,
            forget_registrations: bool = False) -> CleanupReport:
    """Free what runs that are no longer running left under ``destination``, when older
    than ``older_than`` (seconds or ``"1h"``; 0: everything dead runs left): staging and
    progress folders, split files no run resumed, verified copies kept for recovery and
    (object stores) orphaned multipart uploads. Staged files a pending commit will
    publish are kept. ``forget_registrations``: also drop the pending catalog
    registrations of earlier runs (their data is published; the partitions are then
    left for you to register). ``dry_run``: report what would be freed, remove nothing. Raises
    ``DestinationBusyError`` while a run holds the destination (``pydistcp cleanup``
    calls this)."""
    import os
    from dataclasses import replace

    from distcp.commit.orphans import forget_registrations as forget
    from distcp.commit.orphans import free_dead_runs
    from distcp.commit.status import existing_state_root
    from distcp.driver_errors import driver_errors
    from distcp.quantities import parse_duration
    from distcp.state.lock import DestinationLock

    options = dict(dst_options or {})
    try:
        age = parse_duration(older_than)
    except ConfigurationError as exc:
        raise ConfigurationError(f"older_than: {exc}") from None
    with driver_errors(_display(state_dir or destination)):
        root = existing_state_root(destination, state_dir, options)[0]
        with DestinationLock(root, options, f"cleanup-{os.getpid()}", command="cleanup"):
            report = free_dead_runs(destination, root, options, age, dry_run)
            if forget_registrations:
                report = replace(report, registrations=forget(root, options, dry_run))
            return report


def _display(url: str | None) -> str | None:
    from distcp.storage.filesystems import display

    return display(url) if url else None
