"""EXECUTOR: write one stream to a private staging path, hashed and verified.

The copy loop reads into one reused buffer and hashes the same bytes (BASELINE.md:
a reused-buffer readinto/write loop is 2.2-2.5x faster here than sendfile, and
xxh3 in the loop is free). A regular local file staged on local disk is moved by
the kernel instead (``distcp.copying.localcopy``: ``copy_file_range``, holes kept), which
beats the loop (README, Performance). Nothing here ever touches a final destination path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, BinaryIO

from distcp.checksum import Digest, digest_of_stream
from distcp.copying import holes, localcopy
from distcp.copying.throttle import Throttle
from distcp.errors import CopyError, DestinationWriteError, IntegrityError, SourceReadError
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.local import os_path


@dataclass(frozen=True, slots=True)
class Staged:
    """What the writer reports about one staged output."""

    url: str
    size: int
    checksum: str


class SourceReader:
    """Wraps an origin stream: counts bytes and turns OSError into SourceReadError.

    Keeping read failures distinct from write failures is DistCp's rule: a read
    failure may be skipped or retried, a write failure never hides.
    """

    def __init__(self, raw: BinaryIO, url: str, throttle: Throttle | None = None) -> None:
        self.raw = raw
        self.url = url
        self.count = 0
        #: ``--bwlimit``: reads are paced (and the kernel copy is off, it cannot be).
        self.throttle = throttle
        #: The store vouched that these are the listed version's bytes (GET If-Match).
        self.proven = False

    def readinto(self, buffer: Any) -> int:
        try:
            n = self.raw.readinto(buffer) or 0
        except OSError as exc:
            raise SourceReadError(f"cannot read {fsutil.display(self.url)}: {exc}",
                                  path=self.url) from exc
        self.count += n
        if self.throttle is not None:
            self.throttle.take(n)
        return n

    def read(self, size: int = -1) -> bytes:
        try:
            data = self.raw.read(size)
        except OSError as exc:
            raise SourceReadError(f"cannot read {fsutil.display(self.url)}: {exc}",
                                  path=self.url) from exc
        self.count += len(data)
        if self.throttle is not None:
            self.throttle.take(len(data))
        return data

    def regular_fd(self) -> int | None:
        """The descriptor of a regular local source file, else None (see distcp.copying.localcopy)."""
        return localcopy.regular_fd(self.raw) if self.throttle is None else None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return bool(getattr(self.raw, "seekable", lambda: False)())

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.raw.seek(offset, whence)

    def tell(self) -> int:
        return self.raw.tell()

    def close(self) -> None:
        self.raw.close()

    @property
    def closed(self) -> bool:
        return bool(getattr(self.raw, "closed", False))


def write_staged(stream: Any, staging_url: str, options: dict[str, Any], buffer: bytearray,
                 verify: str) -> Staged:
    """Copy ``stream`` to ``staging_url``; verify size (and digest) of what landed.

    A regular local file staged on local disk goes through the kernel
    (``distcp.copying.localcopy``: kernel copy, holes kept); any other stream through the loop.
    """
    storage = storage_for(staging_url, options)
    local = storage.capabilities.local_paths
    fs, path = (None, os_path(staging_url)) if local else storage.fs(staging_url)
    src_fd = stream.regular_fd() if local and isinstance(stream, SourceReader) else None
    digest = Digest()
    try:
        if src_fd is not None:
            digest = localcopy.copy_to(src_fd, path, buffer, source=fsutil.display(stream.url))
            stream.count += digest.size
        elif fs is None:
            with open(path, "wb", buffering=0) as out:
                _pump(stream, out, buffer, digest)
        else:
            with fs.open(path, "wb") as out:
                _pump(stream, out, buffer, digest)
        close = getattr(stream, "close", None)
        if close is not None:
            close()
    except CopyError:
        _discard(fs, path)
        raise
    except OSError as exc:
        _discard(fs, path)
        raise DestinationWriteError(
            f"cannot write staging copy {fsutil.display(staging_url)}: {exc}", path=staging_url
        ) from exc
    except BaseException:
        _discard(fs, path)
        raise
    staged = Staged(staging_url, digest.size, digest.hexdigest())
    _verify(fs, path, staged, buffer, verify)
    return staged


def _pump(stream: Any, out: Any, buffer: bytearray, digest: Digest) -> None:
    view = memoryview(buffer)
    readinto = getattr(stream, "readinto", None)
    while True:
        if readinto is not None:
            n = readinto(view)
            if not n:
                return
            chunk: Any = view[:n]
        else:
            chunk = stream.read(len(buffer))
            if not chunk:
                return
        digest.update(chunk)
        out.write(chunk)


def _verify(fs: Any, path: str, staged: Staged, buffer: bytearray, verify: str) -> None:
    """Check that the staged copy holds what was read: its size, and its digest.

    ``fs`` is None for a local path (plain os calls).
    """
    try:
        size = os.stat(path).st_size if fs is None else fs.size(path)
        if size != staged.size:
            raise IntegrityError(
                f"size differs: read {staged.size} bytes but staged {size} "
                f"({fsutil.display(staged.url)})", path=staged.url)
        if verify == "digest":
            if fs is None:  # holes of a sparse copy hash as zeros, unread
                got = holes.digest_of_file(path, buffer).hexdigest()
            else:
                with fs.open(path, "rb") as f:
                    got = digest_of_stream(f, buffer).hexdigest()
            if got != staged.checksum:
                raise IntegrityError(
                    f"digest differs: read {staged.checksum} but staged {got} "
                    f"({fsutil.display(staged.url)})", path=staged.url)
    except IntegrityError:
        _discard(fs, path)
        raise
    except OSError as exc:
        _discard(fs, path)
        raise DestinationWriteError(
            f"cannot verify staging copy {fsutil.display(staged.url)}: {exc}", path=staged.url
        ) from exc


def apply_attributes(staging_url: str, options: dict[str, Any], *, mode: int | None,
                     mtime: float | None, owner: str | None, group: str | None
                     ) -> str | None:
    """Set mode, mtime and ownership on the staged file; a rename keeps them.

    An ``int`` mtime is nanoseconds (exact), a ``float`` seconds.

    Ownership is applied only where the process may (root, or a group it is in);
    filesystems without POSIX attributes (object stores) keep their own. Other
    filesystems get the mtime where they offer ``set_mtime`` (FTP: MFMT). Returns
    a note when the filesystem refused it (the copy stands), else None.
    """
    storage = storage_for(staging_url, options)
    if not storage.capabilities.local_paths:
        return storage.set_mtime(staging_url, mtime)
    path = os_path(staging_url)
    if mode is not None:
        os.chmod(path, mode & 0o7777)
    if owner is not None or group is not None:
        _chown(path, owner, group)
    if isinstance(mtime, int):
        os.utime(path, ns=(mtime, mtime))
    elif mtime is not None:
        os.utime(path, (mtime, mtime))
    return None


def _chown(path: str, owner: str | None, group: str | None) -> None:
    import grp
    import pwd

    try:
        uid = pwd.getpwnam(owner).pw_uid if owner else -1
        gid = grp.getgrnam(group).gr_gid if group else -1
        os.chown(path, uid, gid)
    except (KeyError, PermissionError):
        pass  # unknown name here, or not allowed: keep the process's own


def _discard(fs: Any, path: str) -> None:
    try:
        if fs is None:
            os.unlink(path)
        else:
            fs.rm_file(path)
    except (FileNotFoundError, OSError):
        pass
