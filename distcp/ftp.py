"""fsspec's ``ftp://`` with its listing made to follow the fsspec contract.

``FTPFileSystem.ls(path, detail=False)`` returns bare entry names where every
other fsspec filesystem returns full paths, so code that lists a folder and
then opens what it found (the commit log, the recovery area, split records)
opened ``/name`` instead of ``/folder/name``. Registered in place of fsspec's
class by ``distcp.fs`` on import, so it holds on executors too.
"""

from __future__ import annotations

from typing import Any

from fsspec.implementations.ftp import FTPFileSystem


class ListingFTPFileSystem(FTPFileSystem):
    """FTPFileSystem whose ``ls(detail=False)`` gives full paths, as fsspec specifies."""

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        entries = super().ls(path, detail=True, **kwargs)
        return entries if detail else sorted(e["name"] for e in entries)
