"""The kernel copy path (distcp.storage.local.copyfile) on real local files: bytes, digests, holes,
and each fallback forced through the os functions it calls."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distcp.checksum import Digest, digest_of_bytes
from distcp.copying.writer import SourceReader, write_staged
from distcp.errors import DestinationWriteError, IntegrityError, SourceReadError
from distcp.storage.local import copyfile as localcopy
from distcp.storage.local import holes
from tests.fixtures.trees import sparse_file

MIB = 1 << 20


@pytest.fixture(autouse=True)
def kernel_for_every_size(request: pytest.FixtureRequest,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests force the kernel's ways of copying with small files too, and on every
    filesystem; the small file's one read and one write, and the choice by filesystem,
    have their own tests (``small``, ``filesystem`` in their names)."""
    if "small" not in request.node.name:
        monkeypatch.setattr(localcopy, "SMALL", -1)
    if "filesystem" not in request.node.name:
        monkeypatch.setattr(localcopy, "first_method", lambda dst: localcopy.METHODS[0])


def _copy(src: Path, dst: Path, buffer_size: int = MIB, **kw: Any) -> Digest:
    with open(src, "rb", buffering=0) as f:
        fd, digest = localcopy.copy_into(f.fileno(), str(dst), bytearray(buffer_size), **kw)
    os.close(fd)
    return digest


def _digest_of_file(path: Path) -> str:
    """The reference digest: the plain loop over every byte (what the writer's loop hashes)."""
    d = Digest()
    with open(path, "rb") as f:
        while chunk := f.read(3 * MIB + 7):
            d.update(chunk)
    return d.hexdigest()


@pytest.mark.parametrize("method", localcopy.METHODS)
@pytest.mark.parametrize("size", [0, 1, MIB - 1, 5 * MIB + 123])
def test_each_method_copies_the_bytes_and_hashes_the_source(tmp_path: Path, method: str,
                                                            size: int) -> None:
    data = os.urandom(size)
    (tmp_path / "a").write_bytes(data)
    digest = _copy(tmp_path / "a", tmp_path / "b", buffer_size=2 * MIB + 5, method=method)
    assert (tmp_path / "b").read_bytes() == data
    assert digest.size == size
    assert digest.hexdigest() == digest_of_bytes(data)


def test_sparse_file_stays_sparse_and_digests_as_its_dense_content(tmp_path: Path) -> None:
    size = 256 * MIB
    regions = {10 * MIB: os.urandom(MIB), 200 * MIB + 4096: os.urandom(MIB)}
    content = sparse_file(tmp_path / "a", size, regions)
    if os.stat(tmp_path / "a").st_blocks * 512 >= size:
        pytest.skip("this filesystem does not keep holes")
    digest = _copy(tmp_path / "a", tmp_path / "b", buffer_size=8 * MIB)
    st = os.stat(tmp_path / "b")
    assert st.st_size == size
    assert st.st_blocks * 512 <= 4 * MIB  # two 1 MiB regions (block-rounded), not 256 MiB
    assert (tmp_path / "b").read_bytes() == content
    assert digest.hexdigest() == digest_of_bytes(content)
    assert holes.digest_of_file(str(tmp_path / "b"), bytearray(MIB)).hexdigest() \
        == digest_of_bytes(content)


def test_trailing_hole_keeps_the_size(tmp_path: Path) -> None:
    content = sparse_file(tmp_path / "a", 64 * MIB, {0: b"head"})
    digest = _copy(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "b").read_bytes() == content
    assert digest.hexdigest() == _digest_of_file(tmp_path / "a")


def test_range_into_shared_file_keeps_holes_and_never_shrinks_it(tmp_path: Path) -> None:
    """Two ranges of one split file, the later written first, the earlier ending in a hole."""
    content = sparse_file(tmp_path / "a", 16 * MIB, {MIB: b"x" * 100, 12 * MIB: b"y" * 100})
    digests = [Digest(), Digest()]
    buffer = bytearray(MIB)
    with open(tmp_path / "a", "rb", buffering=0) as src:
        fd = os.open(tmp_path / "b", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            for index in (1, 0):
                offset = index * 8 * MIB
                localcopy.copy_span(src.fileno(), fd, offset, 8 * MIB, buffer, digests[index])
                localcopy.extend_to(fd, offset + 8 * MIB)
        finally:
            os.close(fd)
    assert (tmp_path / "b").read_bytes() == content
    assert digests[0].blocks() + digests[1].blocks() == _blocks(content)
    assert os.stat(tmp_path / "b").st_blocks * 512 <= MIB


def _blocks(content: bytes) -> bytes:
    d = Digest()
    d.update(content)
    return d.blocks()


def test_exdev_steps_down_to_sendfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_sendfile = os.sendfile

    def refuse(*args: Any) -> int:
        calls.append("copy_file_range")
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    def sendfile(*args: Any) -> int:
        calls.append("sendfile")
        return real_sendfile(*args)

    monkeypatch.setattr(os, "copy_file_range", refuse)
    monkeypatch.setattr(os, "sendfile", sendfile)
    data = os.urandom(3 * MIB)
    (tmp_path / "a").write_bytes(data)
    digest = _copy(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "b").read_bytes() == data
    assert digest.hexdigest() == digest_of_bytes(data)
    assert calls[0] == "copy_file_range" and calls.count("copy_file_range") == 1  # once, then not
    assert calls.count("sendfile") >= 3


@pytest.mark.parametrize("code", [errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, None])
def test_unsupported_kernel_paths_fall_back_to_the_loop(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        code: int | None) -> None:
    """Both kernel calls refused (or returning 0 early, ``None``): pread/pwrite does it."""
    def refuse(*args: Any) -> int:
        if code is None:
            return 0
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "copy_file_range", refuse)
    monkeypatch.setattr(os, "sendfile", refuse)
    data = os.urandom(2 * MIB + 1)
    (tmp_path / "a").write_bytes(data)
    assert _copy(tmp_path / "a", tmp_path / "b").hexdigest() == digest_of_bytes(data)
    assert (tmp_path / "b").read_bytes() == data


@pytest.mark.parametrize("call", ["copy_file_range", "write"], ids=["kernel", "small-file"])
def test_a_real_copy_error_is_not_swallowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            call: str) -> None:
    """``write``: a small file's one write (the fixture keeps that path for "small" ids)."""
    def full(*args: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, call, full)
    (tmp_path / "a").write_bytes(b"abc")
    with pytest.raises(OSError, match="No space left"):
        _copy(tmp_path / "a", tmp_path / "b")


def test_source_shorter_than_its_range_is_a_read_error(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 100)
    with open(tmp_path / "a", "rb", buffering=0) as src, open(tmp_path / "b", "wb") as dst, \
            pytest.raises(SourceReadError, match="ended before its listed size"):
        localcopy.copy_span(src.fileno(), dst.fileno(), 0, 200, bytearray(64), Digest(),
                            source="a")


def test_fifo_source_never_reaches_copy_file_range(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: Any) -> int:
        raise AssertionError("copy_file_range on a FIFO")

    monkeypatch.setattr(os, "copy_file_range", forbidden)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    pid = os.fork()
    if pid == 0:  # the writer end, in a child: the parent reads through write_staged
        with open(fifo, "wb") as w:
            w.write(b"through a pipe")
        os._exit(0)
    with open(fifo, "rb", buffering=0) as raw:
        reader = SourceReader(raw, str(fifo))
        assert reader.regular_fd() is None
        staged = write_staged(reader, str(tmp_path / "out"), {}, bytearray(MIB), "digest")
    os.waitpid(pid, 0)
    assert (tmp_path / "out").read_bytes() == b"through a pipe"
    assert staged.checksum == digest_of_bytes(b"through a pipe")


def test_write_staged_takes_the_kernel_path_for_a_regular_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = os.copy_file_range

    def spy(*args: Any) -> int:
        calls.append(args[2])
        return real(*args)

    monkeypatch.setattr(os, "copy_file_range", spy)
    content = sparse_file(tmp_path / "a", 32 * MIB, {5 * MIB: os.urandom(100_000)})
    with open(tmp_path / "a", "rb", buffering=0) as raw:
        reader = SourceReader(raw, str(tmp_path / "a"))
        staged = write_staged(reader, str(tmp_path / "out"), {}, bytearray(8 * MIB), "digest")
    assert calls and reader.count == 32 * MIB
    assert staged.size == 32 * MIB and staged.checksum == digest_of_bytes(content)
    assert (tmp_path / "out").read_bytes() == content


def test_verify_rereads_the_kernel_copy_and_catches_a_bad_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The digest comes from the source, not from the copy: a copy the kernel got wrong
    (simulated: one byte flipped after it) fails the verify and leaves no staged file."""
    real = os.copy_file_range

    def corrupting(src: int, dst: int, count: int, offset_src: int, offset_dst: int) -> int:
        n = real(src, dst, count, offset_src, offset_dst)
        os.pwrite(dst, b"\xff", offset_dst)
        return n

    monkeypatch.setattr(os, "copy_file_range", corrupting)
    (tmp_path / "a").write_bytes(b"\0" * (3 * MIB))
    with open(tmp_path / "a", "rb", buffering=0) as raw, \
            pytest.raises(IntegrityError, match="digest differs"):
        write_staged(SourceReader(raw, str(tmp_path / "a")), str(tmp_path / "out"), {},
                     bytearray(MIB), "digest")
    assert not (tmp_path / "out").exists()


def test_source_shrinking_during_the_copy_is_a_read_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.copy_file_range

    def shrinking(src: int, dst: int, count: int, offset_src: int, offset_dst: int) -> int:
        n = real(src, dst, count, offset_src, offset_dst)
        os.truncate(tmp_path / "a", MIB)  # another writer cuts the file after the first chunk
        return n

    monkeypatch.setattr(os, "copy_file_range", shrinking)
    (tmp_path / "a").write_bytes(os.urandom(4 * MIB))
    with pytest.raises(SourceReadError, match="source"):
        _copy(tmp_path / "a", tmp_path / "b")


def _spied(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.copy_file_range

    def spy(*args: Any) -> int:
        calls.append(args[2])
        return real(*args)

    monkeypatch.setattr(os, "copy_file_range", spy)
    return calls


@pytest.mark.parametrize("size", [0, 1, 4096, localcopy.SMALL])
def test_a_small_file_is_one_read_and_one_write_hashed(tmp_path: Path, size: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _spied(monkeypatch)
    data = os.urandom(size)
    (tmp_path / "a").write_bytes(data)
    digest = _copy(tmp_path / "a", tmp_path / "b", buffer_size=2 * MIB)
    assert (tmp_path / "b").read_bytes() == data
    assert digest.size == size and digest.hexdigest() == digest_of_bytes(data)
    assert calls == []


def test_past_small_or_the_buffer_or_sparse_the_kernel_copies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _spied(monkeypatch)
    big = os.urandom(localcopy.SMALL + 1)
    (tmp_path / "big").write_bytes(big)
    assert _copy(tmp_path / "big", tmp_path / "b1").hexdigest() == digest_of_bytes(big)
    assert sum(calls) == len(big)
    (tmp_path / "mid").write_bytes(big[:5000])
    assert _copy(tmp_path / "mid", tmp_path / "b2", buffer_size=4096).size == 5000
    assert sum(calls) == len(big) + 5000
    content = sparse_file(tmp_path / "holes", 512 * 1024, {4096: b"x" * 100})
    assert _copy(tmp_path / "holes", tmp_path / "b3").hexdigest() == digest_of_bytes(content)
    assert sum(calls) > len(big) + 5000
    assert (tmp_path / "b1").read_bytes() == big and (tmp_path / "b3").read_bytes() == content
    assert os.stat(tmp_path / "b3").st_blocks * 512 < 512 * 1024  # holes stay holes



@pytest.mark.parametrize("method", localcopy.METHODS)
@pytest.mark.parametrize("kind", ["dense", "sparse", "empty"])
def test_the_copy_read_back_as_it_is_written_hashes_as_its_source(
        tmp_path: Path, method: str, kind: str) -> None:
    """``check``: every method's copy, holes and an empty file too, read back into the
    digest the verify compares with the source's."""
    src = tmp_path / "a"
    if kind == "dense":
        content = os.urandom(5 * MIB + 123)
        src.write_bytes(content)
    elif kind == "sparse":
        content = sparse_file(src, 9 * MIB, {0: b"head", 3 * MIB: b"x" * 100})
    else:
        content = b""
        src.write_bytes(content)
    check = Digest()
    digest = _copy(src, tmp_path / "b", buffer_size=2 * MIB + 5, method=method, check=check)
    assert (tmp_path / "b").read_bytes() == content
    assert check.hexdigest() == digest.hexdigest() == digest_of_bytes(content)
    assert check.size == len(content)


def test_each_piece_is_read_back_right_after_it_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop of a page-cache filesystem reads each piece of the copy back before it
    writes the next (while the core's cache holds it), never the whole copy after."""
    monkeypatch.setattr(localcopy, "first_method", lambda dst: "readwrite")
    events: list[tuple[str, int, int]] = []
    real_pwrite, real_preadv = os.pwrite, os.preadv
    out = tmp_path / "b"

    def is_copy(fd: int) -> bool:
        return os.readlink(f"/proc/self/fd/{fd}") == str(out)

    def pwrite(fd: int, data: Any, offset: int) -> int:
        n = real_pwrite(fd, data, offset)
        events.append(("write", offset, n))
        return n

    def preadv(fd: int, buffers: Any, offset: int) -> int:
        n = real_preadv(fd, buffers, offset)
        if is_copy(fd):
            events.append(("read back", offset, n))
        return n

    monkeypatch.setattr(os, "pwrite", pwrite)
    monkeypatch.setattr(os, "preadv", preadv)
    data = os.urandom(3 * localcopy.PIECE + 5)
    (tmp_path / "a").write_bytes(data)
    check = Digest()
    _copy(tmp_path / "a", out, buffer_size=8 * MIB, check=check)
    pieces = [(0, localcopy.PIECE), (localcopy.PIECE, localcopy.PIECE),
              (2 * localcopy.PIECE, localcopy.PIECE), (3 * localcopy.PIECE, 5)]
    assert events == [(kind, at, n) for at, n in pieces for kind in ("write", "read back")]
    assert check.hexdigest() == digest_of_bytes(data)


@pytest.mark.parametrize("method", localcopy.METHODS)
def test_a_piece_written_wrong_fails_the_verify_of_every_method(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    """Whatever moved the bytes, a copy that differs from what was read (one byte
    flipped after each move) fails the verify, and nothing is left staged."""
    real = {"copy_file_range": os.copy_file_range, "sendfile": os.sendfile,
            "pwrite": os.pwrite}
    name = {"readwrite": "pwrite"}.get(method, method)

    def flipping(*args: Any) -> int:
        n = real[name](*args)
        dst = args[0] if name != "copy_file_range" else args[1]
        at = args[2] if name == "pwrite" else (args[4] if name == "copy_file_range"
                                                 else os.lseek(dst, 0, os.SEEK_CUR) - n)
        real["pwrite"](dst, b"\xff", at)
        return n

    monkeypatch.setattr(os, name, flipping)
    monkeypatch.setattr(localcopy, "first_method", lambda dst: method)
    _staging_fails_its_verify(tmp_path, b"\0" * (3 * MIB))


def _staging_fails_its_verify(tmp_path: Path, content: bytes) -> None:
    """``content`` staged from a file fails the digest's verify; nothing is left."""
    (tmp_path / "a").write_bytes(content)
    out = tmp_path / "out"
    with open(tmp_path / "a", "rb", buffering=0) as raw, \
            pytest.raises(IntegrityError, match="digest differs"):
        write_staged(SourceReader(raw, str(tmp_path / "a")), str(out), {}, bytearray(MIB),
                     "digest")
    assert not out.exists() and _open_fds_to(out) == []


def test_a_verified_copy_is_not_read_again_after_it_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The digest read back while copying is the verify's: no second read of the copy
    (the read that cost A's copy phase a sixth, benchmarks/RESULTS.md 2026-12-03)."""
    def no_second_read(*args: Any, **kw: Any) -> Digest:
        raise AssertionError("the copy was read again")

    monkeypatch.setattr(holes, "digest_of_fd", no_second_read)
    monkeypatch.setattr(holes, "digest_of_file", no_second_read)
    data = os.urandom(3 * MIB + 1)
    (tmp_path / "a").write_bytes(data)
    with open(tmp_path / "a", "rb", buffering=0) as raw:
        staged = write_staged(SourceReader(raw, str(tmp_path / "a")), str(tmp_path / "out"),
                              {}, bytearray(MIB), "digest")
    assert staged.checksum == digest_of_bytes(data)
    assert (tmp_path / "out").read_bytes() == data


@pytest.mark.parametrize("flip", [False, True], ids=["good", "written wrong"])
def test_a_range_is_read_back_as_it_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flip: bool) -> None:
    """A range of a split file from a regular local file: verified by its read-back, not
    by a second read of the range; a range written wrong fails that verify."""
    from distcp.copying.ranges import RangeReader
    from distcp.model import CopyableFile, FileStatus, Split
    from distcp.storage.local import storage as local
    from distcp.storage.staging import RangeAt

    def no_second_read(*args: Any) -> None:
        raise AssertionError("the range was read again")

    monkeypatch.setattr(local, "_verify_range", no_second_read)
    monkeypatch.setattr(localcopy, "first_method", lambda dst: "readwrite")
    if flip:
        real_pwrite = os.pwrite
        monkeypatch.setattr(os, "pwrite", lambda fd, data, at: real_pwrite(
            fd, b"\xff" + bytes(data)[1:], at))
    body = os.urandom(4 * MIB)
    (tmp_path / "big").write_bytes(body)
    storage = local.LocalStorage()
    staged = storage.stage_split(str(tmp_path / "out"), str(tmp_path / "splits"), "data")
    file = CopyableFile(FileStatus(str(tmp_path / "big"), len(body), 1.0),
                        str(tmp_path / "out"), "urn", "all")
    split = Split(1, 2, 2 * MIB, 2 * MIB, staged.text, str(tmp_path / "splits"))
    with open(tmp_path / "big", "rb", buffering=0) as raw:
        raw.seek(split.offset)
        reader = RangeReader(SourceReader(raw, str(tmp_path / "big")), file, split)

        def write() -> Any:
            return storage.write_range(staged, RangeAt(1, 2 * MIB, 2 * MIB), reader,
                                       bytearray(MIB), "digest", str(tmp_path / "splits"),
                                       "a0")
        if flip:
            with pytest.raises(IntegrityError, match="range 1 of .* differs from what was "
                                                     "read after writing it"):
                write()
            return
        written = write()
    want = Digest()
    want.update(body[2 * MIB:])
    assert written.blocks == want.blocks()
    with open(staged.location, "rb") as copy:
        copy.seek(2 * MIB)
        assert copy.read() == body[2 * MIB:]


def _open_fds_to(path: Path) -> list[str]:
    fds = Path("/proc/self/fd")
    found = []
    for fd in fds.iterdir():
        try:
            if os.readlink(fd) == str(path):
                found.append(fd.name)
        except OSError:
            continue
    return found


@pytest.mark.parametrize("size", [64, 3 * MIB], ids=["small", "kernel"])
def test_the_verify_reads_the_copy_back_through_the_descriptor_that_wrote_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """One open of the staged copy (read and write), none to verify it; closed after."""
    opened: list[tuple[str, int]] = []
    real_open = os.open

    def spy(path: Any, flags: int, *args: Any, **kw: Any) -> int:
        opened.append((str(path), flags))
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", spy)
    data = os.urandom(size)
    (tmp_path / "a").write_bytes(data)
    out = tmp_path / "out"
    with open(tmp_path / "a", "rb", buffering=0) as raw:
        staged = write_staged(SourceReader(raw, str(tmp_path / "a")), str(out), {},
                              bytearray(MIB), "digest")
    assert staged.checksum == digest_of_bytes(data) and out.read_bytes() == data
    flags = [f for p, f in opened if p == str(out)]
    assert len(flags) == 1 and flags[0] & os.O_ACCMODE == os.O_RDWR
    assert _open_fds_to(out) == []


def test_a_small_copy_written_wrong_fails_the_verify_and_leaves_nothing_open(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write

    def flipping(fd: int, data: Any) -> int:
        return real_write(fd, b"\xff" + bytes(data)[1:])

    monkeypatch.setattr(os, "write", flipping)
    _staging_fails_its_verify(tmp_path, b"small file")


def _opened_copies(monkeypatch: pytest.MonkeyPatch, out: Path) -> list[int]:
    """The descriptors ``os.open`` gives for ``out`` from now on."""
    real_open = os.open
    copies: list[int] = []

    def spy_open(path: Any, flags: int, *args: Any, **kw: Any) -> int:
        fd = real_open(path, flags, *args, **kw)
        if str(path) == str(out):
            copies.append(fd)
        return fd

    monkeypatch.setattr(os, "open", spy_open)
    return copies


def test_a_copy_whose_close_fails_is_a_write_error_and_is_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A network filesystem may report a lost write only when the file is closed."""

    def through_the_writer(src: Path, out: Path) -> None:
        with open(src, "rb", buffering=0) as raw:
            write_staged(SourceReader(raw, str(src)), str(out), {}, bytearray(MIB), "digest")

    _a_close_that_fails(tmp_path, monkeypatch, through_the_writer)


def test_a_small_file_whose_close_fails_in_one_call_is_a_write_error_and_is_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _a_close_that_fails(tmp_path, monkeypatch, _stage_small)


def _a_close_that_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                        stage: Callable[[Path, Path], object]) -> None:
    """``stage(src, out)`` of 3 bytes, the copy's close failing: a write error naming
    the staging copy, which is removed."""
    out = tmp_path / "out"
    real_close = os.close
    (tmp_path / "a").write_bytes(b"abc")
    copies = _opened_copies(monkeypatch, out)

    def failing_close(fd: int) -> None:
        real_close(fd)
        if fd in copies:
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "close", failing_close)
    with pytest.raises(DestinationWriteError, match=r"cannot write staging copy .*out.*"
                                                    r"Input/output error"):
        stage(tmp_path / "a", out)
    assert copies and not out.exists()


@pytest.mark.parametrize("size", [64, 3 * MIB], ids=["small", "kernel"])
def test_a_freshly_opened_source_is_copied_from_its_start_and_left_where_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """The plain path hands over the status it took at the open: the copy is the same,
    the source's position is neither asked nor moved, and a small file's status is not
    asked again (the kernel path checks the size it read against the file's)."""
    data = os.urandom(size)
    (tmp_path / "a").write_bytes(data)
    src = os.open(tmp_path / "a", os.O_RDONLY)
    asked: list[str] = []
    real_fstat, real_lseek = os.fstat, os.lseek

    def fstat(fd: int) -> os.stat_result:
        asked.extend(["fstat"] if fd == src else [])
        return real_fstat(fd)

    def lseek(fd: int, *args: int) -> int:
        asked.extend(["lseek"] if fd == src else [])
        return real_lseek(fd, *args)

    try:
        fresh = os.fstat(src)
        monkeypatch.setattr(os, "fstat", fstat)
        monkeypatch.setattr(os, "lseek", lseek)
        fd, digest = localcopy.copy_into(src, str(tmp_path / "out"), bytearray(MIB),
                                         fresh=fresh)
        os.close(fd)
        monkeypatch.undo()
        assert "lseek" not in asked and os.lseek(src, 0, os.SEEK_CUR) == 0
        assert size > MIB or asked == []
    finally:
        os.close(src)
    assert (tmp_path / "out").read_bytes() == data
    assert digest.hexdigest() == digest_of_bytes(data)


def test_mode_and_mtime_are_set_through_the_open_copy_before_its_verify(
        tmp_path: Path) -> None:
    from distcp.storage.local.storage import LocalFileWriter

    data = os.urandom(5000)
    (tmp_path / "a").write_bytes(data)
    out = tmp_path / "out"
    writer = LocalFileWriter(str(out), "digest")
    with open(tmp_path / "a", "rb", buffering=0) as raw:
        digest = writer.copy_file(raw.fileno(), bytearray(MIB), "a")
    assert digest is not None
    mtime = 1_600_000_000_123_456_789
    moved = tmp_path / "moved"
    os.rename(out, moved)  # the descriptor is what it sets, not the path
    assert writer.keep_attributes(0o604, mtime)
    staged = writer.commit(digest, bytearray(MIB))
    st = os.stat(moved)
    assert (st.st_mode & 0o7777, st.st_mtime_ns, staged.size) == (0o604, mtime, 5000)
    assert not writer.keep_attributes(0o644, None)  # committed: closed, nothing to set


def _on_filesystem(monkeypatch: pytest.MonkeyPatch, kind: str) -> dict[str, list[int]]:
    """Every device a ``kind`` filesystem; the sizes of each copy_file_range and pwrite."""
    monkeypatch.setattr(localcopy, "_FIRST", {})
    monkeypatch.setattr(localcopy, "filesystem_type", lambda device: kind)
    calls: dict[str, list[int]] = {"copy_file_range": [], "pwrite": []}
    real_copy, real_pwrite = os.copy_file_range, os.pwrite

    def copy(*args: Any) -> int:
        calls["copy_file_range"].append(args[2])
        return real_copy(*args)

    def pwrite(fd: int, data: Any, offset: int) -> int:
        calls["pwrite"].append(len(data))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "copy_file_range", copy)
    monkeypatch.setattr(os, "pwrite", pwrite)
    return calls


def test_a_page_cache_filesystem_copies_by_the_loop_in_pieces(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ext4: read, hash and write a PIECE at a time (the kernel's copy would read the
    source a second time); holes stay holes."""
    calls = _on_filesystem(monkeypatch, "ext4")
    data = os.urandom(3 * MIB + 5)
    (tmp_path / "a").write_bytes(data)
    digest = _copy(tmp_path / "a", tmp_path / "b", buffer_size=8 * MIB)
    assert (tmp_path / "b").read_bytes() == data
    assert digest.hexdigest() == digest_of_bytes(data) and digest.size == len(data)
    assert calls["copy_file_range"] == []
    assert max(calls["pwrite"]) == localcopy.PIECE and sum(calls["pwrite"]) == len(data)
    content = sparse_file(tmp_path / "holes", 16 * MIB, {3 * MIB: b"x" * 100})
    assert _copy(tmp_path / "holes", tmp_path / "c").hexdigest() == digest_of_bytes(content)
    assert (tmp_path / "c").read_bytes() == content
    assert os.stat(tmp_path / "c").st_blocks * 512 <= MIB


def test_the_loop_reserves_each_big_data_segment_before_writing_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A data segment of RESERVE bytes or more has its blocks before its first write,
    the copy's size untouched by that; a smaller one and the holes are not reserved."""
    probe = os.open(tmp_path / "probe", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if not localcopy.reserve(probe, 0, MIB):
            pytest.skip("this filesystem reserves nothing")
    finally:
        os.close(probe)
    monkeypatch.setattr(localcopy, "first_method", lambda dst: "readwrite")
    content = sparse_file(tmp_path / "a", 16 * MIB,
                          {2 * MIB: os.urandom(3 * MIB), 10 * MIB: b"x" * 100})
    if os.stat(tmp_path / "a").st_blocks * 512 >= 16 * MIB:
        pytest.skip("this filesystem does not keep holes")
    seen: list[tuple[int, int, int]] = []
    real_pwrite = os.pwrite

    def pwrite(fd: int, data: Any, offset: int) -> int:
        st = os.fstat(fd)
        seen.append((offset, st.st_size, st.st_blocks * 512))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)
    digest = _copy(tmp_path / "a", tmp_path / "b", buffer_size=8 * MIB)
    assert (tmp_path / "b").read_bytes() == content
    assert digest.hexdigest() == digest_of_bytes(content)
    assert seen[0] == (2 * MIB, 0, 3 * MIB)  # reserved, the size kept
    assert os.stat(tmp_path / "b").st_blocks * 512 <= 3 * MIB + 64 * 1024


def test_a_reservation_that_cannot_be_made_is_no_error(tmp_path: Path) -> None:
    r, w = os.pipe()
    try:
        assert localcopy.reserve(w, 0, MIB) is False
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.parametrize("kind", ["xfs", "btrfs", "nfs4", None])
def test_a_cloning_or_remote_or_unknown_filesystem_keeps_the_kernel_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str | None) -> None:
    calls = _on_filesystem(monkeypatch, kind)  # type: ignore[arg-type]
    data = os.urandom(3 * MIB)
    (tmp_path / "a").write_bytes(data)
    assert _copy(tmp_path / "a", tmp_path / "b").hexdigest() == digest_of_bytes(data)
    assert (tmp_path / "b").read_bytes() == data
    assert sum(calls["copy_file_range"]) == len(data) and calls["pwrite"] == []


def test_the_filesystem_type_comes_from_the_mount_table(tmp_path: Path) -> None:
    table = tmp_path / "mountinfo"
    table.write_text(
        "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
        "27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
        "31 27 0:45 / /data rw master:2 - xfs /dev/sdb1 rw,attr2\n"
        "40 27 7:3 / /odd rw - \n")
    assert localcopy.filesystem_type(os.makedev(254, 0), str(table)) == "ext4"
    assert localcopy.filesystem_type(os.makedev(0, 45), str(table)) == "xfs"
    assert localcopy.filesystem_type(os.makedev(7, 3), str(table)) is None
    assert localcopy.filesystem_type(os.makedev(8, 1), str(table)) is None
    assert localcopy.filesystem_type(os.makedev(254, 0), str(tmp_path / "none")) is None


@pytest.mark.skipif(not Path("/proc/self/mountinfo").exists(), reason="Linux mount table")
def test_this_machines_mount_table_names_the_proc_filesystem() -> None:
    assert localcopy.filesystem_type(os.stat("/proc").st_dev) == "proc"


def test_a_stream_is_staged_through_one_descriptor_that_sets_and_verifies_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream's bytes (an object's GET) go to a staging file opened once, read and
    write, whose verify (and, asked before the commit, mode and mtime) go through that
    descriptor: the path is never opened again, and a short write is finished."""
    import io

    from distcp.storage.local.storage import LocalFileWriter

    opened: list[int] = []
    real_open, real_write = os.open, os.write

    def spy(path: Any, flags: int, *args: Any, **kw: Any) -> int:
        if str(path) == str(out):
            opened.append(flags)
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", spy)
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data)[:3]))
    data = os.urandom(5000)
    out, moved = tmp_path / "out", tmp_path / "moved"
    writer = LocalFileWriter(str(out), "digest")
    digest = Digest()
    digest.update(data)
    for at in range(0, len(data), 1024):
        writer.write(memoryview(data)[at:at + 1024])
    os.rename(out, moved)  # the descriptor is what it sets and reads back, not the path
    mtime = 1_600_000_000_123_456_789
    assert writer.keep_attributes(0o604, mtime)
    staged = writer.commit(digest, bytearray(MIB))
    st = os.stat(moved)
    assert (st.st_mode & 0o7777, st.st_mtime_ns) == (0o604, mtime)
    assert (staged.size, staged.checksum, moved.read_bytes()) == (5000, digest.hexdigest(), data)
    assert len(opened) == 1 and opened[0] & os.O_ACCMODE == os.O_RDWR
    assert _open_fds_to(moved) == []
    empty = tmp_path / "empty"
    assert write_staged(io.BytesIO(b""), str(empty), {}, bytearray(MIB), "digest").size == 0
    assert empty.read_bytes() == b""


def test_a_stream_staged_wrong_fails_the_verify_and_leaves_nothing_open(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, b"\xff" + bytes(data)[1:]))
    out = tmp_path / "out"
    with pytest.raises(IntegrityError, match="digest differs"):
        write_staged(io.BytesIO(b"an object's bytes"), str(out), {}, bytearray(MIB), "digest")
    assert not out.exists() and _open_fds_to(out) == []


# -- a small file staged by one call (LocalStorage.stage_small_file) -------------------

def _stage_small(src: Path, out: Path, buffer_size: int = MIB, verify: str = "digest",
                 mode: int | None = 0o640, mtime: float | None = 1_600_000_000_123_456_789
                 ) -> tuple[int, str] | None:
    from distcp.storage.buffers import ReadBuffer
    from distcp.storage.local.storage import LocalStorage

    fd = os.open(src, os.O_RDONLY)
    try:
        return LocalStorage().stage_small_file(
            fd, os.fstat(fd), str(out), mode=mode, mtime=mtime, verify=verify,
            buffer=ReadBuffer(buffer_size), source=str(src))
    finally:
        os.close(fd)


def test_a_small_file_staged_in_one_call_is_the_writer_s_copy(tmp_path: Path) -> None:
    """Bytes, digest, mode and mtime as the writer stages them, nothing left open."""
    data = os.urandom(5000)
    (tmp_path / "a").write_bytes(data)
    out = tmp_path / "out"
    assert _stage_small(tmp_path / "a", out) == (5000, digest_of_bytes(data))
    st = out.stat()
    assert out.read_bytes() == data
    assert (st.st_mode & 0o7777, st.st_mtime_ns) == (0o640, 1_600_000_000_123_456_789)
    assert _open_fds_to(out) == []
    via_writer = tmp_path / "via-writer"
    with open(tmp_path / "a", "rb", buffering=0) as raw:
        staged = write_staged(SourceReader(raw, str(tmp_path / "a")), str(via_writer), {},
                              bytearray(MIB), "digest")
    assert (staged.size, staged.checksum) == (5000, digest_of_bytes(data))


@pytest.mark.parametrize("kind", ["empty", "bigger than the buffer", "sparse", "past SMALL"])
def test_a_file_that_is_not_small_and_dense_is_left_to_the_writer(tmp_path: Path,
                                                                   kind: str) -> None:
    src, buffer_size = tmp_path / "a", MIB
    if kind == "empty":
        src.write_bytes(b"")
    elif kind == "bigger than the buffer":
        src.write_bytes(os.urandom(100_000))
        buffer_size = 64 << 10
    elif kind == "sparse":
        sparse_file(src, 512 << 10, {0: b"x"})
    else:
        src.write_bytes(os.urandom(localcopy.SMALL + 1))
        buffer_size = 2 * localcopy.SMALL
    assert _stage_small(src, tmp_path / "out", buffer_size) is None
    assert not (tmp_path / "out").exists()


def test_a_small_file_staged_wrong_in_one_call_fails_the_verify_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, b"\xff" + bytes(data)[1:]))
    (tmp_path / "a").write_bytes(b"small file")
    out = tmp_path / "out"
    with pytest.raises(IntegrityError, match=rf"digest differs: read xxh3c128-1m:\w+ but "
                                             rf"staged xxh3c128-1m:\w+ \({out}\)"):
        _stage_small(tmp_path / "a", out)
    assert not out.exists() and _open_fds_to(out) == []


def test_a_small_file_staged_short_in_one_call_fails_the_size_check_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The staged copy's size is checked before its bytes (a short write the filesystem
    reported as done, simulated: its status says 3 bytes)."""
    out = tmp_path / "out"
    real_fstat = os.fstat
    copies = _opened_copies(monkeypatch, out)

    def short_fstat(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        return os.stat_result((*st[:6], 3, *st[7:])) if fd in copies else st

    monkeypatch.setattr(os, "fstat", short_fstat)
    (tmp_path / "a").write_bytes(b"small file")
    with pytest.raises(IntegrityError,
                       match=rf"size differs: read 10 bytes but staged 3 \({out}\)"):
        _stage_small(tmp_path / "a", out)
    assert copies and not out.exists()


def test_a_small_file_s_unreadable_source_is_a_read_error_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").write_bytes(b"abc")

    def failing(*args: Any) -> int:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "preadv", failing)
    with pytest.raises(SourceReadError, match=rf"cannot read {tmp_path / 'a'}: .*Input/output"):
        _stage_small(tmp_path / "a", tmp_path / "out")
    assert not (tmp_path / "out").exists()
