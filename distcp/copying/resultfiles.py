"""One copy task's results kept in a Parquet file of its own (driver and executor).

When the files to copy never reached the driver (``distcp.copying.copyrows``), their
results do not either: each copy task writes them beside the job's staging, one row
per output, and returns only a ``UnitReport`` (counts, bytes, requests, the first
failures). Publishing reads the files back where it needs each file: the renames
(``distcp.commit.kept_steps.PublishKept``) and the manifest segment
(``StateStore.append_kept``), ``READ_ROWS`` rows at a time. Paths are stored in the manifest's
form (``distcp.names.to_utf8``: Parquet strings are UTF-8, a name need not be), so a
segment is made of the destination column as it is.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from distcp import request_count
from distcp.model import CopyableFile, TaskResult
from distcp.names import from_utf8, to_utf8
from distcp.storage import parse_staged, storage_for
from distcp.storage.folders import FolderMove
from distcp.storage.staged import NOT_A_PATH, is_path

#: Results of one row group (written as they come: a task holds at most these).
GROUP = 2_048
#: Failed files a report carries whole (the rest are counted): a run's summary names
#: each failure, and a task where everything failed must not send back a million.
REPORTED_FAILURES = 200


#: A staged multipart upload's parts, as ``TaskResult.parts``: (number, ETag, size).
Parts = tuple[tuple[int, str, int], ...]


def _schema() -> Any:
    import pyarrow as pa

    part = pa.struct([("number", pa.int32()), ("etag", pa.string()), ("size", pa.int64())])
    return pa.schema([
        ("guid", pa.string()), ("ok", pa.bool_()), ("staging", pa.string()),
        ("destination", pa.string()), ("size", pa.int64()), ("mtime", pa.float64()),
        ("digest", pa.string()), ("parts", pa.list_(part))])


@dataclass(frozen=True)
class UnitReport:
    """What a copy task that kept its results sends the driver: their file and sums."""

    unit_id: int
    url: str
    files_ok: int = 0
    files_failed: int = 0
    links: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    bytes_server_side: int = 0
    #: The newest source mtime of a staged file (the dataset's watermark).
    newest_mtime: float | None = None
    requests: tuple[tuple[str, int], ...] = ()
    #: The first REPORTED_FAILURES failed results, whole.
    failures: tuple[TaskResult, ...] = field(default=())


class ResultsWriter:
    """Writes a task's results as they come, a row group per GROUP, and sums them."""

    def __init__(self, unit_id: int, url: str, options: dict[str, Any]) -> None:
        self.unit_id, self.url, self.options = unit_id, url, options
        self.rows: list[tuple[str, bool, str, str, int, float, str, Parts]] = []
        self.sums: dict[str, int] = dict.fromkeys(
            ("files_ok", "files_failed", "links", "bytes_read", "bytes_written",
             "bytes_server_side"), 0)
        self.newest: float | None = None
        self.requests: list[tuple[tuple[str, int], ...]] = []
        self.failures: list[TaskResult] = []
        self._file: Any = None
        self._writer: Any = None

    def add(self, result: TaskResult, file: CopyableFile) -> None:
        ok = result.ok
        staged = ok and bool(result.staging)
        staging, destination, mtime = result.staging, result.destination, file.origin.mtime
        self.rows.append((result.guid, ok,  # an ASCII name is its own UTF-8: no call
                          staging if staging.isascii() else to_utf8(staging),
                          destination if destination.isascii() else to_utf8(destination),
                          result.bytes_written, float(mtime), result.checksum,
                          result.parts))
        sums = self.sums
        sums["bytes_read"] += result.bytes_read
        if result.requests:
            self.requests.append(result.requests)
        if ok:
            if staged:
                sums["files_ok"] += 1
                sums["links"] += result.link_target is not None
                sums["bytes_written"] += result.bytes_written
                self.newest = mtime if self.newest is None else max(self.newest, mtime)
            sums["bytes_server_side"] += result.bytes_server_side
        else:
            sums["files_failed"] += 1
            if len(self.failures) < REPORTED_FAILURES:
                self.failures.append(result)
        if len(self.rows) >= GROUP:
            self._flush()

    def close(self) -> UnitReport:
        self._flush()
        if self._writer is not None:
            self._writer.close()
            self._file.close()
        return UnitReport(self.unit_id, self.url if self._writer is not None else "",
                          newest_mtime=self.newest,
                          requests=tuple(request_count.total(self.requests).items()),
                          failures=tuple(self.failures), **self.sums)

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self.rows:
            return
        if self._writer is None:
            self._file = storage_for(self.url, self.options).open_write(self.url)
            # no dictionaries: paths, guids and digests are unique (written 40 % faster)
            self._writer = pq.ParquetWriter(self._file, _schema(), use_dictionary=False)
        columns = list(zip(*self.rows))
        self._writer.write_table(pa.table(
            [pa.array(c, t) for c, t in zip(columns, _schema().types)], schema=_schema()))
        self.rows = []


#: Rows of a results file read and filtered at a time: a unit's file whole (its row
#: groups of ``GROUP`` rows taken one by one cost each Arrow call again: B's publish,
#: 20,000 files in 4 files, made 456 calls of Arrow's compute, 40 ms), a bounded table
#: (some 30 MB) for a unit of an archive's million members.
READ_ROWS = 1 << 17


#: Results files read whole inside ``read_once``, each kept for its next reader (per
#: thread: an API caller may publish two runs at once).
_reading = threading.local()
#: The columns publishing reads (``publishing_of``, ``publishing_by_folder``), and the
#: manifest segment (``staged_tables``: the last five are the segment's).
_PUBLISHING = ["ok", "staging", "destination", "size", "parts"]
_STAGED = ["ok", "staging", "destination", "size", "mtime", "digest", "guid"]
#: Every column a reader of results files asks for (``read_once`` reads them all).
_READ = tuple(dict.fromkeys([*_PUBLISHING, *_STAGED]))


@contextmanager
def read_once() -> Iterator[None]:
    """Within: a results file of at most ``READ_ROWS`` rows is read once for two readers.
    A kept file set's publish reads each file for its renames, then for its manifest
    segment: B's four files took 13-50 ms to read each time. The second read takes the
    table the first left and frees it; at most ``READ_ROWS`` rows are held at once, so
    a set of a million files reads the rest twice, as before."""
    _reading.held = {}
    try:
        yield
    finally:
        _reading.held = None


def _groups(url: str, options: dict[str, Any], columns: list[str]) -> Iterator[Any]:
    """The file's rows, a table of up to ``READ_ROWS`` at a time, with only ``columns``
    (those the file has: a file written before a column existed lacks it); read on this
    thread alone, as ``copyrows.read_chunk`` reads (why: there)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    held: dict[str, Any] | None = getattr(_reading, "held", None)
    if held is not None and not set(columns) <= set(_READ):
        held = None  # a column read_once does not read: this reader reads its own
    if held is not None and url in held:
        table = held.pop(url)
        yield table.select([c for c in columns if c in table.column_names])
        return
    with storage_for(url, options).open_read(url) as f:
        pf = pq.ParquetFile(f)
        names = pf.schema_arrow.names
        present = [c for c in columns if c in names]
        room = READ_ROWS - sum(t.num_rows for t in held.values()) if held is not None else 0
        if pf.metadata.num_rows <= room:
            assert held is not None  # room is 0 outside read_once
            table = pf.read(columns=[c for c in _READ if c in names], use_threads=False)
            held[url] = table
            yield table.select(present)
            return
        for batch in pf.iter_batches(READ_ROWS, columns=present, use_threads=False):
            yield pa.Table.from_batches([batch])


def staged_tables(url: str, options: dict[str, Any]) -> Iterator[Any]:
    """The outputs staged for publishing, a table per ``READ_ROWS`` rows (destination, size,
    origin mtime, digest, guid), filtered by Arrow: a manifest segment of a million
    files is made without a Python object per file."""
    import pyarrow.compute as pc

    for table in _groups(url, options, _STAGED):
        staged = table.filter(pc.and_(pc.fill_null(table["ok"], False),
                                      pc.not_equal(pc.fill_null(table["staging"], ""), "")))
        yield staged.select(_STAGED[2:])


#: (staging, final, size) of a staged file a rename publishes (``PublishFiles``).
Move = tuple[str, str, int]
#: (staging marker, final, size, parts) of a staged upload or empty object the store
#: publishes itself (``CompleteUploads``).
Upload = tuple[str, str, int, Parts]


def publishing_by_folder(url: str, options: dict[str, Any]
                         ) -> tuple[list[FolderMove], list[Move], list[Upload]] | None:
    """``publishing_of`` with the renames of files that keep their names grouped by
    staging and final folder, by Arrow (``FolderMove``: no value per file; a rename of
    the folder publishes them where the storage can). None for a file that names one
    path in the escaped form (``names.to_utf8``): ``publishing_of`` reads it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    groups: dict[tuple[str, str], tuple[list[str], list[int]]] = {}
    moves: list[Move] = []
    uploads: list[Upload] = []
    for table in _groups(url, options, _PUBLISHING):
        staging = pc.fill_null(table["staging"], "")
        table = table.filter(pc.and_(pc.fill_null(table["ok"], False),
                                     pc.not_equal(staging, "")))
        if not table.num_rows:
            continue
        marked = [pc.starts_with(table["staging"], p) for p in NOT_A_PATH]
        paths = pc.and_(pc.invert(reduce(pc.or_, marked)),
                        pc.and_(pc.match_substring(table["staging"], "/"),
                                pc.match_substring(table["destination"], "/")))
        if pc.any(pc.or_(pc.match_substring(table["staging"], "\x00"),
                         pc.match_substring(table["destination"], "\x00"))).as_py():
            return None
        rest = _moves_and_uploads(table.filter(pc.invert(paths)))
        moves += rest[0]
        uploads += rest[1]
        renamed = table.filter(paths)
        staged = pc.split_pattern(renamed["staging"], "/", max_splits=1, reverse=True)
        final = pc.split_pattern(renamed["destination"], "/", max_splits=1, reverse=True)
        named = pc.equal(pc.list_element(staged, 1), pc.list_element(final, 1))
        moves += _moves_and_uploads(renamed.filter(pc.invert(named)))[0]
        folders = pa.table({"staged": pc.list_element(staged, 0).filter(named),
                            "final": pc.list_element(final, 0).filter(named),
                            "name": pc.list_element(final, 1).filter(named),
                            "size": renamed["size"].filter(named)})
        by = folders.group_by(["staged", "final"], use_threads=False).aggregate(
            [("name", "list"), ("size", "list")])
        for staged_in, final_in, names, sizes in zip(
                by["staged"].to_pylist(), by["final"].to_pylist(),
                by["name_list"].to_pylist(), by["size_list"].to_pylist(), strict=True):
            have = groups.setdefault((staged_in, final_in), ([], []))
            have[0].extend(names)
            have[1].extend(sizes)
    return [FolderMove(staged_in, final_in, tuple(names), tuple(sizes))
            for (staged_in, final_in), (names, sizes) in groups.items()], moves, uploads


def publishing_of(url: str, options: dict[str, Any]) -> tuple[list[Move], list[Upload]]:
    """What publishing the file's staged outputs takes, read once: the renames and the
    uploads to complete. Outputs a task already published (``--visibility file``) need
    neither; a file written before the parts column existed holds renames only."""
    moves: list[Move] = []
    uploads: list[Upload] = []
    for table in _groups(url, options, _PUBLISHING):
        more = _moves_and_uploads(table)
        moves += more[0]
        uploads += more[1]
    return moves, uploads


def _moves_and_uploads(table: Any) -> tuple[list[Move], list[Upload]]:
    """The renames and uploads of a table of a results file's rows."""
    moves: list[Move] = []
    uploads: list[Upload] = []
    ok, size = table.column("ok").to_pylist(), table.column("size").to_pylist()
    staging, dest = ([from_utf8(p or "") for p in table.column(c).to_pylist()]
                     for c in ("staging", "destination"))
    parts = (table.column("parts").to_pylist() if "parts" in table.column_names
             else [None] * len(ok))
    for i, good in enumerate(ok):
        if not (good and staging[i]):
            continue
        if is_path(staging[i]):
            moves.append((staging[i], dest[i], size[i]))
        elif parse_staged(staging[i]).needs_complete:
            uploads.append((staging[i], dest[i], size[i], tuple(
                (p["number"], p["etag"], p["size"]) for p in parts[i] or ())))
    return moves, uploads
