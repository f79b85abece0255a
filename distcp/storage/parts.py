"""A stream staged as numbered parts of its final object, a few in flight (executor).

What S3's multipart uploads and Azure's staged blocks share: bytes gathered into parts
of ``part_size``, each part sent by a thread of a small pool so that a server's
per-request latency is hidden (at a memory cost of ``in_flight`` parts per task), the
parts checked against what the server holds before the staging is reported, and a
failure anywhere aborting what was sent before the error goes up. With ``hold_small``
a stream shorter than one part is never sent: it comes back in memory, for the
storage to publish with one request. Each store says only how an upload starts, how a
part is sent, checked and discarded, and which of its errors are the destination's.
"""

from __future__ import annotations

from abc import abstractmethod
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from distcp import request_count
from distcp.checksum import Digest
from distcp.errors import DestinationWriteError
from distcp.storage import filesystems as fsutil
from distcp.storage.staged import Staged
from distcp.storage.staging import StagedStream, StageWriter

#: (part number, its ETag or block id, its size), as a staging's record holds them.
SentPart = tuple[int, str, int]


class PartWriter(StageWriter):
    """The stream's parts sent as they fill, at most ``in_flight`` at once."""

    #: The store's own error types that mean its request failed (OSError always does).
    errors: tuple[type[BaseException], ...] = (OSError,)

    def __init__(self, fs: Any, url: str, part_size: int, hold_small: bool,
                 in_flight: int) -> None:
        self.fs, self.url, self.part_size, self.hold_small = fs, url, part_size, hold_small
        self.in_flight = in_flight
        self.upload_id = ""
        self._pending: list[bytes] = []
        self._held = 0
        self._futures: list[tuple[int, int, Future[str]]] = []
        self._pool: ThreadPoolExecutor | None = None

    @abstractmethod
    def start(self) -> str:
        """A new upload's id (a request where the store keeps uploads, else a name)."""

    @abstractmethod
    def send_part(self, fs: Any, url: str, upload_id: str, number: int, body: bytes) -> str:
        """Send part ``number``; its ETag or block id. Runs on the pool's threads."""

    @abstractmethod
    def verify(self, parts: list[SentPart]) -> None:
        """The server holds exactly ``parts`` for this upload, or IntegrityError."""

    @abstractmethod
    def discard(self) -> None:
        """Drop what was sent (called only when ``touched``)."""

    @property
    def touched(self) -> bool:
        """Something exists on the server for this stream (an upload, or a part)."""
        return bool(self._futures)

    def write(self, chunk: memoryview) -> None:
        if not chunk:
            return
        if not self.upload_id and not self.hold_small:
            self.upload_id = self.start()
        self._pending.append(bytes(chunk))
        self._held += len(chunk)
        if self._held >= self.part_size:
            data = b"".join(self._pending)
            body, rest = data[:self.part_size], data[self.part_size:]
            self._send(body)
            self._pending, self._held = ([rest], len(rest)) if rest else ([], 0)
            self._wait_window()

    def commit(self, digest: Digest, buffer: bytearray) -> StagedStream:
        if not self.upload_id:
            if not self._held:
                return StagedStream(Staged.empty(self.url), 0, digest.hexdigest())
            if self.hold_small:
                return StagedStream(None, digest.size, digest.hexdigest(),
                                    body=b"".join(self._pending))
        try:
            if self._held:
                self._send(b"".join(self._pending))
                self._pending, self._held = [], 0
            parts = [(n, f.result(), size) for n, size, f in self._futures]
            self._close_pool()
            self.verify(parts)
        except BaseException as exc:
            self.abort()
            if isinstance(exc, self.errors):
                raise self.failure(exc) from exc  # type: ignore[arg-type]
            raise
        return StagedStream(Staged.upload(self.upload_id, self.url), digest.size,
                            digest.hexdigest(), tuple(parts))

    def abort(self) -> None:
        self._close_pool()
        if self.touched:
            self.discard()

    def failure(self, exc: OSError) -> Exception:
        if not self.touched:
            return exc  # nothing sent: the error is the source's
        return DestinationWriteError(f"cannot stage {fsutil.display(self.url)}: {exc}",
                                     path=self.url)

    def _send(self, body: bytes) -> None:
        if not self.upload_id:
            self.upload_id = self.start()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.in_flight)
        number = len(self._futures) + 1
        self._futures.append((number, len(body), self._pool.submit(
            request_count.carry(self.send_part), self.fs, self.url, self.upload_id, number,
            body)))

    def _wait_window(self) -> None:
        """Block until fewer than ``in_flight`` parts are in flight; raise a part's error."""
        running = [f for _, _, f in self._futures if not f.done()]
        if len(running) >= self.in_flight:
            wait(running, return_when=FIRST_COMPLETED)
        for _, _, f in self._futures:
            exc = f.exception() if f.done() else None
            if exc is not None:
                raise exc

    def _close_pool(self) -> None:
        """Wait for the parts in flight (a discard must come after them, or a late part
        would land in an upload nobody completes)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
