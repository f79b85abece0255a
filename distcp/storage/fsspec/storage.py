"""Any other fsspec filesystem: part files, join, rename (driver and executor)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from distcp.storage.base import Capabilities, Storage

T = TypeVar("T")


class FsspecStorage(Storage):
    """A filesystem reached only through fsspec's API: no offset writes, so a split
    file's ranges are part files a join task concatenates; publishing is ``mv``."""

    name = "fsspec"
    capabilities = Capabilities(directories=True)

    def write_atomic(self, url: str, data: bytes, durable: bool = True) -> None:
        self._into_place(url, lambda fs, tmp: fs.pipe_file(tmp, data))

    def write_streamed(self, url: str, pieces: Iterable[bytes]) -> int:
        """Written under a temporary name beside ``url``, then moved into place: fsspec's
        uncommitted files go to a temporary folder of the server's own (FTP: ``/tmp``),
        which the folder a server shares need not hold."""
        def write(fs: Any, tmp: str) -> int:
            written = 0
            with fs.open(tmp, "wb") as out:
                for piece in pieces:
                    out.write(piece)
                    written += len(piece)
            return written
        return self._into_place(url, write)

    def _into_place(self, url: str, write: Callable[[Any, str], T]) -> T:
        """``write(fs, tmp)`` to a temporary name beside ``url`` (a write can be cut half-way:
        never in place), then moved onto ``url``; the temporary is removed on failure."""
        fs, path = self.fs(url)
        tmp = f"{path}.tmp-{secrets.token_hex(4)}"
        try:
            done = write(fs, tmp)
            fs.mv(tmp, path)
            return done
        except BaseException:
            with contextlib.suppress(Exception):  # gone already, or the server is: keep the cause
                fs.rm_file(tmp)
            raise
