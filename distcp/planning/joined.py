"""The plan of one dataset from its source listing joined with its target's (driver and executor).

``--listing spark`` leaves both listings distributed (``distcp.spark.listing``);
``distcp.spark.planning`` joins them on the path relative to each root and runs
``plan_rows`` over the joined rows in Spark tasks. Each row is decided by the very
functions the driver's planner uses (``plan.decide``, the dataset's own ``_file`` and
``_directory``), so both planners give the same plan; what reaches the driver is only
what it must act on: files to copy, directories, deletions, entries not copied, errors,
and per task the number of files skipped (their decisions only when asked: ``--dry-run``
and ``-v`` show every decision).

A plain recursive dataset without converters and without filters is planned here; any
other (archives whose expansion the state decides, ``--include`` pruning directories,
stream datasets and lists of files) keeps the driver's planner.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from distcp import collection
from distcp.configuration import CopyConfiguration
from distcp.copying.copyrows import CopyRowsWriter
from distcp.copying.taskenv import applied_environment
from distcp.datasets.recursive import RecursiveCopyableDataset
from distcp.model import FileStatus
from distcp.planning.plan import Action, action_of, decide, skips_same
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage import treelisting as tl

#: What a planning task sends to the driver, one row each (``kind``), with the walk's
#: sort key of its entry and its value pickled in ``payload``.
COPY, SKIP, DIRECTORY, DELETE, NOT_COPIED, ERROR, COUNT = (
    "copy", "skip", "dir", "delete", "skipped", "error", "count")
#: A file of files to copy that a task wrote (``JoinRule.copies_to``): its CopyRows.
KEPT = "kept"
OUT_SCHEMA = "kind string, sort binary, payload binary"
#: One side of a pair: the walk's ``(path, FileStatus)`` (a regular file's stat itself
#: from a paired walk: ``fsutil.raw_stat``), or an entry not copied.
Entry = tuple[str, FileStatus | os.stat_result] | fsutil.Skipped


@dataclass(frozen=True, slots=True)
class Unchanged:
    """As a pair's source, with no target: ``files`` files a walk found as the target
    holds them and counted instead of pairing each (``published.Published``); skipped,
    as ``plan_rows`` skips a walked twin, with no object made of any."""

    files: int


#: What ``plan_rows`` takes: a ``(source, target)`` pair, or a count of unchanged files.
Joined = tuple[Entry | None, Entry | None] | tuple[Unchanged, None]


@dataclass(frozen=True)
class JoinRule:
    """Everything a planning task needs: the dataset, the run's settings, the listing
    kind of each side (for the walk's order) and whether skips travel back whole."""

    dataset: RecursiveCopyableDataset
    cfg: CopyConfiguration
    source_kind: str
    target_kind: str
    keep_skips: bool = False
    #: A folder (URL, the destination's options) where each task writes its files to
    #: copy instead of sending them (``distcp.copying.copyrows``); "": send them.
    copies_to: str = ""
    #: Whether the destination keeps preserved mtimes (``plan.decide``).
    mtimes_kept: bool = True
    #: The client's task variables (``copying.taskenv``); may hold secrets: never shown.
    env: dict[str, str] | None = field(default=None, repr=False)
    #: Names the task attempt that writes a copy-rows file, unique per attempt (Spark
    #: gives it: ``distcp.spark.arrow.attempt_id``); without one, this process's.
    attempt: Callable[[], str] | None = None


def plannable(ds: Any, cfg: CopyConfiguration, manifest: bool = False) -> bool:
    """Whether a dataset is planned from joined listings: a tree of a plain recursive
    dataset, copied without converters, filters, a list of files or the manifest
    (``manifest``: the planner can pair the source with the manifest, as the driver's
    paired walk does under ``--incremental`` without ``--delete``)."""
    return (type(ds) is RecursiveCopyableDataset and not ds.is_file
            and not (ds.converters if ds.converters is not None else cfg.converters)
            and not cfg.file_filter.active and not cfg.move
            and (not cfg.incremental or (manifest and not cfg.delete))
            and not (cfg.files_from or cfg.files_from_manifest))


def plan_rows(rule: JoinRule, rows: Iterable[Joined]) -> Iterator[tuple[str, str, Any, int]]:
    """``(kind, sort key, value, size)`` for each joined ``(source, target)`` pair of
    entries (size: a file to copy's, else 0), and a last ``count`` row whose value is
    ``(files seen, files skipped)``; ``arrow_plan`` pickles the values.

    An ``error`` (a file where the target has a directory, or the reverse) carries
    ``(directory?, message, path)``: the driver raises the first, files before
    directories, as ``plan.plan_dataset`` does."""
    pairs = _Pairs(rule)
    files = skips = 0
    same_skipped = not rule.keep_skips and skips_same(rule.cfg.overwrite, rule.cfg.compare)
    for source, t in rows:
        if isinstance(source, tuple) and isinstance(source[1], os.stat_result):
            st, other = source[1], t[1] if isinstance(t, tuple) else None
            if same_skipped and isinstance(other, os.stat_result) and \
                    other.st_size == st.st_size and other.st_mtime_ns == st.st_mtime_ns:
                files, skips = files + 1, skips + 1  # what decide says of it: skip
                continue
            source = source[0], fsutil.file_status(source[0], st)
        elif isinstance(source, Unchanged):
            files, skips = files + source.files, skips + source.files
            continue
        yield from pairs.rows(source, t)
    yield COUNT, "", (files + pairs.files, skips + pairs.skips), 0


Row = tuple[str, str, Any, int]


class _Pairs:
    """``plan_rows``'s decisions of the pairs that need one (all but a file identical
    to its target), with the files seen and skipped among them."""

    def __init__(self, rule: JoinRule) -> None:
        self.rule, self.ds, self.cfg = rule, rule.dataset, rule.cfg
        root = storage_for(self.ds.root, dict(self.cfg.src_options)).tree(self.ds.root).path
        self.root = root.rstrip("/") or "/"
        self.files = self.skips = 0

    def rows(self, source: Entry | None, t: Entry | None) -> tuple[Row, ...]:
        """The rows of one ``(source, target)`` pair (a source's stat already made a
        FileStatus)."""
        if isinstance(source, fsutil.Skipped):
            return ((NOT_COPIED, tl.sort_key(self.rule.source_kind, source.path), source, 0),)
        target = _target(t)
        if source is None:
            return ((DELETE, "", target.url, 0),) if self.cfg.delete and target is not None \
                else ()
        path, origin = source
        assert isinstance(origin, FileStatus)
        order = tl.sort_key(self.rule.source_kind, path)
        rel = fsutil.relpath(path, self.root)
        if origin.is_dir:
            return self._directory(origin, rel, order, target)
        return self._file(origin, rel, order, target)

    def _directory(self, origin: FileStatus, rel: str, order: str,
                   target: FileStatus | None) -> tuple[Row, ...]:
        d = self.ds.planned_directory(origin, rel, self.cfg)
        if target is not None and not target.is_dir:
            return ((ERROR, order, (True, (
                f"cannot replace file {fsutil.display(d.destination)} with directory "
                f"{fsutil.display(origin.url)}"), d.destination), 0),
                (DIRECTORY, order, d, 0))
        return ((DIRECTORY, order, d, 0),)

    def _file(self, origin: FileStatus, rel: str, order: str,
              target: FileStatus | None) -> tuple[Row, ...]:
        self.files += 1
        f = self.ds.planned_file(origin, rel, self.cfg)
        if target is not None and target.is_dir:
            return ((ERROR, order, (False, (
                f"cannot replace directory {fsutil.display(f.destination)} with file "
                f"{fsutil.display(origin.url)}"), f.destination), 0),)
        decision = decide(f, target, self.cfg.overwrite, self.cfg.compare,
                          self.rule.mtimes_kept)
        if decision[1]:
            return ((COPY, order, action_of(f, decision, target), origin.size),)
        self.skips += 1
        return ((SKIP, order, Action(f, decision[0]), 0),) if self.rule.keep_skips else ()


def _target(entry: Entry | None) -> FileStatus | None:
    """The target's entry; one its listing could not read counts as absent, as in the
    driver's target listing (which keeps no skipped entries)."""
    if entry is None or isinstance(entry, fsutil.Skipped):
        return None
    path, status = entry
    return fsutil.file_status(path, status) if isinstance(status, os.stat_result) else status


def sort_bytes(sort: str) -> bytes:
    """A sort key as bytes that order as the key does: a name need not be UTF-8, so
    neither is its key (``surrogatepass`` keeps code point order); ``sort_of`` reads it."""
    return sort.encode("utf-8", "surrogatepass")


def sort_of(data: bytes) -> str:
    return bytes(data).decode("utf-8", "surrogatepass")


def arrow_plan(rule: JoinRule, batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow`` function: joined batches (columns ``s`` and ``t``, structs of
    listing rows) in, ``OUT_SCHEMA`` batches out, one per BATCH_ROWS rows. With
    ``rule.copies_to`` the files to copy go to this task's copy-rows file instead, and
    one ``kept`` row names it, written with the client's task variables (``rule.env``:
    credentials from the environment, which a warm engine's workers do not have)."""
    with applied_environment(rule.env), collection.paused():
        yield from _planned_batches(rule, batches)


def _planned_batches(rule: JoinRule, batches: Iterator[Any]) -> Iterator[Any]:
    def entries() -> Iterator[tuple[Entry | None, Entry | None]]:
        for batch in batches:
            for s, t in zip(batch.column("s").to_pylist(), batch.column("t").to_pylist()):
                yield (tl.entry_of(s) if s is not None else None,
                       tl.entry_of(t) if t is not None else None)

    return planned_batches(rule, entries())


def planned_batches(rule: JoinRule, rows: Iterable[tuple[Entry | None, Entry | None]]
                    ) -> Iterator[Any]:
    """``OUT_SCHEMA`` batches of the plan of ``(source, target)`` entry pairs (the
    join's rows read back, or two walks paired: ``distcp.planning.paired``)."""
    import pyarrow as pa

    def batch_of(out: list[tuple[str, str, bytes | None]]) -> Any:
        kinds, sorts, payloads = zip(*out)
        return pa.RecordBatch.from_arrays(
            [pa.array(kinds, pa.string()), pa.array([sort_bytes(s) for s in sorts], pa.binary()),
             pa.array(payloads, pa.binary())], names=["kind", "sort", "payload"])

    writer = _copies_writer(rule)
    out: list[tuple[str, str, bytes | None]] = []
    for kind, sort, value, size in plan_rows(rule, rows):
        if writer is not None and kind == COPY:
            writer.add(value.file)  # copy tasks read files, not actions
            continue
        if kind == COUNT and writer is not None:
            written = writer.close()
            if written is not None:
                out.append((KEPT, "", pickle.dumps(written)))
        out.append((kind, sort, pickle.dumps(value)))
        if len(out) >= tl.BATCH_ROWS or kind == COUNT:
            yield batch_of(out)
            out = []


def _copies_writer(rule: JoinRule) -> CopyRowsWriter | None:
    """This task attempt's copy-rows file (None: files to copy are sent as rows)."""
    if not rule.copies_to:
        return None
    attempt = rule.attempt() if rule.attempt is not None else f"local{os.getpid()}"
    url = fsutil.join(rule.copies_to, f"{attempt}.parquet")
    return CopyRowsWriter(url, dict(rule.cfg.dst_options))
