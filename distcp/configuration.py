"""CopyConfiguration: every setting of one run, immutable and validated once (driver and executor).

Built by ``distcp.copy`` (which the CLI calls) through distcp.options; explicit values
win over ``PYDISTCP_*`` environment variables, which win over defaults. Nothing
here imports Spark or click.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from distcp.commit.catalog_steps import pattern_problem, table_problem
from distcp.converters.base import ConverterOptions, check_chain
from distcp.errors import ConfigurationError
from distcp.filters import FileFilter
from distcp.quantities import parse_duration, parse_size
from distcp.storage import storage_for
from distcp.storage import writes as writeopts

if TYPE_CHECKING:
    from distcp.chmod import Chmod
    from distcp.chown import Chown

PRESERVE_LETTERS = "ugptb"
LOG_LEVELS = ("error", "notice", "info", "debug")
FORK_POLICIES = ("all", "independent")
Verify = Literal["digest", "size"]
#: A URL with user:password@ in it: refused, the secret would be in argv, logs and state.
CREDENTIALS_IN_URL = re.compile(r"^[a-zA-Z][\w+.-]*://[^/@]*:[^/@]*@")


@dataclass(frozen=True)
class CopyConfiguration:
    """The settings of one copy run (see ``pydistcp copy --help`` for each)."""

    sources: tuple[str, ...]
    destination: str
    dataset_glob: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    overwrite: bool = False
    delete: bool = False
    dry_run: bool = False
    preserve: str = "pt"
    converters: tuple[str, ...] = ()
    converter_options: ConverterOptions = field(default_factory=ConverterOptions)
    master: str = "local[*]"
    parallelism: int | None = None
    spark_conf: tuple[tuple[str, str], ...] = ()
    buffer_size: int = 8 << 20
    file_cost: int = 256 << 10
    verify: Verify = "digest"
    progress: bool = True
    summary_json: str | None = None
    #: Prometheus text-format file written on progress ticks and at the end (``--metrics-file``).
    metrics_file: str | None = None
    #: Where data-availability events go (``--events``): a path, an http(s) URL, ``-``;
    #: None: STATE/events/events.jsonl.
    events: str | None = None
    events_timeout: float = 10.0
    src_options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    dst_options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    log_dir: str | None = None
    state_dir: str | None = None
    commit_policy: str = "successful"
    max_replays: int = 3
    #: ``DB.TABLE`` whose partitions each published file set registers (distcp.commit.catalog_steps).
    catalog_table: str | None = None
    #: How partition values are read from folders: ``dt={0}-{1}-{2}/hr={3}``; None: key=value.
    catalog_partitions: str | None = None
    #: ``--finder iceberg``: the SQL catalog (``sqlite:///catalog.db``) each replicated
    #: metadata version is registered in (distcp.commit.iceberg_steps); None: none.
    iceberg_catalog: str | None = None
    #: Its table's ``NAMESPACE.TABLE`` (None: from the destination's folders).
    iceberg_table: str | None = None
    incremental: bool = False
    recovery_retention: float = 24 * 3600.0
    #: Files larger than this are copied as ranges by several tasks (None: never split).
    split_size: int | None = None
    #: Local masters: "auto" (the warm engine if it runs), "warm" (start it if needed),
    #: "cold" (a JVM of this run's own). See distcp.spark.engine.
    engine: str = "auto"
    #: Who lists trees: "driver", "spark" (executors list subtrees or key ranges) or
    #: "auto" (spark for a local tree of more than 250,000 entries when the session opens
    #: cheaply and for an S3 prefix of more than 100,000 keys, the driver otherwise:
    #: measured faster either side). distcp.spark.listing.
    listing: str = "auto"
    #: Who carries out per-file commit steps (renames, completes, source deletes):
    #: "driver", "spark" (executors, in pieces) or "auto" (spark for a large step on a
    #: cluster whose session already runs). distcp.commit.fanout.
    publishing: str = "auto"
    #: Who runs the copy tasks: "spark" (a Spark job), "driver" (this process, the same
    #: task code in threads) or "auto" (the driver for a small plan on a local master,
    #: where a Spark job's start costs more than the copy). distcp.run.choice.
    copying: str = "auto"
    #: A long-running copy (``--continuous``): a Structured Streaming query whose
    #: micro-batches, every ``interval`` seconds and of at most ``max_files_per_batch``
    #: files, each publish the new files found (distcp.run.continuous). ``until_idle``: stop
    #: once a read finds nothing new and nothing waiting; ``settle``: a file younger than
    #: this many seconds is left for a later batch (its writer may not be done).
    continuous: bool = False
    interval: float = 10.0
    max_files_per_batch: int = 10_000
    until_idle: bool = False
    settle: float = 1.0
    #: ``--listing-after-seen``: each read of a source on a store that lists from a key
    #: (S3) lists only the keys after those it has seen (new files' names sort last),
    #: and the whole tree every ``full_listing_every`` seconds.
    listing_after_seen: bool = False
    full_listing_every: float = 600.0
    #: Symbolic links in a local source tree: skipped and reported, followed, or copied
    #: as links (the destination must hold links: see ``preflight.check_links``).
    links: str = "skip"
    #: How an existing destination file is compared (rclone's -c, --size-only,
    #: --ignore-existing): "default", "checksum", "size-only" or "ignore-existing".
    compare: str = "default"
    #: With delete: refuse the run when the plan deletes more entries (rclone --max-delete).
    max_delete: int | None = None
    #: Exactly this many tasks copy whole files (split files add their range tasks).
    tasks: int | None = None
    #: rclone's size and age filters (bytes; seconds before the run's start).
    min_size: int | None = None
    max_size: int | None = None
    min_age: float | None = None
    max_age: float | None = None
    #: Bytes per second for the whole run, shared by its concurrent tasks (rclone --bwlimit).
    bwlimit: int | None = None
    #: One JSON line per decision and outcome (copied, skipped, deleted, failed).
    log_file: str | None = None
    #: rclone's levels: error (-q), notice (default), info (-v: every decision), debug (-vv).
    log_level: str = "notice"
    #: The run's start (seconds since the epoch): "now" for the age filters.
    started: float = field(default_factory=time.time, compare=False)
    #: When objects appear on an object store: "file-set" (all files of a set at its
    #: publish) or "file" (each file, whole, as soon as it is copied: one PutObject for
    #: a small file). See distcp.planning.visibility.
    visibility: str = "file-set"
    #: The files to copy, one path a line relative to SRC (``-``: stdin), instead of
    #: walking SRC (rclone --files-from). See distcp.planning.filelists.
    files_from: str | None = None
    #: The files to copy as a CSV or Parquet manifest of bucket,key[,size,
    #: last_modified_date,e_tag] rows, like an S3 Inventory report.
    files_from_manifest: str | None = None
    #: How datasets are found: "single", "glob" or "stream" (None: glob with
    #: --dataset-glob, else single). See distcp.finders.
    finder: str | None = None
    #: A stream dataset's partition folders below each topic (None: yyyy/MM/dd/HH, UTC).
    partition_pattern: str | None = None
    #: Stream datasets: partitions older than the low watermark minus this (seconds)
    #: are not listed again (None: every partition is listed).
    lookback: float | None = None
    #: Stream datasets: a partition is copied once this file is in it (``_SUCCESS``);
    #: with ``{file}`` in it, each file once its own marker is beside it (``{file}.ready``).
    ready_marker: str | None = None
    #: More destinations written from the same one read (fork branches fork_1, ...;
    #: DST is fork_0). See distcp.fork.
    fork: tuple[str, ...] = ()
    #: ``N=CHAIN``: the converters of the N-th --fork (from 1); none by default.
    fork_convert: tuple[str, ...] = ()
    #: "all": a file is published in no branch unless every branch can publish it;
    #: "independent": each branch publishes what it completed.
    fork_policy: str = "all"
    #: Which branches receive a file: "identity", "rules", or a ``pydistcp.forks``
    #: entry point ("": rules when a branch has routing rules, else identity).
    fork_operator: str = ""
    #: Chunks of up to 1 MiB each branch's queue holds (the task's memory per branch).
    fork_queue: int = 4
    #: Seconds a branch may leave its full queue untouched before it is failed.
    fork_queue_timeout: float = 600.0
    #: ``--check NAME[=ARG]``: quality checks every staged output passes before it may
    #: publish (distcp.quality); a failure fails that file.
    check: tuple[str, ...] = ()
    #: rsync --chmod rules (``D755,F644``, ``u+rwx,g-w``) for what the run writes,
    #: instead of the source's modes. See distcp.chmod.
    chmod: str | None = None
    #: rsync --chown USER:GROUP (names or numeric ids) for what the run writes.
    chown: str | None = None
    #: ``pydistcp move``: each source file is deleted once its copy is published
    #: (distcp.commit.move_steps); files identical at the destination too.
    move: bool = False
    #: With ``move``: remove the source directories it left empty (rclone's flag).
    delete_empty_src_dirs: bool = False
    #: What every object written to DST is created with (``distcp.storage.writes``):
    #: the store's storage class (Azure: access tier), its managed key (S3 SSE-KMS,
    #: GCS CMEK, Azure encryption scope), a canned ACL, user metadata and tags (pairs,
    #: from a mapping or ``KEY=VALUE`` strings); requester pays on every bucket read
    #: or written. A store that has one of them not is refused before Spark starts.
    storage_class: str | None = None
    kms_key_id: str | None = None
    acl: str | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    tags: tuple[tuple[str, str], ...] = ()
    requester_pays: bool = False

    def __post_init__(self) -> None:
        """Refuse the first bad setting, in a fixed order (the user hears of one at a time,
        and always the same one for the same flags), then the converter chain. The
        write options then ride in the storage options (``distcp.storage.writes``)."""
        self._take_writes()
        problem = next((p for p in _problems(self) if p), None)
        if problem:
            raise ConfigurationError(problem)
        if self.converters:
            check_chain(self.converters, self.converter_options)
        if self.check:
            from distcp.quality import check_list

            check_list(self.check)

    def _take_writes(self) -> None:
        """--metadata/--tag as sorted pairs (a mapping or ``KEY=VALUE`` strings given),
        then the write options put into DST's storage options, and requester pays into
        the sources' (the buckets read are paid for by the requester too)."""
        for name, flag in (("metadata", "--metadata"), ("tags", "--tag")):
            object.__setattr__(self, name, writeopts.pairs(getattr(self, name), flag))
        object.__setattr__(self, "dst_options", writeopts.carrying(self.dst_options, self.writes))
        object.__setattr__(self, "src_options", writeopts.carrying(
            self.src_options, writeopts.WriteOptions(requester_pays=self.requester_pays)))

    @property
    def writes(self) -> writeopts.WriteOptions:
        """The write options as one value (what the destination's storage applies)."""
        return writeopts.WriteOptions(self.storage_class, self.kms_key_id, self.acl,
                                      self.metadata, self.tags, self.requester_pays)

    @classmethod
    def build(cls, sources: tuple[str, ...] | list[str], destination: str,
              **options: Any) -> CopyConfiguration:
        """Build from keyword options, filling unset ones from ``PYDISTCP_*`` env vars."""
        names = {f.name for f in fields(cls)}
        _refuse_unknown(options, names)
        # a setting of both (buffer_size) goes to both: the run's copy loop and converters
        run = {k: v for k, v in options.items() if k in names or k not in _CONVERTER_FIELDS}
        conv = _with_caller_paths(_with_env_passphrase(
            {k: v for k, v in options.items() if k in _CONVERTER_FIELDS}))
        run = _as_values(_parsed_strings(_with_environment(run)))
        opts = ConverterOptions(**conv) if conv else ConverterOptions()
        return cls(sources=tuple(sources), destination=destination,
                   converter_options=opts, **run)

    def with_(self, **changes: Any) -> CopyConfiguration:
        return replace(self, **changes)

    @cached_property
    def chmod_rules(self) -> Chmod | None:
        """The parsed --chmod (checked at construction), or None."""
        from distcp.chmod import parse_chmod

        return parse_chmod(self.chmod) if self.chmod is not None else None

    @cached_property
    def chown_ids(self) -> Chown | None:
        """The parsed --chown (checked at construction), or None."""
        from distcp.chown import parse_chown

        return parse_chown(self.chown) if self.chown is not None else None

    @property
    def file_filter(self) -> FileFilter:
        """The run's include/exclude/size/age filters, aged from the run's start."""
        return FileFilter(self.include, self.exclude, self.min_size, self.max_size,
                          self.min_age, self.max_age, now=self.started)


COMPARE_MODES = ("default", "checksum", "size-only", "ignore-existing")
COMMIT_POLICIES = ("full", "successful", "partial")
ENGINES = ("auto", "warm", "cold")
VISIBILITIES = ("file", "file-set")
LINK_MODES = ("skip", "follow", "copy")
LISTING_MODES = ("auto", "driver", "spark")
_FILTER_BOUNDS = ("min_size", "max_size", "min_age", "max_age")


def _problems(c: CopyConfiguration) -> Iterator[str | None]:
    """Each check's complaint (None when the setting is fine), lazily and in the order
    the user is told about them: the order is behaviour, keep it."""
    yield None if c.sources else "at least one source is required"
    yield _not_one_of(c.compare, COMPARE_MODES, "compare: unknown mode {!r}")
    yield _below(c.tasks, 1, "--tasks must be at least 1")
    yield _preserve_problem(c.preserve)
    yield _attributes_problem(c.chmod, c.chown)
    yield _not_one_of(c.verify, ("digest", "size"),
                      "--verify must be 'digest' or 'size', not {!r}")
    yield _below(c.parallelism, 1, "--parallelism must be at least 1")
    yield _not_one_of(c.commit_policy, COMMIT_POLICIES,
                      "--commit-policy must be full, successful or partial, not {!r}")
    yield _not_one_of(c.engine, ENGINES, "--engine must be auto, warm or cold, not {!r}")
    yield _below(c.max_replays, 1, "--max-replays must be at least 1")
    yield table_problem(c.catalog_table)
    yield pattern_problem(c.catalog_partitions)
    yield ("--catalog-partitions needs --catalog-table"
           if c.catalog_partitions and not c.catalog_table else None)
    yield _credentials_problem((*c.sources, c.destination))
    yield _split_size_problem(c.split_size, c.converters)
    yield ("--split-size cannot be used with --check: a check needs a file's whole output "
           "in one task (drop one of the two options)") if c.split_size and c.check else None
    yield _not_one_of(c.visibility, VISIBILITIES,
                      "--visibility must be file or file-set, not {!r}")
    yield _not_one_of(c.links, LINK_MODES, "--links must be skip, follow or copy, not {!r}")
    yield _not_one_of(c.listing, LISTING_MODES,
                      "--listing must be auto, driver or spark, not {!r}")
    yield _not_one_of(c.publishing, LISTING_MODES,
                      "--publishing must be auto, driver or spark, not {!r}")
    yield _not_one_of(c.copying, LISTING_MODES,
                      "--copying must be auto, driver or spark, not {!r}")
    yield _copying_problem(c)
    yield from (_below(getattr(c, name), 0, f"--{name.replace('_', '-')} must not be negative")
                for name in _FILTER_BOUNDS)
    yield _empty_range(c.min_size, c.max_size,
                       "--min-size is larger than --max-size: nothing could match")
    yield _empty_range(c.min_age, c.max_age,
                       "--min-age is larger than --max-age: nothing could match")
    yield _not_one_of(c.log_level, LOG_LEVELS,
                      f"--log-level must be one of {', '.join(LOG_LEVELS)}, not {{!r}}")
    yield _below(c.bwlimit, 1024, "--bwlimit must be at least 1K (bytes per second)")
    yield _below(c.buffer_size, 4096, "--buffer-size must be at least 4 KiB")
    yield _list_problem(c)
    yield _stream_problem(c)
    yield _fork_problem(c)
    yield _continuous_problem(c)
    yield writeopts.values_problem(c.writes)


FINDER_NAMES = ("single", "glob", "stream", "delta", "iceberg")
_STREAM_ONLY = ("partition_pattern", "lookback", "ready_marker")


def _stream_problem(c: CopyConfiguration) -> str | None:
    """The finder is known and fits --dataset-glob; the stream settings come with
    --finder stream (elsewhere they would be ignored, silently)."""
    if c.finder is not None and c.finder not in FINDER_NAMES:
        return f"--finder must be single, glob, stream, delta or iceberg, not {c.finder!r}"
    if (c.iceberg_catalog or c.iceberg_table) and c.finder != "iceberg":
        return "--iceberg-catalog and --iceberg-table need --finder iceberg"
    if c.iceberg_table and not c.iceberg_catalog:
        return "--iceberg-table needs --iceberg-catalog"
    if c.iceberg_table and (c.iceberg_table.count(".") < 1 or "" in c.iceberg_table.split(".")):
        return f"--iceberg-table: not NAMESPACE.TABLE: {c.iceberg_table!r}"
    if c.finder in ("delta", "iceberg") and (c.files_from or c.files_from_manifest or c.delete
                                or c.converters or c.move):
        return f"--finder {c.finder} copies a table's new versions as they are: it takes no " \
               "--files-from, --files-from-manifest, --delete, --convert, nor move"
    if c.finder == "glob" and not c.dataset_glob:
        return "--finder glob needs --dataset-glob"
    if c.finder == "single" and c.dataset_glob:
        return "--finder single takes no --dataset-glob"
    if c.finder != "stream":
        given = next((n for n in _STREAM_ONLY if getattr(c, n) is not None), None)
        return f"--{given.replace('_', '-')} needs --finder stream" if given else None
    if c.files_from or c.files_from_manifest or c.delete:
        return "--finder stream lists partitions itself: it takes no --files-from, " \
               "--files-from-manifest or --delete"
    if c.lookback is not None and c.lookback < 0:
        return "--lookback must not be negative"
    if c.ready_marker is not None and (not c.ready_marker.strip() or "/" in c.ready_marker):
        return f"--ready-marker {c.ready_marker!r}: give a file name (_SUCCESS or {{file}}.ready)"
    return None  # the pattern is read by the finder (distcp.datasets.partitions)


def _copying_problem(c: CopyConfiguration) -> str | None:
    """What ``--copying driver`` cannot do: the work that only Spark tasks share."""
    if c.copying != "driver":
        return None
    if c.split_size and not local_ends(c):
        return ("--copying driver splits files (--split-size) only between local trees, "
                "whose ranges are written at their offsets: elsewhere ranges are Spark "
                "tasks; use --copying auto or spark")
    return None


def local_sources(c: CopyConfiguration) -> bool:
    """Whether every source is this machine's filesystem."""
    return all(storage_for(url, dict(c.src_options)).capabilities.local_paths
               for url in c.sources)


def local_ends(c: CopyConfiguration) -> bool:
    """Whether every source, the destination and the state folder are this machine's
    filesystem (no object store's client, with its threads and pools, in the run)."""
    return local_sources(c) and _local_outputs(c)


def forked_ends(c: CopyConfiguration) -> bool:
    """Whether processes this one forks may copy the run's files: every source read
    through a storage that stays whole in a child (``Storage.reads_forked``: this
    machine's filesystem, S3 on the lean path, GCS), the destination and the state folder on
    this machine's filesystem (no object store's client writing, with its threads and
    pools)."""
    return all(storage_for(url, dict(c.src_options)).reads_forked(url)
               for url in c.sources) and _local_outputs(c)


def _local_outputs(c: CopyConfiguration) -> bool:
    """Whether the destination and the state folder are this machine's filesystem."""
    options = dict(c.dst_options)
    return all(storage_for(url, options).capabilities.local_paths
               for url in (c.destination, *((c.state_dir,) if c.state_dir else ())))


def _continuous_problem(c: CopyConfiguration) -> str | None:
    """What a continuous copy takes: new files of plain trees and of stream datasets,
    published as they come; its own Spark session (a local master or a cluster's) or
    the warm engine, never a remote Spark Connect server (whose worker could not tell
    that the client ended)."""
    if not c.continuous:
        given = next((n for n in ("until_idle",) if getattr(c, n)), None)
        given = given or next((n for n in ("listing_after_seen",) if getattr(c, n)), None)
        return f"--{given.replace('_', '-')} needs --continuous" if given else None
    refused = next((flag for flag, on in (
        ("--dry-run", c.dry_run), ("--delete", c.delete), ("move", c.move),
        ("--files-from", bool(c.files_from or c.files_from_manifest)),
        (f"--finder {c.finder}", c.finder in ("delta", "iceberg")),
        ("a Spark Connect master", c.master.startswith("sc://"))) if on), None)
    if refused:
        return (f"--continuous cannot be used with {refused}: it copies the new files of "
                "trees and stream datasets as they arrive, in its own session or the "
                "warm engine")
    return (_below(c.interval, 0.1, "--interval must be at least 0.1 (seconds)")
            or _below(c.max_files_per_batch, 1, "--max-files-per-batch must be at least 1")
            or _below(c.settle, 0, "--settle must not be negative")
            or _below(c.full_listing_every, 1, "--full-listing-every must be at least 1 s"))


def _fork_problem(c: CopyConfiguration) -> str | None:
    """The fork's own settings (the branches themselves: distcp.fork.branches)."""
    if c.fork_convert and not c.fork:
        return "--fork-convert needs a --fork to apply to"
    return (_not_one_of(c.fork_policy, FORK_POLICIES,
                        "--fork-policy must be all or independent, not {!r}")
            or _below(c.fork_queue, 1, "--fork-queue must be at least 1 (chunk)")
            or _below(c.fork_queue_timeout, 0.001, "--fork-queue-timeout must be positive"))


def _list_problem(c: CopyConfiguration) -> str | None:
    """A list of files replaces the walk of one source tree: it names paths relative to
    one SRC, and tells nothing of what the source lacks (so --delete has no basis)."""
    if not (c.files_from or c.files_from_manifest):
        return None
    if c.files_from and c.files_from_manifest:
        return "--files-from and --files-from-manifest are mutually exclusive"
    flag = "--files-from" if c.files_from else "--files-from-manifest"
    if len(c.sources) > 1:
        return (f"{flag} takes one SRC (the root its paths are relative to), not "
                f"{len(c.sources)}")
    if c.dataset_glob:
        return f"{flag} and --dataset-glob are mutually exclusive"
    if c.delete:
        return (f"{flag} cannot be used with --delete: the source is not listed, so "
                "nothing tells what it lacks")
    return None


def _not_one_of(value: str, allowed: tuple[str, ...], complaint: str) -> str | None:
    """``complaint`` with the value's repr in its ``{!r}`` when the value is not allowed."""
    return None if value in allowed else complaint.format(value)


def _below(value: float | None, minimum: float, complaint: str) -> str | None:
    """``complaint`` when an optional number is set and under its floor (unset is fine)."""
    return complaint if value is not None and value < minimum else None


def _empty_range(low: float | None, high: float | None, complaint: str) -> str | None:
    """``complaint`` when both bounds of a filter are set and no value can meet both."""
    return complaint if low is not None and high is not None and low > high else None


def _preserve_problem(preserve: str) -> str | None:
    """Names the unknown letters, sorted, so a typo is easy to spot."""
    bad = set(preserve) - set(PRESERVE_LETTERS)
    if not bad:
        return None
    return f"--preserve takes letters from {PRESERVE_LETTERS!r}, not {''.join(sorted(bad))!r}"


def _attributes_problem(chmod: str | None, chown: str | None) -> str | None:
    """A --chmod or --chown that does not parse, named with the bad part."""
    from distcp.chmod import parse_chmod
    from distcp.chown import parse_chown

    try:
        if chmod is not None:
            parse_chmod(chmod)
        if chown is not None:
            parse_chown(chown)
    except ConfigurationError as exc:
        return str(exc)
    return None


def _credentials_problem(urls: tuple[str, ...]) -> str | None:
    """A secret in a URL would show in logs and process lists: refuse it and say where
    that kind of storage takes its secrets instead."""
    for url in urls:
        if CREDENTIALS_IN_URL.match(url):
            scheme = url.split("://", 1)[0]
            return (f"a {scheme}:// URL with credentials in it is refused (they would show "
                    f"in logs and process lists); {_where_secrets_go(scheme)}")
    return None


def _where_secrets_go(scheme: str) -> str:
    if scheme in ("s3", "s3a"):
        return ("use the AWS environment or profile, or --src-options-file/"
                "--dst-options-file with key=... secret=...")
    return "put password=... in --src-options-file or --dst-options-file"


def _split_size_problem(split_size: int | None, converters: tuple[str, ...]) -> str | None:
    """Ranges under 1M cost more in tasks than they gain; a converter needs a file's
    whole stream, which ranges would cut. 0: never split (not even for idle cores)."""
    if not split_size:
        return None
    if split_size < (1 << 20):
        return "--split-size must be at least 1M"
    if converters:
        return ("--split-size cannot be used with --convert: a converter needs the whole "
                "stream of a file in one task (drop one of the two options)")
    return None


#: Run settings an unset keyword takes from ``PYDISTCP_<NAME>``.
_ENV_SETTINGS = ("master", "parallelism", "buffer_size", "verify", "preserve", "engine",
                 "copying")
_SIZE_SETTINGS = ("split_size", "min_size", "max_size", "bwlimit")
_AGE_SETTINGS = ("min_age", "max_age", "lookback", "interval", "settle", "full_listing_every")
_SEQUENCE_SETTINGS = ("include", "exclude", "converters", "check", "fork", "fork_convert")


def _refuse_unknown(options: Mapping[str, Any], names: set[str]) -> None:
    """A misspelt keyword would otherwise be dropped silently (or fail deep in Spark)."""
    unknown = set(options) - names - set(_CONVERTER_FIELDS)
    if unknown:
        raise ConfigurationError(f"unknown option(s): {', '.join(sorted(unknown))}")


def _with_caller_paths(conv: dict[str, Any]) -> dict[str, Any]:
    """A relative ``--gpg-home`` as the caller sees it (absolute): the tasks that read it
    run in the warm engine's or a worker's own folder, never the caller's."""
    home = conv.get("gpg_home")
    if home and "://" not in home:
        return {**conv, "gpg_home": os.path.abspath(os.path.expanduser(home))}
    return conv


def _with_env_passphrase(conv: dict[str, Any]) -> dict[str, Any]:
    """The GPG passphrase may come from the environment, which keeps it out of argv."""
    if "gpg_passphrase" not in conv and os.environ.get("PYDISTCP_GPG_PASSPHRASE"):
        return {**conv, "gpg_passphrase": os.environ["PYDISTCP_GPG_PASSPHRASE"]}
    return conv


def _with_environment(options: Mapping[str, Any]) -> dict[str, Any]:
    """Explicit keywords win; a set, non-empty ``PYDISTCP_*`` variable fills the rest."""
    filled = dict(options)
    for name in _ENV_SETTINGS:
        env = os.environ.get(f"PYDISTCP_{name.upper()}")
        if name not in options and env:
            filled[name] = parse_size(env) if name == "buffer_size" else env
    return filled


def _parsed_strings(options: Mapping[str, Any]) -> dict[str, Any]:
    """Strings (from flags, job files or the environment) read as numbers; size and age
    errors name the flag the user typed."""
    parsed = dict(options)
    if isinstance(parsed.get("recovery_retention"), str):
        parsed["recovery_retention"] = parse_duration(parsed["recovery_retention"])
    if isinstance(parsed.get("parallelism"), str):
        parsed["parallelism"] = int(parsed["parallelism"])
    for names, parse in ((_SIZE_SETTINGS, parse_size), (_AGE_SETTINGS, parse_duration)):
        for name in names:
            if isinstance(parsed.get(name), str):
                parsed[name] = parse_flag(parse, parsed[name], name)
    return parsed


def _as_values(options: Mapping[str, Any]) -> dict[str, Any]:
    """Lists and dicts become tuples: the configuration is frozen and travels to executors."""
    values = dict(options)
    for key in _SEQUENCE_SETTINGS:
        if values.get(key) is not None:
            values[key] = tuple(values[key])
    if "spark_conf" in values:
        values["spark_conf"] = tuple(dict(values["spark_conf"]).items())
    return values


def parse_flag(parse: Any, value: Any, name: str, label: str | None = None) -> Any:
    """``parse(value)``; the error names what the user typed: the flag ``--min-size`` by
    default, or ``label`` (the API's parameter name)."""
    try:
        return parse(value)
    except (ConfigurationError, TypeError, AttributeError) as exc:
        shown = label or "--" + name.replace("_", "-")
        raise ConfigurationError(f"{shown}: {exc}") from None


_CONVERTER_FIELDS = tuple(f.name for f in fields(ConverterOptions))


def parse_options_file(path: str, flag: str) -> dict[str, str]:
    """Storage options from a file: one ``key=value`` a line, ``#`` starts a comment
    line, blank lines are skipped. The value is everything after the first ``=`` up to
    the line's end (no quoting, no trimming: a password may hold ``#`` or spaces).
    Errors name the line, never its value (it may be a secret)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise ConfigurationError(f"cannot read {flag} {path}: {exc.strerror or exc}") from exc
    out: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(f"{flag} {path}: line {number} is not key=value")
        out[key.strip()] = value
    return out


def parse_key_values(pairs: tuple[str, ...] | list[str], flag: str) -> dict[str, str]:
    """``("a=1", "b=2")`` -> dict; the error names the flag and the bad pair."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigurationError(f"{flag} takes key=value, got {pair!r}")
        out[key.strip()] = value
    return out
