"""Read buffers start on a cache line: the kernel's copy into a buffer 8 to 31 bytes
past a page boundary (where every large bytearray starts) was three times slower."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest

from distcp.checksum import digest_of_bytes
from distcp.storage.buffers import ALIGN, ReadBuffer, aligned
from distcp.storage.local import copyfile as localcopy
from distcp.storage.local import holes


def _address(view: memoryview | bytearray) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(view))


@pytest.mark.parametrize("size", [1, 4096, 1 << 20, 8 << 20])
def test_a_read_buffer_is_its_size_from_a_cache_line(size: int) -> None:
    buffer = ReadBuffer(size)
    assert isinstance(buffer, bytearray) and len(buffer) == size + ALIGN
    assert len(buffer.view) == size and _address(buffer.view) % ALIGN == 0
    assert aligned(buffer) is buffer.view
    assert 0 <= _address(buffer.view) - _address(buffer) < ALIGN
    with pytest.raises(BufferError):  # never resized under its view
        buffer.extend(b"x")


def test_any_bytearray_is_read_into_from_its_first_cache_line() -> None:
    plain = bytearray(1 << 20)  # glibc maps it: 16 bytes past a page boundary here
    view = aligned(plain)
    assert _address(view) % ALIGN == 0 and len(plain) - ALIGN < len(view) <= len(plain)
    assert len(aligned(bytearray())) == 0


@pytest.mark.parametrize("size", [7, 5000, (1 << 20) + 5, (3 << 20) + 17])
@pytest.mark.parametrize("buffer", [lambda: ReadBuffer(1 << 20), lambda: bytearray(1 << 20)])
def test_copies_and_verifies_through_an_aligned_view_keep_every_byte(
        tmp_path: Path, size: int, buffer: object) -> None:
    """The copy and the verify's re-read give the file's bytes and digest whether the
    file fits the view or not, through either kind of buffer."""
    data = os.urandom(size)
    (tmp_path / "src").write_bytes(data)
    buf = buffer()  # type: ignore[operator]
    src = os.open(tmp_path / "src", os.O_RDONLY)
    try:
        dst, digest = localcopy.copy_into(src, str(tmp_path / "dst"), buf)
        os.close(dst)
    finally:
        os.close(src)
    assert (tmp_path / "dst").read_bytes() == data
    assert digest.hexdigest() == digest_of_bytes(data)
    assert holes.digest_of_file(str(tmp_path / "dst"), buf).hexdigest() == digest_of_bytes(data)
