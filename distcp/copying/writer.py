"""Read one stream into the destination's staging, hashed and verified (executor).

The copy loop reads into one reused buffer and hashes the same bytes (BASELINE.md:
a reused-buffer readinto/write loop is 2.2-2.5x faster here than sendfile, and
xxh3 in the loop is free); where the bytes go is the storage's business (a
``StageWriter``: a staging file, or an upload on the final key). A regular local
file staged on local disk is moved by the kernel instead
(``distcp.storage.local.copyfile``: ``copy_file_range``, holes kept), which beats the
loop (benchmarks/RESULTS.md). Nothing here ever touches a final destination path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from distcp.checksum import Digest
from distcp.copying.throttle import Throttle
from distcp.errors import CopyError, SourceReadError
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.buffers import aligned
from distcp.storage.local import copyfile as localcopy
from distcp.storage.staging import StagedStream, StageWriter


@dataclass(frozen=True, slots=True)
class Staged:
    """What the writer reports about one staged output."""

    url: str
    size: int
    checksum: str


class RawSource(Protocol):
    """An opened origin file as the filesystems give it (a local file, an fsspec file,
    pydistcp's S3 GET stream): bytes in order, into a buffer or as a copy."""

    def readinto(self, buffer: memoryview, /) -> int | None:
        ...

    def read(self, size: int = -1, /) -> bytes:
        ...

    def seek(self, offset: int, whence: int = 0, /) -> int:
        ...

    def tell(self) -> int:
        ...

    def close(self) -> None:
        ...


class SourceReader:
    """Wraps an origin stream: counts bytes and turns OSError into SourceReadError.

    Keeping read failures distinct from write failures is DistCp's rule: a read
    failure may be skipped or retried, a write failure never hides.
    """

    def __init__(self, raw: RawSource, url: str, throttle: Throttle | None = None) -> None:
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
        """The descriptor of a regular local source file, else None
        (see distcp.storage.local.copyfile)."""
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
    """Copy ``stream`` to the staging file ``staging_url``; verify size (and digest)
    of what landed."""
    storage = storage_for(staging_url, options)
    done = stage_stream(stream, storage.open_stage(staging_url, staging_url, verify=verify),
                        buffer)
    return Staged(staging_url, done.size, done.checksum)


def stage_stream(stream: Any, writer: StageWriter, buffer: bytearray) -> StagedStream:
    """Read ``stream`` to its end into ``writer``, hashing every byte read; commit.

    A regular local file is handed to a writer that ``copies_files`` (local disk: the
    kernel copies, holes kept); any other stream goes through the loop. On any
    failure the writer leaves nothing staged; a write failure is reported in the
    storage's words, a read failure stays the source's (DistCp's rule).
    """
    digest = Digest()
    try:
        src_fd = (stream.regular_fd() if writer.copies_files
                  and isinstance(stream, SourceReader) else None)
        copied = (writer.copy_file(src_fd, buffer, fsutil.display(stream.url))
                  if src_fd is not None else None)
        if copied is not None:
            digest = copied
            stream.count += digest.size
        else:
            _pump(stream, writer, buffer, digest)
        close = getattr(stream, "close", None)
        if close is not None:
            close()
    except CopyError:
        writer.abort()
        raise
    except OSError as exc:
        writer.abort()
        error = writer.failure(exc)
        if error is exc:
            raise
        raise error from exc
    except BaseException:
        writer.abort()
        raise
    return writer.commit(digest, buffer)


def _pump(stream: Any, out: StageWriter, buffer: bytearray, digest: Digest) -> None:
    view = aligned(buffer)
    readinto = getattr(stream, "readinto", None)
    while True:
        if readinto is not None:
            n = readinto(view)
            if not n:
                return
            chunk = view[:n]
        else:
            data = stream.read(len(view))
            if not data:
                return
            chunk = memoryview(data)
        digest.update(chunk)
        out.write(chunk)
