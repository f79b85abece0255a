"""Split big files into ranges, resume them, and assemble their results (driver).

A file larger than ``--split-size`` becomes one WorkUnit per byte range (seed
003's block-level work units) so that one big file no longer decides the wall
time of a job. The ranges share one staging: the multipart upload the driver
creates on S3 (a range is one part), one local staging file they are written
into at their offsets, or, on other filesystems, one part file per range that a
join task concatenates into the staging file ``data`` (``distcp.copying.join``). All
live under ``<state>/splits/<guid>/`` with a ``meta.json``, and every range that
was written and verified leaves ``r<index>.json``: a run killed half-way leaves
the next one only the missing ranges to copy (the guid changes when the source
does, so a changed file is never resumed from stale ranges).

Two stages follow the range tasks, each with its own name: *assembling*
(``assemble_ranges``, here, on the driver: a split file's range results become
one whole-file result with the composed digest) and, on other filesystems only,
*joining* (``distcp.copying.join``, Spark tasks: concatenating the part files).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from distcp.checksum import BLOCK, compose
from distcp.configuration import CopyConfiguration
from distcp.copying.ranges import range_result
from distcp.copying.results import ResultKey
from distcp.copying.taskspec import TaskSpec
from distcp.model import CopyableFile, Split, TaskResult, WorkUnit
from distcp.planning import visibility
from distcp.planning.packing import units_of
from distcp.state.layout import StateLayout
from distcp.state.store import read_json, write_atomic
from distcp.storage import Storage, parse_staged, storage_for
from distcp.storage import filesystems as fsutil
from distcp.storage.spec import written_url
from distcp.summary import CopyTally

#: Name of the staging file of a split file (locally: ranges written at their
#: offsets; elsewhere: what the join concatenates the part files into).
JOINED = "data"


#: Without ``--split-size``, the least a file holds before its ranges go to idle cores.
IDLE_SPLIT_FROM = 256 << 20


def idle_core_split(sizes: Sequence[int], cores: int, minimum: int | None = None
                    ) -> int | None:
    """A split size for a run that gave none, or None when whole files keep every core
    busy. A file holding clearly more than an even share of the run's bytes per core
    keeps one core copying while the others wait: files above half a share are cut into
    ranges of half a share (at least ``minimum`` / 2), which the packing spreads over the
    cores (``idle_split``: where no join task follows)."""
    if cores < 2 or not sizes:
        return None
    minimum = IDLE_SPLIT_FROM if minimum is None else minimum
    share = sum(sizes) // cores
    if max(sizes) <= max(minimum, share + share // 2):
        return None
    return max(minimum // 2, share // 2)


def range_size(size: int, wanted: int, storage: Storage) -> int:
    """``wanted`` rounded up to the digest block, then to the storage's part rules (S3's)."""
    return storage.part_size(size, -(-wanted // BLOCK) * BLOCK)


@dataclass
class SplitFile:
    """One split file of this run: its staging, ranges, and the ranges already done."""

    file: CopyableFile
    range_size: int
    staging: str
    records: str
    done: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return max(1, -(-self.file.origin.size // self.range_size))

    def split(self, index: int) -> Split:
        offset = index * self.range_size
        length = min(self.range_size, self.file.origin.size - offset)
        return Split(index, self.count, offset, length, self.staging, self.records)

    @property
    def bytes_resumed(self) -> int:
        return sum(self.split(i).length for i in self.done)


class SplitStore:
    """``<state root>/splits/<guid>/{meta.json, r<index>.json, data}``."""

    def __init__(self, state_root: str, options: dict[str, Any], storage: Storage) -> None:
        self.root = StateLayout(state_root).splits()
        self.options = options
        #: The destination's storage (where the split files are staged).
        self.storage = storage

    def folder(self, guid: str) -> str:
        return fsutil.join(self.root, guid)

    def prepare(self, file: CopyableFile, wanted: int) -> SplitFile:
        """The file's split staging: resumed when an earlier run left a matching one."""
        size = range_size(file.origin.size, wanted, self.storage)
        folder = self.folder(file.guid)
        meta = read_json(fsutil.join(folder, "meta.json"), self.options, "split record")
        if meta and meta.get("destination") == file.destination and meta.get("range") == size:
            sf = SplitFile(file, size, meta["staging"], folder)
            done = self._done(sf)
            if done is not None:
                sf.done = done
                return sf
        if meta:
            self.discard(meta, folder)
        sf = SplitFile(file, size, self._new_staging(file, folder), folder)
        body = {"guid": file.guid, "destination": file.destination, "range": size,
                "staging": sf.staging, "created": time.time()}
        write_atomic(fsutil.join(folder, "meta.json"), json.dumps(body).encode(), self.options)
        return sf

    def _new_staging(self, file: CopyableFile, folder: str) -> str:
        staged = self.storage.stage_split(file.destination, folder, JOINED)
        mtime = (file.origin.mtime_ns or file.origin.mtime) if "t" in file.preserve else None
        return self.storage.keep_mtime(staged, mtime).text

    def _done(self, sf: SplitFile) -> dict[int, dict[str, Any]] | None:
        """Ranges whose record and staged bytes are both still there; None: start again."""
        records = {}
        for i in range(sf.count):
            rec = read_json(fsutil.join(sf.records, f"r{i}.json"), self.options, "range record")
            if rec and rec.get("length") == sf.split(i).length:
                records[i] = rec
        staged = parse_staged(sf.staging)
        if staged.needs_complete:
            parts = self.storage.uploaded_parts(staged)
            if parts is None:
                return None
            return {i: r for i, r in records.items()
                    if parts.get(i + 1) == (r["etag"], sf.split(i).length)}
        if self.storage.capabilities.joins_parts:
            return self._parts_done(sf, records)
        try:
            have = self.storage.entry_size(sf.staging)
        except FileNotFoundError:
            return None
        return {i: r for i, r in records.items() if have >= sf.split(i).offset + r["length"]}

    def _parts_done(self, sf: SplitFile, records: dict[int, dict[str, Any]]
                    ) -> dict[int, dict[str, Any]] | None:
        """Ranges whose part file is there with its length (one listing), or all of
        them when an earlier join left the verified staging file (parts removed)."""
        try:
            sizes = {e.url.rstrip("/").rsplit("/", 1)[-1]: e.size
                     for e in storage_for(sf.records, self.options).entries(sf.records)}
        except FileNotFoundError:
            return None
        if sizes.get(JOINED) == sf.file.origin.size and len(records) == sf.count:
            return records
        return {i: r for i, r in records.items() if sizes.get(r.get("part", "")) == r["length"]}

    def discard(self, meta: dict[str, Any], folder: str) -> None:
        staged = parse_staged(str(meta.get("staging", "")))
        if staged.needs_complete:
            self.storage.discard(staged)  # abort the upload; files go with the folder
        storage_for(folder, self.options).remove(folder)

    def metas(self) -> list[tuple[str, dict[str, Any]]]:
        """(folder, meta) of every split staged by this or an earlier run."""
        root = written_url(self.root, self.options)
        try:
            names = storage_for(root, self.options).names(root)
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            folder = fsutil.join(root, name)
            meta = read_json(fsutil.join(folder, "meta.json"), self.options, "split record")
            out.append((folder, meta or {}))
        return out


def units_for(sf: SplitFile, first_id: int) -> list[WorkUnit]:
    missing = [i for i in range(sf.count) if i not in sf.done]
    return [WorkUnit(first_id + n, (sf.file,), sf.split(i)) for n, i in enumerate(missing)]


def resumed_results(sf: SplitFile) -> list[TaskResult]:
    f = sf.file
    key = ResultKey.of(f, unit_id=-1, attempt="resumed")
    return [range_result(f, sf.split(i), key, rec, 0) for i, rec in sorted(sf.done.items())]


def assemble_ranges(results: Sequence[TaskResult], splits: dict[str, SplitFile],
                    options: dict[str, Any] | None = None) -> list[TaskResult]:
    """Whole-file results: each split file's range results assembled into one (failed if
    any range failed or is missing). ``options``: the destination's storage options
    (the split stagings live there)."""
    out = [r for r in results if r.split_index < 0]
    by_guid: dict[str, list[TaskResult]] = defaultdict(list)
    for r in results:
        if r.split_index >= 0:
            by_guid[r.guid].append(r)
    for guid, sf in splits.items():
        out.append(_assembled(sf, by_guid.get(guid, []), options or {}))
    return out


def _assembled(sf: SplitFile, ranges: list[TaskResult], options: dict[str, Any]) -> TaskResult:
    """One split file's whole-file result; its staging gets the file's attributes."""
    key, read = ResultKey.of(sf.file, unit_id=-1, attempt="split"), sum(r.bytes_read for r in ranges)
    ok = {r.split_index: r for r in ranges if r.ok}
    failed = [r for r in ranges if not r.ok]
    if failed or len(ok) != sf.count:
        return _incomplete(sf, key, read, failed[0] if failed else None, sf.count - len(ok))
    ordered = [ok[i] for i in range(sf.count)]
    checksum = _whole_digest(ordered)
    _set_attributes_in_place(sf, options)
    return _whole(sf, key, read, ordered, checksum)


def _whole(sf: SplitFile, key: ResultKey, read: int, ordered: list[TaskResult],
           checksum: str) -> TaskResult:
    """The whole file as one staged result: its ranges' parts in file order (an upload
    completes from them), and the records folder publishing removes."""
    return key.result(sf.file.destination, bytes_read=read, staging=sf.staging,
                      bytes_written=sf.file.origin.size,
                      checksum=checksum, parts=tuple(p for r in ordered for p in r.parts),
                      records=sf.records,
                      bytes_server_side=sum(r.bytes_server_side for r in ordered),
                      message=next((r.message for r in ordered if r.message), ""))


def _incomplete(sf: SplitFile, key: ResultKey, read: int, first: TaskResult | None,
                missing: int) -> TaskResult:
    """The failed whole-file result: the first failed range's error, else the count of
    ranges that never reported (retryable: the next run copies only those)."""
    if first is not None:
        error_type, message = first.error_type, first.message
    else:
        error_type = "LostResult"
        message = (f"{fsutil.display(sf.file.origin.url)}: {missing} of {sf.count} ranges "
                   "not copied; the next run copies only those")
    return key.result(sf.file.destination, "failed", bytes_read=read, error_type=error_type,
                      message=message, retryable=True)


def _whole_digest(ordered: list[TaskResult]) -> str:
    """The file's digest composed from its ranges' block digests, in file order; empty
    when a range has none (the file is then published without one)."""
    if not all(r.blocks for r in ordered):
        return ""
    return compose(bytes.fromhex(r.blocks) for r in ordered)


def _set_attributes_in_place(sf: SplitFile, options: dict[str, Any]) -> None:
    """Ranges written at their offsets into one staging file (a storage with offset
    writes: local disks) leave it without the source's mode and mtime: the driver sets
    them once every range is in. Elsewhere the staging is an upload or, until the join
    task writes it, absent. A missing staging file is left for CheckDigests to fail."""
    if not parse_staged(sf.staging).needs_rename:
        return
    storage = storage_for(sf.staging, options)
    if not (storage.capabilities.offset_writes and storage.exists(sf.staging)):
        return
    f = sf.file
    storage.set_staged_attributes(sf.staging, mode=f.mode, owner=f.owner, group=f.group,
                                  mtime=(f.origin.mtime_ns or f.origin.mtime)
                                  if "t" in f.preserve else None)


def prepare_splits(cfg: CopyConfiguration, spec: TaskSpec, files: list[CopyableFile],
                   cores: int) -> tuple[dict[str, SplitFile], CopyTally]:
    """The split files of this run, with the ranges earlier runs already sent
    (``--split-size 0``: none), and what the summary says of them."""
    wanted = cfg.split_size if cfg.split_size is not None else idle_split(
        cfg, spec, files, cores)
    if not wanted:
        return {}, CopyTally()
    dst = spec.dst.open()
    store = SplitStore(spec.state_root, spec.dst_options, dst)
    # a name the destination cannot hold is not split: its task fails it by name, where
    # preparing its ranges (an upload created here, on S3) would fail the run
    splits = {f.guid: store.prepare(f, wanted) for f in files
              if f.origin.size > wanted and not f.converters
              and dst.name_problem(f.destination) is None}
    notes = []
    if not cfg.split_size and splits:
        notes.append(f"{len(splits)} big file(s) copied in ranges of about "
                     f"{wanted >> 20} MiB over the idle cores (--split-size unset)")
    # the idle cores' ranges are approximate anyway: only a size the user gave is noted
    adjusted = {sf.range_size for sf in splits.values()} - {wanted} if cfg.split_size else set()
    for size in sorted(adjusted):
        notes.append(f"split ranges of {size} bytes instead of --split-size "
                     f"{cfg.split_size}: ranges are whole MiB (the digest block) and, "
                     "on S3, parts of 5 MiB or more, at most 10,000 per file")
    return splits, CopyTally(ranges_resumed=sum(len(sf.done) for sf in splits.values()),
                             bytes_resumed=sum(sf.bytes_resumed for sf in splits.values()),
                             notes=tuple(notes))


def idle_split(cfg: CopyConfiguration, spec: TaskSpec, files: list[CopyableFile],
                cores: int) -> int | None:
    """``--split-size`` unset: ranges for the idle cores (``idle_core_split``) where the
    ranges need no join task (parts of one upload that completing joins, or writes at
    their offsets into one local staging file) and nothing needs a file whole in one
    task (``--check``, ``--visibility file``). On a local disk the ranges cost the
    joined file's re-read at publish, on every core (``holes.SPANS_FROM``): one 2 GiB
    file on the warm engine, 2 cores, 0.85 s in ranges against 0.95 s whole by the
    medians of 7 rounds, copy phase 0.59 s against 0.89 s, the re-read 0.17 s
    (benchmarks/RESULTS.md, 2026-12-03 night)."""
    if cfg.check or cfg.visibility != "file-set" or spec.dst.capabilities.joins_parts:
        return None
    return idle_core_split([f.origin.size for f in files if not f.converters],
                           cfg.tasks or cores)


def split_units(cfg: CopyConfiguration, spec: TaskSpec, files: list[CopyableFile],
                cores: int, publish_now: frozenset[str], ranges: bool = True
                ) -> tuple[list[WorkUnit], dict[str, SplitFile], CopyTally]:
    """The work units of ``files`` for ``cores``, whole files packed and each split
    file's missing ranges one unit each, whoever runs them (a Spark job, this process's
    processes or threads); the split files; what the summary says of them. ``ranges``:
    whether big files may be split at all (not where a join task would have to follow)."""
    splits, resumed = prepare_splits(cfg, spec, files, cores) if ranges else ({}, CopyTally())
    whole = [f for f in files if f.guid not in splits] if splits else files
    units = visibility.mark(units_of(whole, cfg.tasks or cores, cfg.tasks, cfg.file_cost),
                            publish_now)
    for sf in splits.values():
        units += units_for(sf, len(units))
    return units, splits, resumed


def whole_results(results: list[TaskResult], splits: dict[str, SplitFile],
                  options: dict[str, Any]) -> list[TaskResult]:
    """The copy's results with each split file's ranges, those sent by earlier runs
    too, assembled into one whole-file result (``assemble_ranges``)."""
    if not splits:
        return results
    resumed = [r for sf in splits.values() for r in resumed_results(sf)]
    return assemble_ranges(results + resumed, splits, options)
