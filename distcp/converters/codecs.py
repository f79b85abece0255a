"""Compression converters: ``gunzip``, ``gzip``, ``bunzip2``, ``unxz`` (driver and executor).

Decompression uses the standard library's file objects over the input stream,
which check what matters: gzip's CRC and length trailer of every member (and
accept concatenated members, which are legal gzip), bzip2's block CRCs, xz's
check. Each fails loudly on truncation and on trailing garbage. Output bytes are
counted against ``--max-expansion-ratio`` / ``--max-expanded-bytes``.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import zlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, ClassVar

from distcp.converters.base import Converter
from distcp.converters.iostreams import (
    CompressingReader,
    ConvertedReader,
    CountingReader,
    upstream_damage,
)
from distcp.converters.names import replace_suffix
from distcp.converters.safety import ExpansionBudget
from distcp.errors import ConversionError, CopyError
from distcp.storage.filesystems import display
from distcp.streams import FileAwareInputStream


def describe(exc: BaseException) -> str:
    """A short, user-facing cause for a decompression library's exception."""
    if isinstance(exc, EOFError):
        return f"truncated input ({exc})"
    if isinstance(exc, gzip.BadGzipFile):
        text = str(exc)
        if text.startswith("Not a gzipped file"):
            return f"{text}: not gzip, or trailing garbage after the last member"
        return f"corrupt gzip: {text}"
    if isinstance(exc, (zlib.error, OSError, lzma.LZMAError)):
        return f"corrupt data: {exc}"
    return f"{type(exc).__name__}: {exc}"


class _Decompress(Converter):
    """Shared shape of the decompressors: open ``inner`` over the input, count, map errors."""

    suffixes: ClassVar[dict[str, str]] = {}

    def rename(self, destination: str) -> str:
        return replace_suffix(destination, self.suffixes)

    def open_inner(self, raw: Any) -> Any:
        raise NotImplementedError

    def convert(self, stream: FileAwareInputStream) -> Iterator[FileAwareInputStream]:
        origin = stream.file.origin.url
        counted = CountingReader(stream.stream)
        inner = self.open_inner(counted)
        budget = ExpansionBudget(origin, self.name, self.options.max_expansion_ratio,
                                 self.options.max_expanded_bytes)

        def translate(exc: BaseException) -> CopyError:
            return upstream_damage(stream.stream) or ConversionError(
                f"cannot {self.name} {display(origin)}: {describe(exc)}", path=origin)

        out: Any = ConvertedReader(inner, translate, budget, lambda: counted.count, inner.close,
                                   upstream=stream.stream)
        yield replace(stream, stream=out, destination=self.rename(stream.destination))


class GunzipConverter(_Decompress):
    """``gunzip``: ``x.gz`` -> ``x``, ``x.tgz`` -> ``x.tar``; multi-member gzip accepted."""

    name = "gunzip"
    suffixes: ClassVar[dict[str, str]] = {".tgz": ".tar", ".gz": ""}

    def open_inner(self, raw: Any) -> Any:
        return _RefuseEmpty(gzip.GzipFile(fileobj=raw, mode="rb"), raw)


class _RefuseEmpty:
    """A 0-byte input is no gzip stream (gzip(1) calls it truncated, as our bunzip2 and
    unxz do), but Python's gzip reads it as no data: refuse it at EOF instead of
    publishing an empty file."""

    def __init__(self, inner: Any, counted: CountingReader) -> None:
        self.inner = inner
        self.counted = counted

    def readinto(self, buffer: Any) -> int:
        n = int(self.inner.readinto(buffer) or 0)
        if not n and not self.counted.count:
            raise EOFError("the file is empty")
        return n

    def close(self) -> None:
        self.inner.close()


class Bunzip2Converter(_Decompress):
    """``bunzip2``: ``x.bz2`` -> ``x``, ``x.tbz2``/``x.tbz`` -> ``x.tar``."""

    name = "bunzip2"
    suffixes: ClassVar[dict[str, str]] = {".tbz2": ".tar", ".tbz": ".tar", ".bz2": ""}

    def open_inner(self, raw: Any) -> Any:
        return bz2.BZ2File(raw, mode="rb")


class UnxzConverter(_Decompress):
    """``unxz``: ``x.xz`` -> ``x``, ``x.txz`` -> ``x.tar``."""

    name = "unxz"
    suffixes: ClassVar[dict[str, str]] = {".txz": ".tar", ".xz": ""}

    def open_inner(self, raw: Any) -> Any:
        return lzma.LZMAFile(raw, mode="rb")


class GzipConverter(Converter):
    """``gzip``: compress, appending ``.gz`` (one gzip member, level 6 like gzip(1))."""

    name = "gzip"
    level: ClassVar[int] = 6

    def rename(self, destination: str) -> str:
        return destination + ".gz"

    def convert(self, stream: FileAwareInputStream) -> Iterator[FileAwareInputStream]:
        compressor = zlib.compressobj(self.level, zlib.DEFLATED, 31)  # 31: gzip framing
        out: Any = CompressingReader(stream.stream, compressor, self.options.buffer_size)
        yield replace(stream, stream=out, destination=self.rename(stream.destination))
