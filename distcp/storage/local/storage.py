"""Local disk: os calls, ranges at their offsets, ``os.replace`` (driver and executor)."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Callable, Iterable, Sequence
from typing import BinaryIO

from distcp.checksum import Digest, block_digest, compose
from distcp.chown import ids
from distcp.errors import DestinationWriteError, IntegrityError
from distcp.model import FileStatus
from distcp.storage import filesystems as fsutil
from distcp.storage import treelisting as tl
from distcp.storage.base import Capabilities, Storage, Tree
from distcp.storage.buffers import aligned
from distcp.storage.files import (
    FileWriter,
    digest_differs,
    size_differs,
    unverified,
    unwritten,
)
from distcp.storage.filesystems import os_path
from distcp.storage.folders import FolderMove, folders_of, publish_folders
from distcp.storage.local import copyfile as localcopy
from distcp.storage.local import holes
from distcp.storage.staged import Staged
from distcp.storage.staging import (
    Parts,
    RangeAt,
    RangeSource,
    StagedFile,
    StagedStream,
    StageWriter,
    WrittenRange,
)


class LocalFileWriter(FileWriter):
    """A staging file written with ``os`` calls; a regular local source file is copied
    by the kernel (``localcopy``: holes kept), and a digest check reads only the
    copy's data segments (holes hash as zeros, unread)."""

    copies_files = True

    def __init__(self, url: str, verify: str) -> None:
        super().__init__(None, os_path(url), url, verify)
        #: The kernel's copy, still open: the verify reads it back through it.
        self._copy: int | None = None
        #: Its status, taken once for the size check and the digest's read.
        self._copy_st: os.stat_result | None = None
        #: The kernel's copy read back as it was written (``--verify digest``).
        self._check: Digest | None = None

    def _open(self) -> BinaryIO:
        return open(self.path, "wb", buffering=0)

    def write(self, chunk: memoryview) -> None:
        """A stream's bytes (an object's GET, a converter's output) into the staging
        file, kept open as a kernel copy's is: the verify's size and read go through
        the one descriptor, without opening the path again (``keep_attributes`` can set
        mode and mtime through it too, before the commit). With
        ``copying.task.unit_buffer_size``, the workers' CPU of a warm download of 20,000
        objects of 64 B fell from 12.5-13.5 s to 8.4-11.2 s (2026-11-30)."""
        if self._copy is None:
            self._copied = True  # the file exists from here on: abort removes it
            self._copy = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC
                                 | os.O_CLOEXEC, 0o666)
        while chunk:
            chunk = chunk[os.write(self._copy, chunk):]

    def copy_file(self, fd: int, buffer: bytearray, source: str,
                  fresh: os.stat_result | None = None) -> Digest | None:
        self._copied = True  # the file exists from here on: abort removes it
        self._check = Digest() if self.verify == "digest" else None
        self._copy, digest = localcopy.copy_into(fd, self.path, buffer, source=source,
                                                 fresh=fresh, check=self._check)
        return digest

    def commit(self, digest: Digest, buffer: bytearray) -> StagedStream:
        try:
            staged = super().commit(digest, buffer)
        except BaseException:
            self._close_copy(quietly=True)
            raise
        try:
            self._close_copy()  # a network filesystem may report a failed write only here
        except OSError as exc:
            self._discard()
            raise self.failure(exc) from exc
        return staged

    def abort(self) -> None:
        self._close_copy(quietly=True)
        super().abort()

    def _close_copy(self, quietly: bool = False) -> None:
        if self._copy is not None:
            fd, self._copy = self._copy, None
            try:
                os.close(fd)
            except OSError:
                if not quietly:
                    raise

    def keep_attributes(self, mode: int | None, mtime: float | None) -> bool:
        """Mode and mtime through the copy still open: no walk of its path."""
        if self._copy is None:
            return False
        set_mode_mtime(self._copy, mode, mtime)
        return True

    def _size(self) -> int:
        if self._copy is not None:
            self._copy_st = os.fstat(self._copy)
            return self._copy_st.st_size
        return os.stat(self.path).st_size

    def _digest(self, buffer: bytearray) -> str:
        """The copy read back as it was written, else read back now."""
        if self._check is not None:
            return self._check.hexdigest()
        if self._copy is not None:
            return holes.digest_of_fd(self._copy, buffer, self._copy_st).hexdigest()
        return holes.digest_of_file(self.path, buffer).hexdigest()

    def _discard(self) -> None:
        _unlink_quietly(self.path)


def _verify_small(copy: int, data: bytes | memoryview, block: bytes, verify: str, url: str,
                  into: memoryview) -> None:
    """``FileWriter._verify`` for a small copy still open: its size, and with
    ``verify="digest"`` its bytes read back into ``into`` (as long as ``data``; it may
    be ``data``'s own memory: they were written already) and hashed as one block."""
    try:
        size = os.fstat(copy).st_size
        if size != len(data):
            raise size_differs(len(data), size, url)
        if verify == "digest":
            back = into[:os.preadv(copy, [into], 0)]
            if block_digest(back) != block:
                raise digest_differs(compose((block,)), compose((block_digest(back),)), url)
    except OSError as exc:
        raise unverified(url, exc) from exc


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def set_mode_mtime(target: str | int, mode: int | None, mtime: float | None) -> None:
    """``mode`` and ``mtime`` (an ``int`` is nanoseconds, exact) of a path or an open
    file; None leaves it."""
    if mode is not None:
        os.chmod(target, mode & 0o7777)
    if isinstance(mtime, int):
        os.utime(target, ns=(mtime, mtime))
    elif mtime is not None:
        os.utime(target, (mtime, mtime))


class LocalStorage(Storage):
    """A local (or locally mounted) filesystem, through ``os``."""

    name = "local"
    capabilities = Capabilities(local_paths=True, offset_writes=True, directories=True,
                                mtimes=True, symlinks=True, atomic_rename=True,
                                exclusive_create=True, parallel_ops=1,
                                fan_out_from=200_000)  # a rename: microseconds

    def stat(self, url: str) -> FileStatus:
        return fsutil.local_status(os_path(url))

    def is_link(self, url: str) -> bool:
        return os.path.islink(os_path(url))

    def listing_kind(self, tree: Tree) -> str | None:
        """By subtree: each task walks its own directories."""
        return tl.TREE

    def same_place(self, path: str) -> str:
        """The same directory reached through a link is the same directory."""
        return os.path.realpath(path or "/")

    def open_read(self, url: str, block_size: int | None = None) -> BinaryIO:
        """Unbuffered: the reader's own buffer is the only one (a copy of a large file
        through a second buffer cost a memcpy of every byte)."""
        return open(os_path(url), "rb", buffering=0)

    def names(self, url: str) -> list[str]:
        return sorted(os.listdir(os_path(url)))

    def open_write(self, url: str) -> BinaryIO:
        path = os_path(url)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        return open(path, "wb")

    def exists(self, url: str) -> bool:
        return os.path.lexists(os_path(url))

    def isdir(self, url: str) -> bool:
        return os.path.isdir(os_path(url))

    def entry_size(self, url: str) -> int:
        return os.lstat(os_path(url)).st_size

    def makedirs(self, url: str) -> None:
        os.makedirs(os_path(url), exist_ok=True)

    def prepare_folder(self, url: str) -> None:
        """Nothing: ``write_atomic`` makes its folder itself."""

    def write_atomic(self, url: str, data: bytes, durable: bool = True) -> None:
        self.write_atomic_pieces(url, (data,), durable)

    def write_atomic_pieces(self, url: str, pieces: Iterable[bytes], durable: bool = True,
                            make_folder: bool = True) -> None:
        path = os_path(url)
        if make_folder:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.tmp-{secrets.token_hex(4)}"
        try:
            with open(tmp, "wb") as f:
                f.writelines(pieces)
                if durable:
                    f.flush()
                    os.fsync(f.fileno())
        except BaseException:  # a full disk, or the pieces' maker failed: no half file left
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise
        os.replace(tmp, path)

    def read_bytes(self, url: str, what: str) -> bytes:
        with open(os_path(url), "rb") as f:
            return f.read()

    def stage(self, data: bytes, final_url: str, staging_url: str) -> tuple[Staged, Parts]:
        path = os_path(staging_url)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        return Staged.path(staging_url), ()

    def create_new(self, url: str, data: bytes) -> bool:
        path = os_path(url)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return True

    def move(self, src: str, dst: str) -> None:
        os.replace(os_path(src), os_path(dst))  # one syscall, no stat first

    def publish_all(self, files: Sequence[StagedFile],
                    after_each: Callable[[StagedFile], None] | None = None,
                    folders: Sequence[FolderMove] = ()) -> None:
        """A final folder the run made empty gets its staged files in one rename of
        their staging folder (``distcp.storage.folders``); the rest one by one."""
        grouped, rest = folders_of(files)
        left = publish_folders([*folders, *grouped], after_each, os_path)
        super().publish_all(rest, after_each, left)

    def remove(self, url: str) -> None:
        path = os_path(url)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a link itself, never what it points to (even a dir)

    def remove_file(self, url: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os_path(url))

    def remove_empty_folder(self, url: str) -> None:
        os.rmdir(os_path(url))

    def set_aside(self, src: str, dst: str) -> None:
        target = os_path(dst)
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        os.replace(os_path(src), target)

    def discard(self, staged: Staged) -> None:
        if not staged.needs_rename:
            return
        try:
            os.unlink(os_path(staged.location))
        except OSError:
            pass

    def digest_of(self, url: str, buffer: bytearray) -> Digest:
        """Holes of a sparse file hash as zeros, unread (a sparse file stays cheap); a
        big file is read on every core (``holes.SPANS_FROM``)."""
        return holes.digest_of_file(os_path(url), buffer, os.cpu_count() or 1)

    def set_mtime(self, url: str, mtime: float | None) -> str | None:
        self.set_attributes(url, None, mtime)
        return None

    def has_attributes(self, url: str, mode: int | None, mtime: float | None) -> bool:
        try:
            st = os.stat(os_path(url))
        except FileNotFoundError:
            return False
        if mode is not None and stat.S_IMODE(st.st_mode) != mode & 0o7777:
            return False
        if isinstance(mtime, int):  # nanoseconds, exact
            return st.st_mtime_ns == mtime
        return mtime is None or abs(st.st_mtime - mtime) < 1e-6

    def has_owner(self, url: str, owner: str | None, group: str | None) -> bool:
        try:
            st = os.stat(os_path(url))
            uid, gid = ids(owner, group)
        except (FileNotFoundError, KeyError):
            return False
        return uid in (-1, st.st_uid) and gid in (-1, st.st_gid)

    def set_owner(self, url: str, owner: str | None, group: str | None) -> None:
        """--chown on a directory the run made; a refusal is an OSError (unlike a
        preserved owner, an owner the user asked for is not dropped silently)."""
        try:
            os.chown(os_path(url), *ids(owner, group))
        except KeyError as exc:
            raise OSError(f"--chown: unknown user or group {exc}") from None

    def set_attributes(self, url: str, mode: int | None, mtime: float | None) -> None:
        set_mode_mtime(os_path(url), mode, mtime)

    # -- staging ------------------------------------------------------------------
    def stage_small_file(self, fd: int, st: os.stat_result, staging_url: str, *,
                         mode: int | None, mtime: float | None, verify: str,
                         buffer: bytearray, source: str) -> tuple[int, str] | None:
        """A small dense file read once, then staged as ``stage_small_body`` stages
        bytes in hand (its verify reads the copy back into the same memory)."""
        view = aligned(buffer)
        # an empty file has no block to hash: the writer's ``Digest`` gives its digest
        if not st.st_size or not localcopy.small_dense(st.st_size, st, view):
            return None
        data = localcopy.read_small(fd, 0, st.st_size, view, source)
        return self._stage_block(data, staging_url, mode, mtime, verify, data)

    def stage_small_body(self, data: bytes, staging_url: str, *, mode: int | None,
                         mtime: float | None, verify: str,
                         buffer: bytearray) -> tuple[int, str] | None:
        """Bytes in hand hashed, written, given their mode and mtime and verified
        through the one descriptor, in the order ``LocalFileWriter`` takes
        (``copy_file``, ``keep_attributes``, ``commit``) and with its errors; the one
        block's hash compared without a ``Digest`` for either side. The writer's steps
        cost 12-22 µs of Python a file of 64 B more than the bare system calls' 7-14
        (benchmarks/RESULTS.md, 2026-12-02). ``buffer``: where the verify reads the
        copy back."""
        view = aligned(buffer)
        if not data or len(data) > min(localcopy.SMALL, len(view)):
            return None
        return self._stage_block(data, staging_url, mode, mtime, verify, view[:len(data)])

    @staticmethod
    def _stage_block(data: bytes | memoryview, staging_url: str, mode: int | None,
                     mtime: float | None, verify: str, into: memoryview) -> tuple[int, str]:
        block = block_digest(data)
        path = os_path(staging_url)
        copy = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        try:
            localcopy.write_all(copy, memoryview(data))
            set_mode_mtime(copy, mode, mtime)
            _verify_small(copy, data, block, verify, staging_url, into)
        except BaseException:
            _close_quietly(copy)
            _unlink_quietly(path)
            raise
        try:
            os.close(copy)  # a network filesystem may report a failed write only here
        except OSError as exc:
            _unlink_quietly(path)
            raise unwritten(staging_url, exc) from exc
        return len(data), compose((block,))

    def open_stage(self, final_url: str, staging_url: str, *, verify: str = "size",
                   size_hint: int = 0, buffer_size: int = 0,
                   hold_small: bool = False) -> StageWriter:
        return LocalFileWriter(staging_url, verify)

    def set_staged_attributes(self, url: str, *, mode: int | None, mtime: float | None,
                              owner: str | None, group: str | None) -> str | None:
        """Mode, ownership (where the process may: root, or a group it is in) and
        mtime (an ``int`` is nanoseconds, exact), all kept by the rename that publishes."""
        path = os_path(url)
        if owner is not None or group is not None:
            _chown(path, owner, group)
        set_mode_mtime(path, mode, mtime)
        return None

    def write_range(self, staged: Staged, at: RangeAt, source: RangeSource,
                    buffer: bytearray, verify: str, folder_url: str,
                    attempt: str) -> WrittenRange:
        """Write the range at its offset into the shared staging file, then re-read it
        to verify. A regular local source goes through the kernel with its holes kept
        (``localcopy``), read back as it is written; any other source through pwrite of
        what was read, read back after."""
        path = os_path(staged.location)
        digest = Digest()
        src = source.regular_fd()
        check = Digest() if verify == "digest" and src is not None else None
        fd = os.open(path, (os.O_RDWR if check is not None else os.O_WRONLY) | os.O_CREAT,
                     0o600)
        try:
            if src is not None:
                localcopy.copy_span(src, fd, at.offset, at.length, buffer, digest,
                                    source=fsutil.display(source.url), check=check)
                source.copied(digest.size)
                localcopy.extend_to(fd, at.offset + at.length)
            else:
                pos = at.offset
                for chunk in source.chunks(aligned(buffer), digest):
                    os.pwrite(fd, chunk, pos)
                    pos += len(chunk)
        except OSError as exc:
            raise DestinationWriteError(f"cannot write range {at.index} to staging "
                                        f"{fsutil.display(path)}: {exc}", path=path) from exc
        finally:
            os.close(fd)
        if check is not None:
            _compare_range(path, at, check.blocks(), digest.blocks())
        elif verify == "digest":
            _verify_range(path, at, buffer, digest.blocks())
        return WrittenRange("", digest.blocks())


def _verify_range(path: str, at: RangeAt, buffer: bytearray, want: bytes) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        got = holes.digest_span(fd, at.offset, at.length, buffer)
    finally:
        os.close(fd)
    _compare_range(path, at, got.blocks(), want)


def _compare_range(path: str, at: RangeAt, got: bytes, want: bytes) -> None:
    if got != want:
        raise IntegrityError(f"range {at.index} of {fsutil.display(path)} differs from what "
                             "was read after writing it", path=path)


def _chown(path: str, owner: str | None, group: str | None) -> None:
    try:
        os.chown(path, *ids(owner, group))
    except (KeyError, PermissionError):
        pass  # unknown name here, or not allowed: keep the process's own

