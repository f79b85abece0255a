"""fsspec's ``ftp://`` made to follow the fsspec contract and keep mtimes (driver and executor).

- ``FTPFileSystem.ls(path, detail=False)`` returns bare entry names where every
  other fsspec filesystem returns full paths, so code that lists a folder and
  then opens what it found (the commit log, the recovery area, split records)
  opened ``/name`` instead of ``/folder/name``.
- ftplib's errors (``error_perm``, ``error_reply``, ``EOFError``...) are not
  OSErrors, so a refused request reached callers as an unknown exception. Every
  method that talks to the server here raises OSErrors naming the path instead,
  as s3fs maps S3's errors (550 "no such file": FileNotFoundError, a refusal:
  PermissionError, others: OSError with the server's reply).
- ``set_mtime`` sets a file's mtime with ``MFMT`` (whole seconds, UTC), which
  fsspec's client cannot.

Used by ``distcp.storage.filesystems.filesystem`` for every ``ftp://`` URL pydistcp opens (on the
driver and on executors alike), and never registered into fsspec: a user's own
``fsspec.filesystem("ftp")`` keeps fsspec's class.
"""

from __future__ import annotations

import errno
import ftplib
import functools
import math
import time
from collections.abc import Callable
from typing import Any, TypeVar

from fsspec.implementations.ftp import FTPFile, FTPFileSystem

F = TypeVar("F", bound=Callable[..., Any])

_DENIED = ("permission", "privilege", "denied", "not allowed", "access")
_MISSING = ("no such file", "not found", "does not exist", "doesn't exist", "not exist")


def translate(exc: BaseException, path: str, path2: str | None = None) -> BaseException:
    """An ftplib error as the OSError it stands for (OSErrors and others unchanged)."""
    if isinstance(exc, OSError) or not isinstance(exc, ftplib.all_errors):
        return exc
    if isinstance(exc, EOFError):
        return ConnectionError(errno.ECONNRESET, "the FTP server closed the connection",
                               path, None, path2)
    reply = str(exc).strip() or type(exc).__name__
    text, code = reply.lower(), reply[:3]
    if code in ("530", "532", "553") or any(w in text for w in _DENIED):
        return PermissionError(errno.EACCES, reply, path, None, path2)
    if code == "550" and any(w in text for w in _MISSING):
        return FileNotFoundError(errno.ENOENT, reply, path, None, path2)
    return OSError(errno.EIO, f"FTP server replied {reply}", path, None, path2)


def _oserrors(method: F, two_paths: bool = False) -> F:
    """``method`` with ftplib errors raised as OSErrors naming its path(s)."""

    @functools.wraps(method)
    def wrapper(self: Any, path: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, path, *args, **kwargs)
        except ftplib.all_errors as exc:
            other = str(args[0]) if two_paths and args else None
            err = translate(exc, str(path), other)
            if err is exc:
                raise
            raise err from exc

    return wrapper  # type: ignore[return-value]


class TranslatingFTPFile(FTPFile):
    """FTPFile whose reads and writes raise OSErrors naming the file."""

    def _fetch_range(self, start: int, end: int) -> bytes:
        try:
            return super()._fetch_range(start, end)  # type: ignore[no-any-return]
        except ftplib.all_errors as exc:
            err = translate(exc, self.path)
            if err is exc:
                raise
            raise err from exc

    def _upload_chunk(self, final: bool = False) -> bool:
        try:
            return super()._upload_chunk(final)  # type: ignore[no-any-return]
        except ftplib.all_errors as exc:
            err = translate(exc, self.path)
            if err is exc:
                raise
            raise err from exc


class ListingFTPFileSystem(FTPFileSystem):
    """FTPFileSystem with full paths from ``ls(detail=False)``, OSErrors, and MFMT."""

    def _connect(self) -> None:
        try:
            super()._connect()
        except ftplib.all_errors as exc:  # e.g. 530 on a wrong password
            err = translate(exc, f"ftp://{self.host}:{self.port}")
            if err is exc:
                raise
            raise err from exc

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        entries = self._ls(path, **kwargs)
        return entries if detail else sorted(e["name"] for e in entries)

    @_oserrors
    def _ls(self, path: str, **kwargs: Any) -> list[Any]:
        return super().ls(path, detail=True, **kwargs)  # type: ignore[no-any-return]

    info = _oserrors(FTPFileSystem.info)
    @_oserrors
    def cat_file(self, path: str, start: int | None = None, end: int | None = None,
                 **kwargs: Any) -> bytes:
        """The file's bytes; unlike fsspec's, a refusal is not a missing file (the
        state reader takes FileNotFoundError for "no state yet")."""
        if end is not None:
            return super().cat_file(path, start, end, **kwargs)  # type: ignore[no-any-return]
        out: list[bytes] = []
        self.ftp.retrbinary(f"RETR {self._strip_protocol(path)}", blocksize=self.blocksize,
                            rest=start, callback=out.append)
        return b"".join(out)

    get_file = _oserrors(FTPFileSystem.get_file, two_paths=True)
    _rm = _oserrors(FTPFileSystem._rm)
    rm = _oserrors(FTPFileSystem.rm)
    mkdir = _oserrors(FTPFileSystem.mkdir)
    makedirs = _oserrors(FTPFileSystem.makedirs)
    rmdir = _oserrors(FTPFileSystem.rmdir)
    mv = _oserrors(FTPFileSystem.mv, two_paths=True)

    @_oserrors
    def _open(self, path: str, mode: str = "rb", block_size: int | None = None,
              cache_options: Any = None, autocommit: bool = True, **kwargs: Any) -> Any:
        return TranslatingFTPFile(
            self, self._strip_protocol(path), mode=mode,
            block_size=block_size or self.blocksize, tempdir=self.tempdir,
            autocommit=autocommit, cache_options=cache_options)

    @_oserrors
    def set_mtime(self, path: str, mtime: float | int) -> None:  # noqa: PYI041 - int: ns
        """Set ``path``'s mtime (seconds; an ``int`` is nanoseconds) with ``MFMT``.

        FTP keeps whole seconds (RFC 3659 times, UTC); the fraction is dropped.
        Raises an OSError when the server refuses or lacks the command.
        """
        seconds = mtime // 1_000_000_000 if isinstance(mtime, int) else math.floor(mtime)
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(seconds))
        path = self._strip_protocol(path)
        self.ftp.sendcmd(f"MFMT {stamp} {path}")
        self.invalidate_cache(self._parent(path))
