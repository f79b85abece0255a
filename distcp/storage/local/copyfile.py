"""Local disk: copy a local file to a local path, hashed, holes kept (executor).

Between two local paths the kernel can move the bytes itself (``copy_file_range``,
else ``sendfile``). The digest must still come from bytes read from the *source*, so
each chunk the kernel copied is read back from the source and hashed; ``--verify
digest`` re-reads the staged copy. Where the filesystem clones (xfs, btrfs) or its
server copies (nfs, cifs), the kernel's copy moves no bytes and is the way. Where it
is a copy through the page cache (ext4, tmpfs: ``PAGE_CACHE_COPIES``), the digest's
read of the source is better spent as the copy's read too: a piece of PIECE bytes is
read, hashed while it is in the core's cache, and written. 8 × 256 MiB on ext4, two
at a time (2026-11-27): 0.48 s that way, 0.59 s kernel copy and read back, ``cp -a``
0.53 s; the verify's read is in both. Again on Linux 6.18 (2026-12-03, by hand): the
loop 0.63 s, the kernel copy with the source read back 0.80 s, ``cp -a`` 0.65 s.

``--verify digest`` reads the copy back piece by piece as it is written (``check``):
each piece comes back from the page cache while the core's cache still holds it, where
a read of the whole copy afterwards comes from memory. The same bytes are read through
the same descriptor and compared with the source's digest the same way; A's copy phase
took 0.49 s that way against 0.61 s (benchmarks/RESULTS.md, 2026-12-03 evening).

Before the loop writes a data segment of at least RESERVE bytes, the segment's span of
the copy is reserved (``fallocate``, the size kept): ext4 then allocates its blocks
once, where each write would allocate its own. A's loop by hand (2026-12-04, two
processes, 1 GiB each): 0.443 s -> 0.418 s, ``cp -a`` of the 2 GiB 0.569 s. Only the
loop reserves: where the kernel copies, a clone or a server's copy would be defeated.

A sparse source is copied data segment by data segment (``distcp.storage.local.holes``), so the
copy is sparse too; holes hash as zeros without being read, and the digest is that
of the full logical content, the same whatever path copied the bytes.

Each way of moving bytes steps down to the next where the kernel or filesystem
refuses it (EXDEV on old kernels, EINVAL/ENOSYS/EOPNOTSUPP, or a premature 0):
``copy_file_range`` -> ``sendfile`` -> ``pread``/``pwrite``.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from typing import Any

from distcp.checksum import Digest
from distcp.errors import SourceReadError
from distcp.storage.buffers import aligned
from distcp.storage.local.holes import HASH_CHUNK, hash_zeros, segments

#: Ways to move bytes, best first; ``copy_span(method=...)`` starts lower (tests, tuning).
METHODS = ("copy_file_range", "sendfile", "readwrite")

#: Bytes the read-write loop reads, hashes and writes at a time: a piece that stays in
#: the core's cache from its read through its hash to its write. 8 × 256 MiB on ext4,
#: two at a time, 2 MiB of L2 cache a core (2026-11-27): 0.48 s in 256 KiB pieces, 0.50
#: in 128 KiB, 0.59-0.86 in 512 KiB, 1.2-1.5 s in 1 MiB (the earlier 8 MiB: 3.5 s).
PIECE = 256 << 10

#: Filesystems whose ``copy_file_range`` copies through the page cache (it neither clones
#: nor asks a server): there the read-write loop copies (module docstring). Elsewhere,
#: and where the type is unknown, the kernel does.
PAGE_CACHE_COPIES = frozenset({"ext2", "ext3", "ext4", "tmpfs", "ramfs"})

#: Data segments from this size on have their span reserved first (module docstring).
RESERVE = 1 << 20

#: ``fallocate``'s flag that leaves the file's size alone (a range of a split file
#: reserves its own span; the writes set the size).
FALLOC_FL_KEEP_SIZE = 1

#: Dense files up to this size are read once and written (``_copy_small``).
SMALL = HASH_CHUNK

#: errno values meaning "this way of copying is not available here", not "the copy failed".
UNSUPPORTED = frozenset({errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP,
                         errno.EBADF, errno.ETXTBSY})


def regular_fd(raw: Any) -> int | None:
    """The descriptor behind ``raw`` when it is an open regular local file, else None.

    FIFOs, devices and sockets have no offsets to copy from: they keep the plain loop.
    """
    fileno = getattr(raw, "fileno", None)
    if fileno is None:
        return None
    try:
        fd = fileno()
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return None


def copy_into(src: int, path: str, buffer: bytearray, *, source: str = "",
              method: str | None = None, fresh: os.stat_result | None = None,
              check: Digest | None = None) -> tuple[int, Digest]:
    """Copy what is left of ``src`` (from its position) to a new file at ``path``, left
    open for reading and writing: its verify reads it back through that descriptor (a
    second open, stat and close of each small file of a million cost a tenth of its
    copy). Returns the descriptor, which the caller closes (on failure it is closed),
    and the digest of the bytes read from the source. The copy has the source's holes;
    ``src`` is left at its end, as a read loop would leave it.

    ``fresh``: ``src``'s status, given by a caller that has just opened it and reads
    it no further: the copy starts at 0 and leaves the position alone (two system
    calls of the dozen a small file costs). ``method``: the first way to try (default:
    ``first_method``, and a small dense file's one read and one write). ``check``:
    where the copy, read back as it is written, is hashed (``copy_span``)."""
    start, st = (0, fresh) if fresh is not None else (os.lseek(src, 0, os.SEEK_CUR),
                                                       os.fstat(src))
    end = st.st_size
    digest = Digest()
    dst = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        view = aligned(buffer)
        if method is None and small_dense(end - start, st, view):
            _copy_small(src, dst, start, end - start, view, digest, source, check)
        else:
            copy_span(src, dst, start, max(0, end - start), buffer, digest, source=source,
                      method=method, dst_offset=0, check=check)
            os.ftruncate(dst, digest.size)  # a trailing hole is a size, not written bytes
        if fresh is None:
            os.lseek(src, start + digest.size, os.SEEK_SET)
    except BaseException:
        os.close(dst)
        raise
    return dst, digest


def _copy_small(src: int, dst: int, start: int, length: int, view: memoryview,
                digest: Digest, source: str, check: Digest | None) -> None:
    """A small dense file in one read and one write: the kernel's copy and the read
    back for the digest would be two calls as well, and cost more Python per file. A
    source that ends early copies what it had: the caller compares sizes."""
    chunk = read_small(src, start, length, view, source)
    digest.update(chunk)
    write_all(dst, chunk)
    if check is not None:
        read_back(dst, 0, len(chunk), view, check)


def small_dense(length: int, st: os.stat_result, view: memoryview) -> bool:
    """Whether ``length`` bytes of a file of status ``st`` are read into ``view`` by one
    call and written by one: within SMALL and the buffer, and the file has no holes."""
    return length <= min(SMALL, len(view)) and st.st_blocks * 512 >= st.st_size


def read_small(src: int, start: int, length: int, view: memoryview, source: str
               ) -> memoryview:
    """``length`` bytes of ``src`` from ``start``, read into ``view`` (fewer where the
    source ended early); an error is a SourceReadError naming ``source``."""
    got = 0
    try:
        while got < length:
            n = os.preadv(src, [view[got:length]], start + got)
            if not n:
                break
            got += n
    except OSError as exc:
        raise SourceReadError(f"cannot read {source}: {exc}", path=source) from exc
    return view[:got]


def write_all(dst: int, chunk: memoryview) -> None:
    written = 0
    while written < len(chunk):
        written += os.write(dst, chunk[written:])


def read_back(dst: int, at: int, count: int, view: memoryview, check: Digest) -> None:
    """Hash into ``check`` the ``count`` bytes of ``dst`` at ``at``, just written, read
    back through ``view`` (fewer where the copy is shorter: the digests then differ)."""
    end = at + count
    while at < end:
        n = os.preadv(dst, [view[:min(len(view), HASH_CHUNK, end - at)]], at)
        if not n:
            return
        check.update(view[:n])
        at += n


def copy_span(src: int, dst: int, offset: int, length: int, buffer: bytearray,
              digest: Digest, *, source: str = "", method: str | None = None,
              dst_offset: int | None = None, check: Digest | None = None) -> None:
    """Copy ``length`` bytes of ``src`` at ``offset`` to ``dst`` at ``dst_offset``
    (default: the same offset), hashing the source's logical bytes into ``digest``.

    Holes of the source are skipped in ``dst`` (the caller sets its size). A source
    that ends early is a SourceReadError. ``check`` (``dst`` open for reading too):
    each piece is read back from ``dst`` right after it is written and hashed into it,
    a hole as the zeros it reads as (module docstring): the verify's digest.
    """
    if os.fstat(src).st_size < offset + length:  # holes past the end would hash as zeros
        raise SourceReadError(f"source ended before its listed size: {source}", path=source)
    shift = (offset if dst_offset is None else dst_offset) - offset
    mover = _Mover(src, dst, shift, aligned(buffer), digest, source,
                   method or first_method(dst), check)
    for start, stop, data in segments(src, offset, offset + length):
        if data:
            mover.data(start, stop)
        else:
            hash_zeros(digest, stop - start)
            if check is not None:
                hash_zeros(check, stop - start)


_FIRST: dict[int, str] = {}


def first_method(dst: int) -> str:
    """The way to move bytes into ``dst`` first, decided once per filesystem (device):
    the read-write loop where the kernel's copy would go through the page cache
    (``PAGE_CACHE_COPIES``), else the kernel's copy."""
    device = os.fstat(dst).st_dev
    method = _FIRST.get(device)
    if method is None:
        method = _FIRST[device] = (METHODS[2] if filesystem_type(device) in PAGE_CACHE_COPIES
                                   else METHODS[0])
    return method


def filesystem_type(device: int, table: str = "/proc/self/mountinfo") -> str | None:
    """The type of the filesystem mounted from ``device`` in the mount table ``table``
    (Linux's ``mountinfo``: the third field is ``major:minor``, the type follows
    `` - ``); None where there is no such table or no such line."""
    wanted = f"{os.major(device)}:{os.minor(device)}"
    try:
        with open(table, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                fields, _, rest = line.partition(" - ")
                if fields.split()[2:3] == [wanted]:
                    kind = rest.split()
                    return kind[0] if kind else None
    except OSError:
        return None
    return None


def reserve(fd: int, offset: int, length: int) -> bool:
    """Reserve ``length`` bytes of ``fd`` at ``offset`` on disk, its size unchanged;
    False where that cannot be done (no such call, a filesystem without it, no room:
    the writes then allocate, or fail, as they would have). The system call itself,
    not ``posix_fallocate``, which emulates it by writing where it is missing."""
    call = _fallocate()
    return call is not None and call(fd, FALLOC_FL_KEEP_SIZE, offset, length) == 0


@functools.cache
def _fallocate() -> Any:
    """libc's ``fallocate``, typed for 64-bit offsets; None where there is none."""
    try:
        import ctypes

        call = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    call.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    return call


def extend_to(fd: int, end: int) -> None:
    """Make ``fd`` at least ``end`` bytes long without ever shrinking it.

    Ranges of a split file share one staging file: ``ftruncate`` by one range could cut
    another's bytes, so a range ending in a hole writes its own last byte (a zero).
    """
    if end > 0 and os.fstat(fd).st_size < end:
        os.pwrite(fd, b"\0", end - 1)


class _Mover:
    """Moves data segments chunk by chunk with the best method that works here."""

    def __init__(self, src: int, dst: int, shift: int, view: memoryview, digest: Digest,
                 source: str, method: str, check: Digest | None = None) -> None:
        self.src, self.dst, self.shift, self.view = src, dst, shift, view
        self.digest, self.source, self.check = digest, source, check
        self.method = METHODS.index(method)

    def data(self, pos: int, stop: int) -> None:
        if self.method == 2 and stop - pos >= RESERVE:
            reserve(self.dst, pos + self.shift, stop - pos)
        while pos < stop:
            want = min(len(self.view), stop - pos)
            if self.method < 2:
                moved = self._kernel(pos, want)
                if not moved:
                    continue  # that method stepped down: the next one tries the same place
                self._hash_source(pos, moved)
            else:
                moved = self._read_write(pos, min(want, PIECE))
            if self.check is not None:
                read_back(self.dst, pos + self.shift, moved, self.view, self.check)
            pos += moved

    def _kernel(self, pos: int, want: int) -> int:
        """Bytes the kernel moved at ``pos`` (up to ``want``); 0: step down a method."""
        done = 0
        while done < want:
            try:
                n = self._kernel_once(pos + done, want - done)
            except OSError as exc:
                if exc.errno not in UNSUPPORTED:
                    raise
                n = 0
            if not n:  # unsupported, or a filesystem that returns 0 early: step down
                self.method += 1
                return done
            done += n
        return done

    def _kernel_once(self, pos: int, count: int) -> int:
        if self.method == 0:
            return os.copy_file_range(self.src, self.dst, count, pos, pos + self.shift)
        os.lseek(self.dst, pos + self.shift, os.SEEK_SET)
        return os.sendfile(self.dst, self.src, pos, count)

    def _hash_source(self, pos: int, count: int) -> None:
        """Read back from the source what the kernel just copied, and hash it."""
        for at in range(pos, pos + count, HASH_CHUNK):
            take = min(HASH_CHUNK, pos + count - at)
            if self._pread(at, take) != take:
                raise SourceReadError(f"source changed while copying: {self.source} shrank",
                                      path=self.source)
            self.digest.update(self.view[:take])

    def _read_write(self, pos: int, want: int) -> int:
        n = self._pread(pos, want)
        if not n:
            raise SourceReadError(f"source ended before its listed size: {self.source}",
                                  path=self.source)
        chunk = self.view[:n]
        self.digest.update(chunk)
        written = 0
        while written < n:
            written += os.pwrite(self.dst, chunk[written:], pos + self.shift + written)
        return n

    def _pread(self, pos: int, count: int) -> int:
        try:
            got = 0
            while got < count:
                n = os.preadv(self.src, [self.view[got:count]], pos + got)
                if not n:
                    break
                got += n
            return got
        except OSError as exc:
            raise SourceReadError(f"cannot read {self.source}: {exc}", path=self.source) from exc
