"""Open an origin file for reading, and prove afterwards it did not change (executor).

Shared by whole-file copies (``distcp.copying.task``) and byte ranges of split files
(``distcp.copying.ranges``): a read is one version of the file or it is refused.
"""

from __future__ import annotations

import io
import os
import stat
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from distcp.copying.taskspec import TaskSpec
from distcp.copying.throttle import throttle_for
from distcp.copying.writer import SourceReader
from distcp.errors import SourceReadError
from distcp.model import CopyableFile
from distcp.mtimes import same_mtime
from distcp.storage import Storage, VersionChanged, storage_for
from distcp.storage import filesystems as fsutil
from distcp.storage.filesystems import os_path

#: Objects up to this size with a listed ETag are read whole in one GET If-Match.
SMALL_OBJECT = 1 << 20
#: Sources being read in this worker process, for the progress of files not yet done.
LIVE_READERS: weakref.WeakSet[SourceReader] = weakref.WeakSet()


def one_get(file: CopyableFile, storage: Storage | None = None) -> bool:
    """A small object whose listed ETag lets one conditional read fetch it and vouch for
    its version (``capabilities.conditional_reads``)."""
    o = file.origin
    return bool(o.etag) and o.size <= SMALL_OBJECT and \
        (storage or storage_for(o.url)).capabilities.conditional_reads


def open_source(file: CopyableFile, spec: TaskSpec, body: bytes | None = None
                ) -> SourceReader:
    """A reader of ``file``'s bytes; ``body``: the bytes of its listed version, already
    read (``read_together``), which vouch for it as one GET If-Match does."""
    storage = storage_for(file.origin.url, spec.src_options)
    shown = fsutil.display(file.origin.url)
    proven = False
    with _refusals(shown):
        if body is not None:
            raw: Any = _listed_body(file, body, shown)
            proven = True
        elif one_get(file, storage):
            raw = _get_listed(storage, file, shown)
            proven = True
        else:
            raw = storage.open_read(file.origin.url, spec.buffer_size)
    reader = SourceReader(raw, file.origin.url, throttle_for(spec.bwlimit))
    LIVE_READERS.add(reader)
    reader.proven = proven
    return reader


class opened_source:
    """``with opened_source(file) as fd``: the descriptor of a local regular origin file,
    closed after; refused in ``open_source``'s words. Listing skips special files, so
    one found here is a source that changed since (opened without blocking: a FIFO
    would wait for a writer). A class, not a generator: it runs once per plain file,
    where ``contextlib``'s machinery cost more than the open."""

    __slots__ = ("fd", "file", "st")

    def __init__(self, file: CopyableFile) -> None:
        self.file = file
        #: The open file's status (taken to refuse a special file; the copy reuses it).
        self.st: os.stat_result | None = None

    def __enter__(self) -> int:
        url = self.file.origin.url
        try:
            self.fd = os.open(os_path(url), os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as exc:
            raise _refused(fsutil.display(url), exc) from exc
        try:
            self.st = os.fstat(self.fd)
            if not stat.S_ISREG(self.st.st_mode):
                shown = fsutil.display(url)
                raise SourceReadError(f"source changed while copying: {shown} is no "
                                      "longer a regular file", path=shown)
        except BaseException:
            os.close(self.fd)
            raise
        return self.fd

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


@contextmanager
def _refusals(shown: str) -> Iterator[None]:
    """An origin that cannot be opened, as the SourceReadError that names why."""
    try:
        yield
    except OSError as exc:
        raise _refused(shown, exc) from exc


def _refused(shown: str, exc: OSError) -> SourceReadError:
    if isinstance(exc, FileNotFoundError):
        return SourceReadError(f"source vanished since listing: {shown}", path=shown)
    if isinstance(exc, IsADirectoryError):
        return SourceReadError(f"source became a directory: {shown}", path=shown)
    if isinstance(exc, PermissionError):
        return SourceReadError(f"cannot read {shown}: permission denied", path=shown)
    return SourceReadError(f"cannot open {shown}: {exc}", path=shown)


def _get_listed(storage: Storage, file: CopyableFile, shown: str) -> io.BytesIO:
    """The listed version of a small object, in one request (no HEAD before or after)."""
    o = file.origin
    assert o.etag is not None
    try:
        data = storage.read_version(o.url, o.etag)
    except VersionChanged as exc:
        raise SourceReadError(f"source changed while copying: {shown} (its ETag is no "
                              f"longer the listed {o.etag})", path=shown) from exc
    return _listed_body(file, data, shown)


def _listed_body(file: CopyableFile, data: bytes, shown: str) -> io.BytesIO:
    """The bytes a GET If-Match of the listed ETag gave, as a reader (``check_body``)."""
    check_body(file, data, shown)
    return io.BytesIO(data)


def check_body(file: CopyableFile, data: bytes, shown: str) -> None:
    """Refuse the bytes a GET If-Match of the listed ETag gave unless they are as long
    as the listing says. The ETag match is the proof of the version. LastModified is
    not compared: rclone serve s3's header (whole seconds) and its listing
    (milliseconds) disagreed on 27 of 5,000 objects."""
    if len(data) != file.origin.size:
        raise SourceReadError(f"source changed while copying: {shown} (listed "
                              f"{file.origin.size} bytes, read {len(data)})", path=shown)


def read_together(files: Sequence[CopyableFile], spec: TaskSpec
                  ) -> Iterator[tuple[int, bytes | None]] | None:
    """The listed versions of ``files`` (small objects of one storage, each read in one
    GET If-Match: ``one_get``) read at once by their storage (``Storage.read_versions``),
    ``(index, bytes)`` as they come; None where the storage reads one at a time."""
    if not files:
        return None
    storage = storage_for(files[0].origin.url, spec.src_options)
    if any(storage_for(f.origin.url, spec.src_options) is not storage for f in files):
        return None
    return storage.read_versions([(f.origin.url, f.origin.etag or "") for f in files])


def check_unchanged(file: CopyableFile, reader: SourceReader, spec: TaskSpec) -> None:
    """Refuse a copy of a file that changed while it was read: never a mixed version."""
    check_read(file, reader.count, spec, proven=reader.proven)


def check_read(file: CopyableFile, read: int, spec: TaskSpec, proven: bool = False) -> None:
    """``check_unchanged`` for ``read`` bytes read of ``file``; ``proven``: a GET If-Match
    already proved the version."""
    if not file.converters and read != file.origin.size:
        shown = fsutil.display(file.origin.url)
        raise SourceReadError(f"source changed while copying: {shown} (listed "
                              f"{file.origin.size} bytes, read {read})", path=shown)
    if not proven:
        recheck_source(file, spec)


def recheck_source(file: CopyableFile, spec: TaskSpec) -> None:
    """The origin still has its listed size and version (after a copy or a range of it).

    The version is the ETag where the listing and the HEAD both give one: an object
    store's mtime is not a version (``rclone serve s3`` lists milliseconds and answers
    HEAD with whole seconds, and the two disagreed beyond the second on a few objects
    in a thousand). Elsewhere it is the mtime, at the coarser precision of the two.
    """
    o = file.origin
    etag: str | None = None
    local = fsutil.local_path(o.url)  # a plain path, asked without its storage
    if local is not None:
        st = os.stat(local)
        size, mtime = st.st_size, st.st_mtime
    else:
        now = storage_for(o.url, spec.src_options).stat(o.url)
        size, mtime, etag = now.size, now.mtime, now.etag
    if size != o.size:
        change = f"listed {o.size} bytes, now {size}"
    elif o.etag and etag:
        if _bare(etag) == _bare(o.etag):
            return
        change = f"its ETag is no longer the listed {o.etag}"
    elif same_mtime(o.mtime, mtime):
        return
    else:
        change = f"listed mtime {o.mtime:.3f}, now {mtime:.3f}"
    shown = fsutil.display(o.url)
    raise SourceReadError(f"source changed while copying: {shown} ({change})", path=shown)


def _bare(etag: str) -> str:
    return etag.strip().strip('"')
