"""A dataset's manifest as Parquet segments of what was published (driver and executor).

Each published file set appends one *segment* (a Parquet file of its entries and of
the destinations it deleted, as tombstones), so publishing file set N writes only
N's entries, never those of 1..N-1. Every row carries ``seq``, the position of its
segment in the dataset's history: the manifest is, per destination, the row with
the highest ``seq``, unless that row is a tombstone. Because rows keep their
``seq`` through compaction, any set of segments (the live ones, or a folder caught
half-way through a compaction) resolves to the same manifest, so Spark can read
the folder as it is (``distcp.spark.manifest.manifest_frame``).

Destinations are Parquet strings, which must be UTF-8: a name that is not is stored
as ``distcp.names.to_utf8`` writes it (each undecodable byte as NUL and two hex
digits) and read back by ``from_utf8``; every other name is stored as it is, so
segments written before read unchanged.

Compaction merges the newest segments (tiered, as a log-structured merge does) once
their number passes a threshold, so each entry is rewritten O(log files) times, not
once per publish. pyarrow is imported where it is used: ``status`` and planning
without ``--incremental`` never need it.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from distcp.names import from_utf8, to_utf8

#: (destination, size, origin mtime, digest, guid): one published file.
Entry = tuple[str, int, float, str, str]
#: The columns of a segment, in order (``seq`` and ``deleted`` resolve the history).
COLUMNS = ("destination", "size", "mtime", "digest", "guid", "seq", "deleted")
#: Merge segments once a dataset has more than this many.
COMPACT_AFTER = 16


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema([("destination", pa.string()), ("size", pa.int64()),
                      ("mtime", pa.float64()), ("digest", pa.string()),
                      ("guid", pa.string()), ("seq", pa.int64()),
                      ("deleted", pa.bool_())])


@dataclass(frozen=True)
class Segment:
    """One live segment as the state document lists it: its file name, row count and
    the newest ``seq`` among its rows (a compacted segment spans several)."""

    name: str
    rows: int
    seq: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "rows": self.rows, "seq": self.seq}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Segment:
        return Segment(str(data["name"]), int(data["rows"]), int(data["seq"]))


def segment_table(entries: Iterable[Entry], removed: Iterable[str], seq: int) -> Any:
    """One publish's rows, sorted by destination (the same input gives the same
    bytes, so a replay rewrites an identical file). An entry beats a tombstone of the
    same destination: the sequence deleted, then published it."""
    import pyarrow as pa

    rows = {to_utf8(e[0]): (e[1], e[2], e[3] or "", e[4], False) for e in entries}
    for dest in removed:
        rows.setdefault(to_utf8(dest), (0, 0.0, "", "", True))
    names = sorted(rows)
    cols = list(zip(*(rows[n] for n in names))) or [(), (), (), (), ()]
    return _segment([names, list(cols[0]), list(cols[1]), list(cols[2]), list(cols[3])],
                    seq, pa.array(list(cols[4]), pa.bool_()))


def staged_segment(staged: Any, seq: int) -> Any:
    """``segment_table`` of a table of staged outputs (``resultfiles.staged_tables``:
    destinations unique, already in ``to_utf8`` form), by Arrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = staged.sort_by("destination")
    return _segment([rows["destination"], rows["size"], rows["mtime"],
                     pc.fill_null(rows["digest"], ""), rows["guid"]],
                    seq, pa.array([False] * rows.num_rows))


def _segment(columns: list[Any], seq: int, deleted: Any) -> Any:
    """A segment from its first five columns, in ``COLUMNS`` order: ``seq`` on every row."""
    import pyarrow as pa

    return pa.table([*columns, pa.array([seq] * len(deleted), pa.int64()), deleted],
                    schema=_schema())


def to_parquet(table: Any) -> bytes:
    """The table as the bytes of one Parquet file (written whole by ``write_atomic``)."""
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def from_parquet(data: bytes, columns: Sequence[str] | None = None) -> Any:
    """A segment's rows (``columns`` alone, if given). Read as one file, not through
    ``pq.read_table``, whose first call imports ``pyarrow.dataset``: 0.3 s of a 300,000
    file no-op rerun, where the read itself takes 0.03 s."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pq.ParquetFile(pa.BufferReader(data)).read(
        columns=list(columns) if columns else None)


def concat(tables: Sequence[Any], columns: Sequence[str] = COLUMNS) -> Any:
    """Segments as one table (an empty one with the schema when there are none)."""
    import pyarrow as pa

    schema = _schema()
    want = pa.schema([schema.field(c) for c in columns])
    return pa.concat_tables([t.select(list(columns)) for t in tables]) if tables \
        else want.empty_table()


def newest(table: Any, keep_tombstones: bool = False) -> Any:
    """Per destination the row with the highest ``seq`` (ties: the later row), without
    tombstones unless ``keep_tombstones`` (a partial merge must keep them: an older
    segment outside it may still hold the destination)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if table.num_rows == 0:
        return table
    order = pc.sort_indices(table.append_column("_row", pa.array(range(table.num_rows))),
                            sort_keys=[("destination", "ascending"), ("seq", "descending"),
                                       ("_row", "descending")])
    table = table.take(order)
    dest = table.column("destination")
    first = pc.not_equal(dest.slice(1), dest.slice(0, table.num_rows - 1))
    mask = pa.concat_arrays([pa.array([True]), *first.cast(pa.bool_()).chunks]) \
        if table.num_rows > 1 else pa.array([True])
    table = table.filter(mask)
    if not keep_tombstones:
        table = table.filter(pc.invert(table.column("deleted")))
    return table


def to_dict(table: Any) -> dict[str, list[Any]]:
    """A resolved table as the in-memory manifest: dest -> [size, mtime, digest, guid]."""
    cols = [table.column(c).to_pylist() for c in ("destination", "size", "mtime", "digest",
                                                   "guid")]
    return {from_utf8(d): [s, m, g, u] for d, s, m, g, u in zip(*cols)}


def destinations(table: Any) -> list[str]:
    """A table's destinations as the engine names them (``from_utf8``)."""
    return [from_utf8(d) for d in table.column("destination").to_pylist()]


def to_merge(segments: Sequence[Segment], threshold: int = COMPACT_AFTER) -> int:
    """How many of the newest segments to merge now (0: none).

    Tiered: from the newest, take segments while what is taken is at least half the
    size of the next older one, so merges join segments of similar size and each
    row is rewritten about log2(files) times in all (a merge of everything each time
    would rewrite the whole manifest every ``threshold`` publishes).
    """
    if len(segments) <= threshold:
        return 0
    taken, rows = 1, segments[-1].rows
    while taken < len(segments):
        older = segments[-1 - taken]
        if taken >= 2 and rows * 2 < older.rows:
            break
        taken, rows = taken + 1, rows + older.rows
    return taken


def segment_name(seq: int, sequence_id: str) -> str:
    """A publish's segment: its ``seq`` first, so names sort oldest first."""
    return f"s{seq:010d}-{sequence_id}.parquet"


def merged_name(merged: Sequence[Segment]) -> str:
    """The file a merge writes: named after what it merges (the newest ``seq`` first),
    so a merge cut short by a crash and done again writes the same file."""
    return f"m{merged[-1].seq:010d}-{merged[0].seq:010d}-{len(merged)}.parquet"


def age(name: str) -> tuple[int, str]:
    """Sort key of a manifest folder's files, oldest first: the newest ``seq`` a file
    can hold, which its name starts with; anything else (a crashed write's temporary
    file) first of all.

    Removing replaced files oldest first keeps a folder read right at every instant
    even though a merge of every segment drops tombstones: a destination's older rows
    are always gone before the tombstone that hid them.
    """
    head = name.split("-", 1)[0]
    if name.endswith(".parquet") and head[:1] in ("s", "m") and head[1:].isdigit():
        return int(head[1:]), name
    return -1, name
