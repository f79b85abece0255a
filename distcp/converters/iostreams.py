"""Small pull-based stream adapters the converters are built from (executor).

The writer pulls with ``readinto`` into one reused buffer; every adapter here
holds at most one chunk, so a chain of them stays bounded by buffer sizes
whatever the file size (DESIGN.md invariant 4).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from distcp.converters.safety import ExpansionBudget
from distcp.errors import CopyError


class CountingReader(io.RawIOBase):
    """Counts the bytes read through it: the "consumed" side of a ratio check."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.count += n
        return n

    def read(self, size: int = -1) -> bytes:
        data: bytes = self.raw.read(size)
        self.count += len(data)
        return data


class PrefixReader(io.RawIOBase):
    """Replays bytes already peeked from ``raw`` (to sniff a format), then the rest."""

    def __init__(self, prefix: bytes, raw: Any) -> None:
        self.prefix = prefix
        self.raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def read(self, size: int = -1) -> bytes:
        if not self.prefix:
            data: bytes = self.raw.read(size)
            return data
        if size < 0:
            head, self.prefix = self.prefix, b""
            rest: bytes = self.raw.read()
            return head + rest
        head, self.prefix = self.prefix[:size], self.prefix[size:]
        return head  # a short read, which every reader of raw streams accepts


def peek(raw: Any, n: int) -> tuple[bytes, PrefixReader]:
    """The first ``n`` bytes of ``raw`` (fewer at EOF) and a reader that replays them."""
    head = b""
    while len(head) < n:
        chunk = raw.read(n - len(head))
        if not chunk:
            break
        head += chunk
    return head, PrefixReader(head, raw)


class ConvertedReader(io.RawIOBase):
    """The output stream of a converter: maps failures, enforces the budget.

    ``translate`` turns a library exception (zlib.error, BadGzipFile, EOFError,
    tarfile.ReadError, ...) into a ConversionError naming the file and the
    cause; CopyErrors (ours, or a source read failure) pass unchanged.
    ``consumed`` reports how many input bytes were read so far.
    """

    def __init__(self, inner: Any, translate: Callable[[BaseException], CopyError],
                 budget: ExpansionBudget | None = None,
                 consumed: Callable[[], int] = lambda: 0,
                 on_close: Callable[[], None] | None = None,
                 upstream: Any = None) -> None:
        self.inner = inner
        self.translate = translate
        self.budget = budget
        self.consumed = consumed
        self.on_close = on_close
        self.upstream = upstream

    def damage(self) -> CopyError | None:
        """What the stream this one decodes knows is wrong with it (see ``upstream_damage``)."""
        return upstream_damage(self.upstream)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            if hasattr(self.inner, "readinto"):
                n = self.inner.readinto(buffer) or 0
            else:
                data = self.inner.read(len(buffer))
                n = len(data)
                buffer[:n] = data
        except CopyError:
            raise
        except Exception as exc:
            raise self.translate(exc) from exc
        if self.budget is not None and n:
            self.budget.add(n, self.consumed())
        return n

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self.on_close is not None:
                self.on_close()
        finally:
            super().close()


class CompressingReader(io.RawIOBase):
    """Pull-based compression: read a chunk of ``raw``, return what the compressor emits."""

    def __init__(self, raw: Any, compressor: Any, chunk: int) -> None:
        self.raw = raw
        self.compressor = compressor
        self.chunk = chunk
        self.pending = b""
        self.done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.pending and not self.done:
            data = self.raw.read(self.chunk)
            if data:
                self.pending = self.compressor.compress(data)
            else:
                self.pending = self.compressor.flush()
                self.done = True
        n = min(len(buffer), len(self.pending))
        buffer[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n


def upstream_damage(raw: Any) -> CopyError | None:
    """The cause a stream earlier in the chain gives for bad bytes, or None.

    A decoder that finds its input corrupt asks this before naming its own symptom: a
    decrypting stream (``GpgPipe.damage``) knows whether the ciphertext failed its
    integrity check, and a decoded stream passes the question up its chain."""
    probe = getattr(raw, "damage", None)
    return probe() if callable(probe) else None
