"""Local disk: os calls, ranges written at their offsets, ``os.replace`` to publish."""

from __future__ import annotations

import os
import secrets
import stat

from distcp.storage.base import Capabilities, Parts, Storage
from distcp.storage.staged import Staged


def os_path(url: str) -> str:
    """The plain path of a local URL (what ``os`` calls take)."""
    return url.removeprefix("file://")




class LocalStorage(Storage):
    """A local (or locally mounted) filesystem, through ``os``."""

    name = "local"
    capabilities = Capabilities(local_paths=True, offset_writes=True, directories=True,
                                mtimes=True, symlinks=True, atomic_rename=True,
                                exclusive_create=True, parallel_ops=1)

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
        path = os_path(url)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.tmp-{secrets.token_hex(4)}"
        with open(tmp, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
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

    def remove(self, url: str) -> None:
        path = os_path(url)
        if os.path.islink(path):
            os.unlink(path)  # the link itself, never what it points to (even a dir)
            return
        super().remove(url)

    def discard(self, staged: Staged) -> None:
        if not staged.needs_rename:
            return
        try:
            os.unlink(os_path(staged.location))
        except OSError:
            pass

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

    def set_attributes(self, url: str, mode: int | None, mtime: float | None) -> None:
        path = os_path(url)
        if mode is not None:
            os.chmod(path, mode & 0o7777)
        if isinstance(mtime, int):
            os.utime(path, ns=(mtime, mtime))
        elif mtime is not None:
            os.utime(path, (mtime, mtime))
