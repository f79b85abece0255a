"""Per-dataset state: watermark, run history, manifest of what was published (driver).

One JSON document per dataset URN under ``<state root>/datasets/``, replaced
atomically (temp + rename on filesystems, one PUT on object stores). It holds only
what grows with file sets (watermark, runs, applied sequence ids) and the list of
live manifest segments; the manifest itself is Parquet under
``<state root>/manifests/<key>/``, one segment appended per published file set
(``distcp.state.manifest``). Only commit steps change either, in the same
CommitSequence as the data they describe, so the watermark can never move ahead of
the data.

A document of the first format (version 1: the manifest inline) is read as it is
and migrated by its next save: the inline manifest becomes the first segment, then
the document is replaced. A crash between the two leaves the old document, which
the next save migrates again: nothing is lost. Version 3 adds a stream dataset's
three watermarks (``watermarks``); a version-2 document reads with none, every other
field kept, and is written as version 3 by its next save.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from distcp.datasets.partitions import Watermarks
from distcp.errors import StateError
from distcp.faults import crash_point
from distcp.state import manifest as mf
from distcp.state import sizes
from distcp.state.bounds import plain_name
from distcp.state.layout import StateLayout
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.atomic import write_atomic as write_atomic  # noqa: PLC0414 - re-exported: it lived here
from distcp.storage.spec import written_url

_log = logging.getLogger("pydistcp.state")

MAX_RUNS = 50
MAX_APPLIED = 300  # three markers per sequence (manifest, watermark, run)
VERSION = 3
#: The segment a version-1 document's inline manifest becomes (seq 0: oldest of all).
MIGRATED = mf.segment_name(0, "migrated")


def read_json(url: str, options: dict[str, Any], what: str) -> Any:
    """Parse a state/log document; a damaged one is a StateError that says what to do."""
    try:
        raw = storage_for(url, options).read_bytes(url, what)
    except FileNotFoundError:
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise StateError(
            f"corrupt {what} {fsutil.display(url)}: {exc}; no data was changed. Inspect it, "
            "then move it out of the state directory (or restore it) and run again",
            path=url) from exc


def read_json_or_none(url: str, options: dict[str, Any], what: str) -> Any:
    """A document another process rewrites while this one reads it (a continuous copy's
    status, summary, stop request): None when it is missing or caught half-written or
    damaged, which the next read settles; not ``read_json``'s StateError."""
    try:
        return json.loads(storage_for(url, options).read_bytes(url, what))
    except (FileNotFoundError, ValueError):  # UnicodeDecodeError is a ValueError
        return None


def urn_key(urn: str) -> str:
    return hashlib.sha1(urn.encode("utf-8", "surrogateescape")).hexdigest()[:20]


@dataclass
class DatasetState:
    """What pydistcp knows about one dataset's destination.

    ``manifest`` (dest -> [size, origin mtime, digest, guid]) is read from the
    segments on first use and kept up to date by appends in this process; it is a
    view: change the manifest through ``StateStore.append_segment`` only.
    """

    urn: str
    watermark: float | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)  # sequence ids already merged
    segments: list[mf.Segment] = field(default_factory=list)  # live, oldest first
    next_seq: int = 1
    #: Files a merge replaced, listed until they are removed (``StateStore.compact``).
    garbage: list[str] = field(default_factory=list)
    #: A version-1 document's inline manifest, until the next save migrates it.
    legacy: dict[str, list[Any]] | None = field(default=None, repr=False)
    #: Stream datasets (partition start times, epoch seconds, UTC), moved only by the
    #: commit step that follows a partition's data (``RecordWatermarks``):
    #: the low watermark: what runs before the last one had published (its listing
    #: started from it, minus ``--lookback``);
    low_watermark: float | None = None
    #: what the last run planned up to: its newest ready partition;
    expected_high_watermark: float | None = None
    #: what has been published: the newest partition published, by any run. The next
    #: run's low watermark. Below ``expected_high_watermark`` when a run failed to
    #: publish its newest partitions.
    actual_high_watermark: float | None = None
    reader: Callable[[DatasetState], dict[str, list[Any]]] | None = field(
        default=None, repr=False, compare=False)
    _manifest: dict[str, list[Any]] | None = field(default=None, repr=False, compare=False)

    @property
    def manifest(self) -> dict[str, list[Any]]:
        if self._manifest is None:
            self._manifest = self.reader(self) if self.reader else dict(self.legacy or {})
        return self._manifest

    @property
    def watermarks(self) -> Watermarks | None:
        """The three stream watermarks, or None for a dataset that has none."""
        marks = Watermarks(self.low_watermark, self.expected_high_watermark,
                           self.actual_high_watermark)
        return None if marks == Watermarks() else marks

    @watermarks.setter
    def watermarks(self, marks: Watermarks | None) -> None:
        marks = marks or Watermarks()
        self.low_watermark, self.expected_high_watermark, self.actual_high_watermark = (
            marks.low, marks.expected_high, marks.actual_high)

    def to_json(self) -> bytes:
        if self.legacy:
            raise StateError(f"dataset state of {self.urn}: the inline manifest must be "
                             "migrated to a segment before the document is written")
        return json.dumps({"version": VERSION, "urn": self.urn, "watermark": self.watermark,
                           "runs": self.runs[-MAX_RUNS:], "applied": self.applied[-MAX_APPLIED:],
                           "segments": [s.to_dict() for s in self.segments],
                           "garbage": self.garbage, "next_seq": self.next_seq,
                           "watermarks": self.watermarks.to_dict() if self.watermarks else None},
                          sort_keys=True).encode()


#: How many times a reader reads a dataset's document again when the segments it named
#: were merged away meanwhile (``StateStore.table_of``): a merge per publish at most.
MERGES_RACED = 5


class StateStore:
    """The ``datasets/`` and ``manifests/`` parts of a state root."""

    def __init__(self, root: str, options: dict[str, Any],
                 cache: dict[str, DatasetState] | None = None) -> None:
        self.root = root
        self.options = options
        self.cache = cache if cache is not None else {}

    def url_of(self, urn: str) -> str:
        return StateLayout(self.root).dataset(urn_key(urn))

    def folder_of(self, urn: str) -> str:
        """The dataset's manifest folder: Parquet segments only, readable by Spark."""
        return StateLayout(self.root).manifests(urn_key(urn))

    def segment_url(self, urn: str, name: str) -> str:
        return fsutil.join(self.folder_of(urn), name)

    def load(self, urn: str) -> DatasetState:
        """The dataset's state, read once per run; callers change it only to save it."""
        if urn not in self.cache:
            self.cache[urn] = self._read(urn)
        return self.cache[urn]

    def _read(self, urn: str) -> DatasetState:
        data = read_json(self.url_of(urn), self.options, "dataset state")
        if data is None:
            return DatasetState(urn, reader=self.manifest_of)
        if not isinstance(data, dict) or data.get("urn") != urn:
            raise StateError(f"dataset state {fsutil.display(self.url_of(urn))} does not "
                             f"describe {urn}; move it aside and run again")
        if int(data.get("version", 1)) > VERSION:
            raise StateError(f"dataset state {fsutil.display(self.url_of(urn))} has version "
                             f"{data['version']}, newer than this pydistcp reads ({VERSION}); "
                             "upgrade pydistcp")
        state = DatasetState(urn, data.get("watermark"), data.get("runs", []),
                             data.get("applied", []),
                             [mf.Segment.from_dict(s) for s in data.get("segments", [])],
                             int(data.get("next_seq", 1)), list(data.get("garbage", [])),
                             data.get("manifest") or None, reader=self.manifest_of)
        state.watermarks = Watermarks.from_dict(data.get("watermarks"))  # none before v3
        stray = next((n for n in [s.name for s in state.segments] + state.garbage
                      if not plain_name(str(n))), None)
        if stray is not None:  # read or removed under manifests/<key>/: one name each
            raise StateError(f"dataset state {fsutil.display(self.url_of(urn))} names "
                             f"{stray!r}, outside its manifest folder; nothing was read or "
                             "changed. Move it aside and run again", path=self.url_of(urn))
        return state

    def save(self, state: DatasetState) -> None:
        """Replace the document (migrating a version-1 manifest to a segment first)."""
        try:
            self._migrate(state)
            write_atomic(self.url_of(state.urn), state.to_json(), self.options)
        except BaseException:
            self.cache.pop(state.urn, None)  # what is on disk is the truth again
            raise
        self.cache[state.urn] = state

    def _migrate(self, state: DatasetState) -> None:
        if not state.legacy:
            state.legacy = None
            return
        entries = [(d, int(v[0]), float(v[1]), v[2] or "", v[3])
                   for d, v in state.legacy.items()]
        rows = self._write_segment(state.urn, MIGRATED, mf.segment_table(entries, (), 0))
        state.segments.insert(0, mf.Segment(MIGRATED, rows, 0))
        state.legacy = None

    def all(self) -> list[DatasetState]:
        folder = written_url(StateLayout(self.root).datasets, self.options)
        try:
            names = storage_for(folder, self.options).names(folder)
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            if name.endswith(".json"):
                data = read_json(fsutil.join(folder, name), self.options, "dataset state")
                out.append(self.load(data["urn"]))
        return out

    # -- the manifest ---------------------------------------------------------------
    def append_segment(self, state: DatasetState, sequence_id: str,
                       entries: Sequence[mf.Entry], removed: Iterable[str]) -> None:
        """Write one publish's entries and deletions as a segment named after its
        sequence and list it in ``state`` (saved by the caller). Nothing to record: no
        segment."""
        removed = tuple(removed)
        if not entries and not removed:
            return
        seq = state.next_seq
        name = mf.segment_name(seq, sequence_id)
        rows = self._write_segment(state.urn, name, mf.segment_table(entries, removed, seq))
        state.segments.append(mf.Segment(name, rows, seq))
        state.next_seq = seq + 1
        if state._manifest is not None:  # keep a manifest already read up to date
            for dest in removed:
                state._manifest.pop(dest, None)
            for dest, size, mtime, digest, guid in entries:
                state._manifest[dest] = [size, mtime, digest or "", guid]

    def append_kept(self, state: DatasetState, sequence_id: str, staged: Iterable[Any],
                    removed: Iterable[str]) -> None:
        """``append_segment`` of the outputs that copy tasks' results files list, given as
        their tables of staged outputs (``distcp.copying.resultfiles.staged_tables``, read
        by the caller: the state knows no results file), a table at a time into a
        local temporary file, then written to the state in pieces: a segment of a
        million files is never in memory (storages that take one body join them).
        Tombstones come first, so an entry of the same destination, later in the
        segment, beats them."""
        import pyarrow.parquet as pq

        seq = state.next_seq
        name = mf.segment_name(seq, sequence_id)
        rows = 0
        with tempfile.TemporaryFile(prefix="pydistcp-segment-") as spool:
            # no dictionaries: destinations, digests and guids are unique (B's 20,000
            # rows: 7.3 ms to write against 11.3, and a smaller file)
            with pq.ParquetWriter(spool, mf.segment_table((), (), seq).schema,
                                  use_dictionary=False) as writer:
                for table in self._kept_tables(staged, tuple(removed), seq):
                    writer.write_table(table)
                    rows += table.num_rows
            if not rows:
                return
            spool.seek(0)
            storage = storage_for(self.folder_of(state.urn), self.options)
            storage.prepare_folder(self.folder_of(state.urn))
            storage.write_atomic_pieces(self.segment_url(state.urn, name),
                                        iter(lambda: spool.read(1 << 20), b""))
        crash_point("segment_written")
        state.segments.append(mf.Segment(name, rows, seq))
        state.next_seq = seq + 1
        state._manifest = None  # one read before is stale: read again when asked

    def _kept_tables(self, staged: Iterable[Any], removed: tuple[str, ...], seq: int
                     ) -> Iterator[Any]:
        if removed:
            yield mf.segment_table((), removed, seq)
        for table in staged:
            if table.num_rows:
                yield mf.staged_segment(table, seq)

    def _write_segment(self, urn: str, name: str, table: Any) -> int:
        storage = storage_for(self.folder_of(urn), self.options)
        storage.prepare_folder(self.folder_of(urn))
        storage.write_atomic(self.segment_url(urn, name), mf.to_parquet(table))
        crash_point("segment_written")
        return int(table.num_rows)

    def table_of(self, state: DatasetState, columns: Sequence[str] = mf.COLUMNS) -> Any:
        """The live segments' rows, unresolved (every publish's rows, oldest first).

        A reader without the destination's lock (``status`` beside a continuous copy)
        can find a segment gone: the copy merged it away after the reader had read the
        document, which now names the merged file instead. The document is then read
        again, up to ``MERGES_RACED`` times. A segment gone while the document still
        names it, or the document gone too (a merge always names its merged file), is
        a damaged or removed folder, reported as it is."""
        segments = state.segments
        for _ in range(MERGES_RACED):
            try:
                return self._rows(state.urn, segments, columns)
            except FileNotFoundError:
                named = self._read(state.urn).segments
                if not named or named == segments:
                    raise
                segments = named
        return self._rows(state.urn, segments, columns)

    def _rows(self, urn: str, segments: Sequence[mf.Segment], columns: Sequence[str]) -> Any:
        storage = storage_for(self.folder_of(urn), self.options)
        return mf.concat([mf.from_parquet(storage.read_bytes(
            self.segment_url(urn, s.name), "manifest segment"), columns)
            for s in segments], columns)

    def manifest_of(self, state: DatasetState) -> dict[str, list[Any]]:
        """dest -> [size, origin mtime, digest, guid]: the newest row of each destination."""
        out = dict(state.legacy or {})
        table = mf.newest(self.table_of(state), keep_tombstones=True)
        gone = mf.destinations(table.filter(table.column("deleted")))
        for dest in gone:
            out.pop(dest, None)
        out.update(mf.to_dict(mf.newest(table)))
        return out

    def sizes_of(self, state: DatasetState, under: str, keep: bool = True
                 ) -> dict[str, tuple[int, float]]:
        """Path relative to ``under`` -> (size, origin mtime) of each destination below
        it: what a plan against the manifest compares (``--incremental``), read from
        those columns alone (no digests, no guids).

        Rows are read oldest first (segments in publish order, rows in write order), so
        a later row replaces an earlier one and a tombstone removes it: the resolution
        of ``manifest.newest`` without its sort of every destination (a quarter of the
        read at 300,000 files); a folder whose rows are not in that order (none is
        written so) is resolved by it.

        The answer is kept (``state.sizes``; not with ``keep=False``: a dry run writes
        nothing) and read back while the live segments are the ones it was made from."""
        prefix = under.rstrip("/") + "/"
        cut = len(prefix)
        if state._manifest is not None or state.legacy:
            return {d[cut:]: (int(v[0]), float(v[1])) for d, v in state.manifest.items()
                    if d.startswith(prefix)}
        names = [s.name for s in state.segments]
        layout = StateLayout(self.root)
        url = layout.sizes(urn_key(state.urn))
        storage = storage_for(url, self.options)
        try:
            kept = sizes.unpack(storage.read_bytes(url, "manifest sizes"), names, prefix)
        except (FileNotFoundError, NotADirectoryError):
            kept = None
        except OSError as exc:  # only a cache: read from the segments, not kept again
            _log.warning("state: cannot read the kept manifest sizes %s (%s); "
                         "reading the manifest instead", url, exc.strerror or exc)
            keep = False
            kept = None
        if kept is not None:
            return kept
        rows = self._sizes_read(state, prefix)
        if not keep:
            return rows
        try:
            data = sizes.pack(rows, names, prefix)
        except UnicodeError:  # a name no file can hold: read from the segments each time
            return rows
        try:
            storage.prepare_folder(layout.sizes())
            storage.write_atomic(url, data, durable=False)  # lost in a crash: read again
        except OSError as exc:  # a full disk, a folder it may not write: only a cache
            _log.warning("state: cannot keep the manifest sizes in %s (%s); "
                         "the next run reads the manifest again", url, exc.strerror or exc)
        return rows

    def _sizes_read(self, state: DatasetState, prefix: str) -> dict[str, tuple[int, float]]:
        """``sizes_of`` from the segments themselves."""
        import pyarrow.compute as pc

        cut = len(prefix)
        table = self.table_of(state, ("destination", "size", "mtime", "seq", "deleted"))
        seq = table.column("seq")
        if table.num_rows > 1 and not pc.all(pc.greater_equal(
                seq.slice(1), seq.slice(0, table.num_rows - 1))).as_py():
            table = mf.newest(table, keep_tombstones=True)
        dest = table.column("destination")
        if table.num_rows and not pc.any(table.column("deleted")).as_py() \
                and not pc.any(pc.match_substring(dest, "\x00")).as_py():
            # no tombstone, no escaped name (nearly every folder): the rows as they are,
            # cut below ``under`` in Arrow, a later row replacing an earlier one in dict
            below = pc.starts_with(dest, prefix)
            if not pc.all(below).as_py():
                table = table.filter(below)
            return dict(zip(pc.utf8_slice_codeunits(table.column("destination"), cut)
                            .to_pylist(), zip(table.column("size").to_pylist(),
                                              table.column("mtime").to_pylist())))
        rows: dict[str, tuple[int, float]] = {}
        for d, size, mtime, deleted in zip(mf.destinations(table),
                                           table.column("size").to_pylist(),
                                           table.column("mtime").to_pylist(),
                                           table.column("deleted").to_pylist()):
            if not d.startswith(prefix):
                continue
            if deleted:
                rows.pop(d[cut:], None)
            else:
                rows[d[cut:]] = size, mtime
        return rows

    def count(self, state: DatasetState) -> int:
        """How many files the manifest lists, reading only the columns that say so."""
        if state._manifest is not None or state.legacy:
            return len(state.manifest)
        return int(mf.newest(self.table_of(state, ("destination", "seq", "deleted")))
                   .num_rows)

    def compact(self, state: DatasetState, threshold: int = mf.COMPACT_AFTER) -> bool:
        """Merge the newest segments once there are more than ``threshold``, then
        remove the files that replaced; False when there was nothing to merge.

        Crash-safe by its order: the merged file is written under a new name (the old
        segments still listed), then the document lists it instead of them and names
        them as ``garbage``, then they are removed (oldest first) and the document says
        so. A folder read at any instant resolves to the same manifest; a crash leaves
        garbage the document names, removed by the next call.
        """
        self._migrate(state)
        n = mf.to_merge(state.segments, threshold)
        if n:
            merged = state.segments[-n:]
            table = mf.newest(self.table_of(_only(state, merged)),
                              keep_tombstones=n < len(state.segments))
            name = mf.merged_name(merged)
            self._write_segment(state.urn, name, table)
            crash_point("compaction_written")
            state.segments = state.segments[:-n] + [mf.Segment(name, int(table.num_rows),
                                                               merged[-1].seq)]
            state.garbage = sorted({*state.garbage, *(s.name for s in merged)}, key=mf.age)
            self.save(state)
            crash_point("compaction_switched")
        if state.garbage or n:
            self.sweep(state)
            state.garbage = []
            self.save(state)
        return bool(n)

    def sweep(self, state: DatasetState) -> None:
        """Remove the files of the manifest folder that no live segment names, oldest
        first: replaced segments, and what crashed writes and merges left."""
        storage = storage_for(self.folder_of(state.urn), self.options)
        live = {s.name for s in state.segments}
        try:
            names = set(storage.names(self.folder_of(state.urn)))
        except FileNotFoundError:
            names = set()
        for name in sorted(names - live, key=mf.age):
            storage.remove(self.segment_url(state.urn, name))
            crash_point("compaction_removed")


def _only(state: DatasetState, segments: list[mf.Segment]) -> DatasetState:
    return DatasetState(state.urn, segments=list(segments))
