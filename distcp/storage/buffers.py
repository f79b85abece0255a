"""Reused read buffers whose reads land on a 64-byte boundary (driver and executor).

A read from the page cache into a buffer is a copy in the kernel, and on this project's
AMD EPYC that copy is two to three times slower when the buffer starts 8 to 31 bytes
past a page boundary, which is where a ``bytearray`` of 128 KiB or more always starts
(glibc maps it and puts its 16-byte header first). 64 MiB read from tmpfs into such a
buffer (2026-11-30): 0.052 s in pieces of 64 KiB, 0.016 s from its next 64-byte
boundary; in pieces of 4 KiB 0.054 s against 0.029 s; 2 GiB re-read and hashed by
two processes (the verify of 8 × 256 MiB) 0.58 s against 0.20 s. Writes from it are
not slower. So the buffers the copy reads into are ``ReadBuffer``s, and the readers of
a local file read into ``aligned(buffer)``.
"""

from __future__ import annotations

#: The boundary a read buffer starts on: a cache line.
ALIGN = 64


class ReadBuffer(bytearray):
    """A reused buffer of ``size`` bytes to read into: ``view`` is ``size`` bytes of it
    from its first ``ALIGN``-byte boundary, found once (the bytearray itself is
    ``ALIGN`` bytes longer and is never resized: the view holds it)."""

    __slots__ = ("view",)

    def __init__(self, size: int) -> None:
        super().__init__(size + ALIGN)
        skew = _skew(self)
        self.view = memoryview(self)[skew:skew + size]


def aligned(buffer: bytearray) -> memoryview:
    """``buffer`` from its first ``ALIGN``-byte boundary: a ``ReadBuffer``'s view, or
    for any other bytearray the view computed now (the ``ALIGN - 1`` bytes at most
    before the boundary are left unused)."""
    if isinstance(buffer, ReadBuffer):
        return buffer.view
    return memoryview(buffer)[_skew(buffer):] if buffer else memoryview(buffer)


def _skew(buffer: bytearray) -> int:
    """Bytes from the start of ``buffer`` to its first ``ALIGN``-byte boundary."""
    import ctypes  # its address: ~1 µs, once per buffer

    return -ctypes.addressof(ctypes.c_char.from_buffer(buffer)) % ALIGN
