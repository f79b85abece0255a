"""Read buffers start on a cache line: the kernel's copy into a buffer 8 to 31 bytes
past a page boundary (where every large bytearray starts) was three times slower."""

from __future__ import annotations

import ctypes
import itertools
import os
import threading
from pathlib import Path

import pytest

from distcp.checksum import BLOCK, digest_of_bytes
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


@pytest.fixture
def spans_from_4_mib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(holes, "SPANS_FROM", 4 << 20)


@pytest.mark.usefixtures("spans_from_4_mib")
@pytest.mark.parametrize("readers", [2, 3])
@pytest.mark.parametrize("sparse", [False, True])
def test_a_big_file_is_re_read_in_spans_by_threads_to_its_own_digest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, readers: int, sparse: bool) -> None:
    """The publish's re-read of a file joined from ranges (a local disk's ``digest_of``):
    one span a reader, each read in a thread of its own but the first, whose digests
    join into the file's; holes still hash as zeros; one flipped byte in the last span
    is found."""
    path = tmp_path / "f"
    data = bytearray(os.urandom((9 << 20) + 4321))
    if sparse:
        data[(1 << 20):(6 << 20)] = bytes(5 << 20)
        with open(path, "wb") as f:  # the zeros as a hole
            f.write(data[:1 << 20])
            f.seek(6 << 20)
            f.write(data[6 << 20:])
        assert os.stat(path).st_blocks * 512 < len(data)
    else:
        path.write_bytes(data)
    seen: list[tuple[str, int, int]] = []
    span = holes.digest_span

    def recorded(fd: int, offset: int, length: int, buffer: bytearray) -> object:
        seen.append((threading.current_thread().name, offset, length))
        return span(fd, offset, length, buffer)

    monkeypatch.setattr(holes, "digest_span", recorded)
    got = holes.digest_of_file(str(path), bytearray(1 << 20), readers)
    assert got.hexdigest() == digest_of_bytes(bytes(data)) and got.size == len(data)
    spans = sorted((offset, length) for _, offset, length in seen)
    assert len(spans) == readers and spans[0][0] == 0 and sum(n for _, n in spans) == len(data)
    assert all(a + n == b for (a, n), (b, _) in itertools.pairwise(spans))
    assert all(offset % BLOCK == 0 for offset, _ in spans)
    assert sorted(name == "digest-span" for name, _, _ in seen) == [False] + [True] * (readers - 1)
    with open(path, "r+b") as f:
        f.seek(len(data) - 10)
        f.write(bytes([data[-10] ^ 1]))
    assert holes.digest_of_file(str(path), bytearray(1 << 20), readers).hexdigest() \
        != got.hexdigest()


def test_a_file_shorter_than_its_spans_gives_its_own_size_and_digest(tmp_path: Path) -> None:
    """A file that shrank between its listing and the re-read: the span that ends short
    (inside a block) ends the digest, which is that of the bytes there are (the caller
    compares sizes)."""
    data = os.urandom((5 << 20) + 100)
    (tmp_path / "f").write_bytes(data)
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        got = holes._digest_in_spans(fd, 12 << 20, bytearray(1 << 20), 3)  # spans of 4 MiB
    finally:
        os.close(fd)
    assert got.size == len(data) and got.hexdigest() == digest_of_bytes(data)


def test_a_small_file_or_one_reader_is_read_in_this_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Below ``SPANS_FROM`` (and with one reader) no thread is started."""
    (tmp_path / "f").write_bytes(os.urandom(3 << 20))
    started: list[object] = []
    monkeypatch.setattr(threading.Thread, "start", lambda self: started.append(self))
    holes.digest_of_file(str(tmp_path / "f"), bytearray(1 << 20), 4)
    monkeypatch.setattr(holes, "SPANS_FROM", 1 << 20)
    holes.digest_of_file(str(tmp_path / "f"), bytearray(1 << 20), 1)
    assert started == []
