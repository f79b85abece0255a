"""Staging into files through fsspec: a staging file, a range's part file (executor).

The way of any filesystem that holds files (FTP, SFTP, HDFS... and, with ``os``
calls instead, local disk: ``distcp.storage.local``): bytes go to a file nobody
reads, which is then checked (its size, and with ``--verify digest`` its bytes
re-read) before anything is published; a failed or unverified file is removed.
"""

from __future__ import annotations

from typing import Any, BinaryIO

from distcp.checksum import Digest, digest_of_stream
from distcp.errors import DestinationWriteError, IntegrityError
from distcp.storage import filesystems as fsutil
from distcp.storage.staged import Staged
from distcp.storage.staging import RangeAt, RangeSource, StagedStream, StageWriter


class FileWriter(StageWriter):
    """A private staging file at ``url`` (``path`` on ``fs``), opened on first use."""

    def __init__(self, fs: Any, path: str, url: str, verify: str) -> None:
        self.fs, self.path, self.url, self.verify = fs, path, url, verify
        self._out: BinaryIO | None = None
        #: The bytes were copied into the file without ``write`` (``copy_file``).
        self._copied = False

    def _open(self) -> BinaryIO:
        out: BinaryIO = self.fs.open(self.path, "wb")
        return out

    def _file(self) -> BinaryIO:
        if self._out is None:
            self._out = self._open()
        return self._out

    def write(self, chunk: memoryview) -> None:
        self._file().write(chunk)

    def commit(self, digest: Digest, buffer: bytearray) -> StagedStream:
        try:
            if not self._copied:
                self._file().close()  # an empty stream still leaves an (empty) file
        except OSError as exc:
            self.abort()
            raise self.failure(exc) from exc
        staged = StagedStream(Staged.path(self.url), digest.size, digest.hexdigest())
        self._verify(staged, buffer)
        return staged

    def abort(self) -> None:
        if self._out is not None:
            try:
                self._out.close()
            except Exception:  # noqa: BLE001, S110 - the file goes next; keep the cause
                pass
        self._discard()

    def failure(self, exc: OSError) -> Exception:
        return unwritten(self.url, exc)

    # -- checks, in the filesystem's own calls ----------------------------------
    def _size(self) -> int:
        return int(self.fs.size(self.path))

    def _digest(self, buffer: bytearray) -> str:
        with self.fs.open(self.path, "rb") as f:
            return digest_of_stream(f, buffer).hexdigest()

    def _discard(self) -> None:
        try:
            self.fs.rm_file(self.path)
        except OSError:
            pass

    def _verify(self, staged: StagedStream, buffer: bytearray) -> None:
        """Check that the staged copy holds what was read: its size, and its digest."""
        try:
            size = self._size()
            if size != staged.size:
                raise size_differs(staged.size, size, self.url)
            if self.verify == "digest":
                got = self._digest(buffer)
                if got != staged.checksum:
                    raise digest_differs(staged.checksum, got, self.url)
        except IntegrityError:
            self._discard()
            raise
        except OSError as exc:
            self._discard()
            raise unverified(self.url, exc) from exc


def size_differs(read: int, staged: int, url: str) -> IntegrityError:
    """A staged copy whose size is not what was read (the verify's first check)."""
    return IntegrityError(f"size differs: read {read} bytes but staged {staged} "
                          f"({fsutil.display(url)})", path=url)


def digest_differs(read: str, staged: str, url: str) -> IntegrityError:
    """A staged copy whose bytes re-read do not hash to what was read."""
    return IntegrityError(f"digest differs: read {read} but staged {staged} "
                          f"({fsutil.display(url)})", path=url)


def unwritten(url: str, exc: OSError) -> DestinationWriteError:
    """A staged copy whose write failed (reported at its close, on some filesystems)."""
    return DestinationWriteError(f"cannot write staging copy {fsutil.display(url)}: {exc}",
                                 path=url)


def unverified(url: str, exc: OSError) -> DestinationWriteError:
    """A staged copy the verify could not read back."""
    return DestinationWriteError(f"cannot verify staging copy {fsutil.display(url)}: {exc}",
                                 path=url)


def part_name(index: int, attempt: str) -> str:
    """One part file per range and task attempt: two attempts of a range (a retry,
    speculation) never write the same file; the record names the one it verified."""
    return f"p{index}-{attempt}"


def write_part_file(fs: Any, path: str, url: str, at: RangeAt, source: RangeSource,
                    buffer: bytearray, verify: str) -> bytes:
    """The range as its own file, written in buffer-sized blocks (one request each on
    FTP), then checked: its size, and with ``--verify digest`` its bytes re-read.
    Returns the block digests of what was read."""
    digest = Digest()
    try:
        with fs.open(path, "wb", block_size=len(buffer)) as out:
            for chunk in source.chunks(memoryview(buffer), digest):
                out.write(chunk)
        _verify_part_file(fs, path, at, buffer, digest.blocks(), verify)
    except BaseException as exc:
        remove_quietly(fs, path)
        if isinstance(exc, OSError):
            raise DestinationWriteError(f"cannot write range {at.index} to part file "
                                        f"{fsutil.display(url)}: {exc}", path=url) from exc
        raise
    return digest.blocks()


def _verify_part_file(fs: Any, path: str, at: RangeAt, buffer: bytearray, want: bytes,
                      verify: str) -> None:
    size = fs.size(path)
    if size != at.length:
        raise IntegrityError(f"range {at.index}: part file {fsutil.display(path)} holds "
                             f"{size} bytes, {at.length} were written", path=path)
    if verify != "digest":
        return
    with fs.open(path, "rb", block_size=len(buffer)) as f:
        got = digest_of_stream(f, buffer)
    if got.blocks() != want:
        raise IntegrityError(f"range {at.index}: part file {fsutil.display(path)} differs "
                             "from what was read after writing it", path=path)


def remove_quietly(fs: Any, path: str) -> None:
    """Remove a file that may be gone already, on a server that may be gone too."""
    try:
        fs.rm_file(path)
    except Exception:  # noqa: BLE001, S110 - ftplib's errors are no OSError
        pass  # the folder goes with the split

