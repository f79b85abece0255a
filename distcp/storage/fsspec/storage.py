"""Any other fsspec filesystem: part files, join, rename (driver and executor)."""

from __future__ import annotations

import contextlib
import secrets

from distcp.storage.base import Capabilities, Storage


class FsspecStorage(Storage):
    """A filesystem reached only through fsspec's API: no offset writes, so a split
    file's ranges are part files a join task concatenates; publishing is ``mv``."""

    name = "fsspec"
    capabilities = Capabilities(directories=True)

    def write_atomic(self, url: str, data: bytes, durable: bool = True) -> None:
        fs, path = self.fs(url)
        tmp = f"{path}.tmp-{secrets.token_hex(4)}"  # a write can be cut half-way: beside
        try:
            fs.pipe_file(tmp, data)
            fs.mv(tmp, path)
        except BaseException:
            with contextlib.suppress(Exception):  # gone already, or the server is: keep the cause
                fs.rm_file(tmp)
            raise
