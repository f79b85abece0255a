"""The built-in quality checks, run on each staged output (executor).

``not-empty``, ``min-size``, ``max-size``, ``gzip``, ``parquet`` and ``schema``.

Byte-reading checks keep bounded state whatever the output's size: ``gzip``
decompresses into a discarded window of GZIP_WINDOW bytes; ``parquet`` keeps the
first 4 bytes and the last TAIL_MAX bytes (the footer), which pyarrow then reads as
the end of a file of the real size.
"""

from __future__ import annotations

import io
import zlib
from typing import Any

from distcp.quality.base import Inspector, QualityCheck, StagedOutput
from distcp.quantities import parse_size

#: Decompressed bytes one gzip step may produce (discarded): the check's memory bound.
GZIP_WINDOW = 1 << 20
#: Bytes at a Parquet file's end kept for its footer; a larger footer fails the check.
TAIL_MAX = 16 << 20
_MAGIC = b"PAR1"


class NotEmpty(QualityCheck):
    """The output has at least one byte."""

    name = "not-empty"

    def check(self, output: StagedOutput, seen: Inspector | None) -> str | None:
        return "the output is empty (0 bytes)" if output.size == 0 else None


class _SizeBound(QualityCheck):
    takes_arg = True

    def __init__(self, arg: str | None = None) -> None:
        super().__init__(arg)
        if not (arg or "").isdigit():
            raise ValueError(f"not a size: {arg!r}")
        self.bound = int(arg or "")

    @classmethod
    def resolve(cls, arg: str | None) -> str | None:
        """``1K`` -> ``1024`` on the driver, read as ``--max-size`` reads it; tasks get
        the plain number."""
        return str(parse_size(arg or ""))


class MinSize(_SizeBound):
    """``min-size=N``: at least N bytes (``1K``, ``256M``: binary multiples)."""

    name = "min-size"

    def check(self, output: StagedOutput, seen: Inspector | None) -> str | None:
        if output.size < self.bound:
            return f"{output.size} bytes, fewer than the minimum {self.bound}"
        return None


class MaxSize(_SizeBound):
    """``max-size=N``: at most N bytes."""

    name = "max-size"

    def check(self, output: StagedOutput, seen: Inspector | None) -> str | None:
        if output.size > self.bound:
            return f"{output.size} bytes, more than the maximum {self.bound}"
        return None


class GzipStream:
    """Decompresses every member of a gzip stream into nothing, noting the first error."""

    def __init__(self) -> None:
        self.inflater = zlib.decompressobj(wbits=31)
        self.members = 0
        self.pending = False  # a member has started and not ended
        self.error = ""

    def update(self, chunk: bytes | memoryview, /) -> None:
        data = bytes(chunk)
        while data and not self.error:
            if self.inflater.eof:
                self.inflater = zlib.decompressobj(wbits=31)
            self.pending = True
            try:
                data = self._inflate(data)
            except zlib.error as exc:
                self.error = str(exc)

    def _inflate(self, data: bytes) -> bytes:
        """Inflate ``data`` up to the end of its member; what follows that member."""
        while True:
            out = self.inflater.decompress(data, GZIP_WINDOW)
            if self.inflater.eof:
                self.members += 1
                self.pending = False
                return self.inflater.unused_data
            data = self.inflater.unconsumed_tail
            if not data and len(out) < GZIP_WINDOW:
                return b""

    def problem(self) -> str | None:
        if self.error:
            return f"not a valid gzip stream ({self.error})"
        if self.pending:
            return "truncated gzip stream (it ends inside a member)"
        if not self.members:
            return "not a gzip stream (no member)"
        return None


class Gzip(QualityCheck):
    """A valid gzip stream, read to its end: every member complete, its CRC right."""

    name = "gzip"
    reads_bytes = True

    def inspector(self) -> Inspector:
        return GzipStream()

    def check(self, output: StagedOutput, seen: Inspector | None) -> str | None:
        assert isinstance(seen, GzipStream)
        return seen.problem()


class ParquetTail:
    """The first bytes and the last TAIL_MAX bytes of a stream, and its size."""

    def __init__(self) -> None:
        self.head = b""
        self.tail = bytearray()
        self.size = 0

    def update(self, chunk: bytes | memoryview, /) -> None:
        if len(self.head) < len(_MAGIC):
            self.head += bytes(chunk[:len(_MAGIC) - len(self.head)])
        self.size += len(chunk)
        self.tail += chunk
        if len(self.tail) > 2 * TAIL_MAX:
            del self.tail[:len(self.tail) - TAIL_MAX]

    def schema(self) -> tuple[Any, str | None]:
        """The file's Arrow schema, or None and why it cannot be read."""
        if self.size < 12:
            return None, f"too small for a Parquet file ({self.size} bytes)"
        if self.head != _MAGIC:
            return None, "not a Parquet file (no PAR1 at its start)"
        if bytes(self.tail[-4:]) != _MAGIC:
            return None, "not a complete Parquet file (no PAR1 at its end: truncated?)"
        footer = int.from_bytes(self.tail[-8:-4], "little")
        if footer + 12 > self.size:
            return None, f"corrupt Parquet footer (length {footer} beyond the file)"
        if footer + 8 > len(self.tail):
            return None, f"Parquet footer of {footer} bytes is larger than {TAIL_MAX}: not read"
        import pyarrow.parquet as pq

        try:
            meta = pq.read_metadata(_TailFile(bytes(self.tail), self.size))
            return meta.schema.to_arrow_schema(), None
        except Exception as exc:  # noqa: BLE001 - pyarrow's errors vary by version
            return None, f"unreadable Parquet footer ({type(exc).__name__}: {exc})"


class _TailFile(io.RawIOBase):
    """A read-only file of ``size`` bytes of which only the last ``len(tail)`` exist:
    enough for a footer reader, which reads only there."""

    def __init__(self, tail: bytes, size: int) -> None:
        self.data = tail
        self.size = size
        self.base = size - len(tail)
        self.pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def read(self, n: int = -1) -> bytes:
        if self.pos < self.base:
            raise OSError(f"read at {self.pos}, before the kept footer")
        end = self.size if n < 0 else min(self.size, self.pos + n)
        out = self.data[self.pos - self.base:end - self.base]
        self.pos = end
        return out

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


class Parquet(QualityCheck):
    """A Parquet file whose footer and schema pyarrow reads."""

    name = "parquet"
    reads_bytes = True

    def inspector(self) -> Inspector:
        return ParquetTail()

    def check(self, output: StagedOutput, seen: Inspector | None) -> str | None:
        assert isinstance(seen, ParquetTail)
        return seen.schema()[1]


class Schema(Parquet):
    """``schema=COL:TYPE,...`` (or ``schema=@FILE`` holding that text, read on the
    driver): a Parquet file with exactly these columns, in any order, each of the
    type pyarrow prints (``int64``, ``string``, ``double``, ``timestamp[ms]``...)."""

    name = "schema"
    takes_arg = True

    def __init__(self, arg: str | None = None) -> None:
        super().__init__(arg)
        self.columns = parse_schema(arg or "")

    @classmethod
    def resolve(cls, arg: str | None) -> str | None:
        if arg and arg.startswith("@"):
            with open(arg[1:], encoding="utf-8") as f:
                return ",".join(line.strip() for line in f if line.strip())
        return arg

    def check(self, output: StagedOutput, seen: Inspector | None) -> str | None:
        assert isinstance(seen, ParquetTail)
        schema, problem = seen.schema()
        if problem:
            return problem
        found = {f.name: str(f.type) for f in schema}
        wrong = [f"column {name!r} is {found[name]}, not {kind}"
                 for name, kind in self.columns.items() if name in found and found[name] != kind]
        wrong += [f"column {name!r} is missing" for name in self.columns if name not in found]
        wrong += [f"unexpected column {name!r} ({found[name]})"
                  for name in found if name not in self.columns]
        return "schema differs: " + ", ".join(wrong) if wrong else None


def parse_schema(text: str) -> dict[str, str]:
    """``"id:int64,ts:timestamp[ms, tz=UTC]"`` -> {"id": "int64", "ts": ...}; commas
    inside brackets belong to the type."""
    columns: dict[str, str] = {}
    for item in _split_top_level(text):
        name, sep, kind = item.partition(":")
        if not sep or not name.strip() or not kind.strip():
            raise ValueError(f"not COLUMN:TYPE: {item.strip()!r}")
        if name.strip() in columns:
            raise ValueError(f"column {name.strip()!r} given twice")
        columns[name.strip()] = kind.strip()
    if not columns:
        raise ValueError("no column given (COLUMN:TYPE,...)")
    return columns


def _split_top_level(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"[": 1, "(": 1, "<": 1, "]": -1, ")": -1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [i for i in items if i.strip()]
