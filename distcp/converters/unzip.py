"""``unzip``: one zip in, one output per regular file or directory out (driver and executor).

A zip's directory is at its end, so zipfile needs random access: a
non-seekable input (the output of ``decrypt``, a remote stream) is first
spooled to an anonymous 0600 file in the task's private staging area (unlinked
as soon as it is open, so nothing is left behind even if the task dies), then
read from there. Every name is validated before the first entry is staged
(zipfile truncates names at NUL and lets the last of two duplicate names win,
so both are refused here); each entry's CRC is checked as it is read; bytes
actually produced count against the expansion limits (zipfile 3.11 predates the
overlapping-entry bomb fix; counting output defeats it anyway).
"""

from __future__ import annotations

import io
import os
import stat
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from distcp.converters.base import Converter
from distcp.converters.codecs import describe
from distcp.converters.iostreams import ConvertedReader
from distcp.converters.names import expansion_root
from distcp.converters.safety import ExpansionBudget, entry_mode, entry_path
from distcp.errors import ConversionError, CopyError
from distcp.storage.filesystems import display
from distcp.streams import FileAwareInputStream

_SPOOL_CHUNK = 1 << 20


@dataclass(frozen=True)
class _Entry:
    info: zipfile.ZipInfo
    rel: str
    mode: int | None
    is_dir: bool


class UnzipConverter(Converter):
    """Expands a zip under ``DST/<archive name>/``."""

    name = "unzip"
    one_to_many = True

    def rename(self, destination: str) -> str:
        return expansion_root(destination, self.options.expand_into_parent)

    def error(self, origin: str, why: str) -> ConversionError:
        return ConversionError(f"cannot unzip {display(origin)}: {why}", path=origin)

    def convert(self, stream: FileAwareInputStream) -> Iterator[FileAwareInputStream]:
        origin = stream.file.origin.url
        root = self.rename(stream.destination)
        with ExitStack() as stack:
            source, size = self._seekable(stream, stack)
            archive = stack.enter_context(self._open(source, origin))
            entries = [self._entry(info, origin) for info in archive.infolist()]
            _refuse_duplicates(entries, lambda why: self.error(origin, why))
            budget = ExpansionBudget(origin, "unzip", self.options.max_expansion_ratio,
                                     self.options.max_expanded_bytes)
            keep_time = "t" in stream.file.preserve
            if not self.options.expand_into_parent:  # DST/<name>/ dated as the archive
                origin_mtime = stream.file.origin.mtime_ns or stream.file.origin.mtime
                yield FileAwareInputStream(stream.file, io.BytesIO(), root, None,
                                           origin_mtime if keep_time else None)
            for e in entries:
                if not e.rel:
                    continue  # "./": the expansion root itself
                mtime = time.mktime(e.info.date_time + (0, 0, -1)) if keep_time else None
                if e.is_dir:
                    yield FileAwareInputStream(stream.file, io.BytesIO(), root + e.rel + "/",
                                               e.mode, mtime)
                    continue
                reader = ConvertedReader(self._member(archive, e.info, origin),
                                         lambda exc: self._translate(exc, origin), budget,
                                         lambda: size)
                yield FileAwareInputStream(stream.file, reader, root + e.rel, e.mode, mtime)

    def _seekable(self, stream: FileAwareInputStream, stack: ExitStack) -> tuple[Any, int]:
        """The input itself when it can seek, else a private spooled copy; and its size."""
        raw = stream.stream
        if getattr(raw, "seekable", lambda: False)():
            return raw, stream.file.origin.size
        fd, path = tempfile.mkstemp(prefix=".unzip-spool-", dir=self.options.scratch_dir)
        spool = stack.enter_context(os.fdopen(fd, "w+b"))
        os.unlink(path)  # anonymous from now on: removed when closed, even by a crash
        size = 0
        while True:
            chunk = raw.read(_SPOOL_CHUNK)
            if not chunk:
                break
            spool.write(chunk)
            size += len(chunk)
        spool.seek(0)
        return spool, size

    def _open(self, source: Any, origin: str) -> zipfile.ZipFile:
        try:
            return zipfile.ZipFile(source)
        except CopyError:
            raise
        except Exception as exc:  # one line naming the file, whatever zipfile raised
            raise self.error(origin, f"corrupt zip: {exc}") from exc

    def _entry(self, info: zipfile.ZipInfo, origin: str) -> _Entry:
        name = info.orig_filename  # before zipfile cut it at a NUL
        rel = entry_path(name, origin, "unzip")
        if info.flag_bits & 0x1:
            raise self.error(origin, f"entry {name!r} is encrypted (zip encryption is not "
                                     "supported)")
        unix = info.external_attr >> 16 if info.create_system == 3 else 0
        kind = stat.S_IFMT(unix)
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            what = "a symbolic link" if kind == stat.S_IFLNK else "a special file"
            raise self.error(origin, f"entry {name!r} is {what}; only regular files and "
                                     "directories are expanded, nothing of this archive was "
                                     "published")
        mode = entry_mode(unix & 0o7777, name, origin, "unzip") if unix & 0o7777 else None
        if not rel and not info.is_dir():
            raise self.error(origin, f"entry {name!r} has an empty name")
        return _Entry(info, rel, mode, info.is_dir())

    def _member(self, archive: zipfile.ZipFile, info: zipfile.ZipInfo, origin: str) -> Any:
        try:
            return archive.open(info)
        except Exception as exc:  # zipfile raises many types: translated, re-raised
            raise self._translate(exc, origin) from exc

    def _translate(self, exc: BaseException, origin: str) -> CopyError:
        if isinstance(exc, zipfile.BadZipFile):
            return self.error(origin, f"corrupt zip: {exc}")
        return self.error(origin, describe(exc))


def _refuse_duplicates(entries: list[_Entry], error: Any) -> None:
    """zipfile lets the last of two equal names win silently; we refuse the archive."""
    seen: set[str] = set()
    for e in entries:
        if not e.rel:
            continue
        if e.rel in seen and not e.is_dir:
            raise error(f"duplicate member {e.rel!r}")
        seen.add(e.rel)
