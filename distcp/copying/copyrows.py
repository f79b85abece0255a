"""The files to copy kept where the copy tasks read them (driver and executor).

Planning on Spark (``distcp.spark.planning``) decides every file in tasks. For a plain
copy of a tree (``distcp.run.choice.keeps_copies``) the files to copy do not
travel to the driver: each planning task writes its copy decisions to one Parquet file
of its own beside the job's staging, in row groups of CHUNK files, and sends the driver
one row naming the file with the files and bytes of each chunk. The driver packs
chunks, not files, into work units; a copy task reads its chunks back. A million files
to copy thus cost the driver a few hundred small rows.

A file a failed task attempt wrote is named by no row that reached the driver: it is
never read, and goes with the job's folder.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from distcp.model import CopyableFile
from distcp.storage import storage_for

#: Files of one row group: the unit of packing (a work unit holds whole chunks, unless
#: there are fewer chunks than units wanted: ``packing.split_chunks`` cuts them).
CHUNK = 1_000


@dataclass(frozen=True)
class CopyRows:
    """One planning task's file of files to copy: where it is, and per chunk (row
    group) the files and bytes it holds."""

    url: str
    chunks: tuple[tuple[int, int], ...]

    @property
    def files(self) -> int:
        return sum(n for n, _ in self.chunks)

    @property
    def bytes(self) -> int:
        return sum(b for _, b in self.chunks)


@dataclass(frozen=True)
class Chunk:
    """Files ``first`` to ``first + files`` of one row group of a copy-rows file, as
    packed into a work unit (a whole row group, or a part of one cut for balance)."""

    url: str
    index: int
    files: int
    bytes: int
    first: int = 0


def chunks_of(rows: Sequence[CopyRows]) -> list[Chunk]:
    """Every row group of ``rows``, whole."""
    return [Chunk(r.url, i, n, b) for r in rows for i, (n, b) in enumerate(r.chunks)]


def _schema() -> Any:
    """A copy-rows file's columns: a row per chunk (its own row group) holding its files
    and bytes and its CopyableFiles pickled as one list (not the planner's Action: copy
    tasks never import the planning stage). One pickle a chunk shares the classes and
    the dataset's strings: 1.4 µs a file to write and 2.5 to read, against 2.9 and 4.1
    pickled one by one, and 40 % fewer bytes."""
    import pyarrow as pa

    return pa.schema([("files", pa.int64()), ("bytes", pa.int64()), ("payload", pa.binary())])


class CopyRowsWriter:
    """Writes one task's copy decisions as they come, a row group per CHUNK files, so a
    planning task holds at most one chunk; the file is opened at the first one."""

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        self.url, self.options = url, options
        self.pending: list[CopyableFile] = []
        self.size = 0
        self.chunks: list[tuple[int, int]] = []
        self._file: Any = None
        self._writer: Any = None

    def add(self, file: CopyableFile) -> None:
        self.pending.append(file)
        self.size += file.origin.size
        if len(self.pending) >= CHUNK:
            self._flush()

    def close(self) -> CopyRows | None:
        """The file written (None: no file to copy), closed; a failure leaves a partial
        file that no row names."""
        if self.pending:
            self._flush()
        if self._writer is not None:
            self._writer.close()
            self._file.close()
        return CopyRows(self.url, tuple(self.chunks)) if self.chunks else None

    def _flush(self) -> None:
        import pyarrow.parquet as pq

        if self._writer is None:
            self._file = storage_for(self.url, self.options).open_write(self.url)
            self._writer = pq.ParquetWriter(self._file, _schema())
        files, size = len(self.pending), self.size
        blob = pickle.dumps(self.pending, pickle.HIGHEST_PROTOCOL)
        self._writer.write_batch(_row(files, size, blob))
        self.chunks.append((files, size))
        self.pending, self.size = [], 0


def _row(files: int, size: int, blob: bytes) -> Any:
    """One chunk's row, its arrays made from their buffers: ``pa.array`` of Python
    objects first imports pandas to ask whether they are pandas objects (0.22-0.34 s of
    the driver's planning of 20,000 files here, and nothing else in a run needed it)."""
    import pyarrow as pa

    def int64(n: int) -> Any:
        return pa.Array.from_buffers(pa.int64(), 1, [None, pa.py_buffer(
            n.to_bytes(8, "little", signed=True))])

    offsets = pa.py_buffer((0).to_bytes(4, "little") + len(blob).to_bytes(4, "little"))
    payload = pa.Array.from_buffers(pa.binary(), 1, [None, offsets, pa.py_buffer(blob)])
    return pa.RecordBatch.from_arrays([int64(files), int64(size), payload], schema=_schema())


def read_chunk(chunk: Chunk, options: dict[str, Any]) -> list[CopyableFile]:
    """The files of one chunk, in the order planning wrote them; read on this thread
    alone (``use_threads=False``): one column of one row group gains nothing from
    Arrow's pool, and a process that exits just after a read on the pool's threads can
    abort in Arrow's teardown ("terminate called without an active exception",
    apache/arrow#34314: 5 of 670 runs of a script that read chunks, none of 300 since)."""
    import pyarrow.parquet as pq

    with storage_for(chunk.url, options).open_read(chunk.url) as f:
        table = pq.ParquetFile(f).read_row_group(chunk.index, columns=["payload"],
                                                 use_threads=False)
    files: list[CopyableFile] = pickle.loads(table.column("payload")[0].as_py())
    return files[chunk.first:chunk.first + chunk.files]
