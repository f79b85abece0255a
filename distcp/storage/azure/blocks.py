"""Streams and ranges staged as blocks of their final blob (driver and executor).

Each is published by committing the blob's block list.

Put Block sends each block to the final blob's name, where no reader sees it; Put Block
List makes the blob, whole, from exactly the listed blocks: Azure's zero-copy publish,
as completing a multipart upload is S3's. A staging's blocks carry its upload id in
their ids (``blobs.block_id``), so the driver commits them from the text a task wrote.
Blocks nobody commits are dropped by Azure a week after the last one was staged; where
no committed blob is at the name, discarding deletes them at once.
"""

from __future__ import annotations

import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import BlobBlock

from distcp import request_count
from distcp.checksum import Digest
from distcp.errors import DestinationWriteError, IntegrityError
from distcp.storage import filesystems as fsutil
from distcp.storage.azure import blobs
from distcp.storage.staged import Staged
from distcp.storage.staging import Parts, RangeAt, RangeSource, StagedStream, StageWriter

#: Blocks of one file in flight at once (as S3's parts: latency hidden, memory bounded).
BLOCKS_IN_FLIGHT = 4


def new_upload() -> str:
    """A fresh upload id: 32 hex digits, so every block id of a blob has one length."""
    return uuid.uuid4().hex


def stage_block(fs: Any, url: str, upload_id: str, number: int, body: Any) -> str:
    """Put Block, its MD5 checked by the server; the block's id (a part's "ETag")."""
    request_count.count("put")
    block = blobs.block_id(upload_id, number)
    blobs.blob(fs, url).stage_block(block, bytes(body), validate_content=True)
    return block


def staged_blocks(fs: Any, url: str, upload_id: str) -> dict[int, tuple[str, int]] | None:
    """Number -> (block id, size) of ``upload_id``'s uncommitted blocks on the blob;
    None when it has none left (committed, discarded, or never staged)."""
    found = {}
    for block in blobs.uncommitted(blobs.blob(fs, url)):
        number = blobs.block_number(upload_id, block.id)
        if number is not None:
            found[number] = (block.id, int(block.size))
    return found or None


def verify_blocks(fs: Any, url: str, upload_id: str, sent: list[tuple[int, str, int]],
                  always: bool = False) -> None:
    """The blob holds exactly the blocks we sent (one request; a single block's body
    was checked by its MD5, its size at publish). Blocks the service copied are
    always listed (``always``): no body of ours was checked."""
    if len(sent) <= 1 and not always:
        return
    held = staged_blocks(fs, url, upload_id) or {}
    want = {n: (b, size) for n, b, size in sent}
    if held != want:
        raise IntegrityError(f"staged blocks of {fsutil.display(url)}: {sorted(held)} held, "
                             f"{sorted(want)} sent", path=url)


def commit(fs: Any, url: str, parts: Parts, metadata: dict[str, str] | None = None) -> None:
    """Put Block List: the blob appears whole, made of exactly ``parts`` (an empty list
    writes an empty blob). Blocks no longer there (committed by an interrupted run, or
    gone) raise FileNotFoundError, as a move whose source is gone would."""
    request_count.count("put")
    try:
        blobs.blob(fs, url).commit_block_list(
            [BlobBlock(block_id=b) for _, b, _ in sorted(parts)], metadata=metadata)
    except HttpResponseError as exc:
        if getattr(exc, "error_code", None) == "InvalidBlockList":
            raise FileNotFoundError(f"staged blocks of {fsutil.display(url)} are gone") from exc
        raise


def holds(fs: Any, url: str, size: int) -> bool:
    """A committed blob of ``size`` bytes is at ``url`` (one HEAD)."""
    request_count.count("head")
    try:
        return int(blobs.blob(fs, url).get_blob_properties().size) == size
    except ResourceNotFoundError:
        return False


def discard(fs: Any, url: str, upload_id: str) -> None:
    """Drop ``upload_id``'s blocks by deleting the blob, only where no committed blob is
    at the name and no other staging has blocks there (a published file is never
    touched: stray blocks wait for Azure's weekly clean-up, or the blob's next commit)."""
    client = blobs.blob(fs, url)
    try:
        found = {blobs.upload_of(b.id) for b in blobs.uncommitted(client)}
        if found == {upload_id} and not blobs.committed_exists(client):
            client.delete_blob()
    except (ResourceNotFoundError, OSError):
        pass


def put_whole(fs: Any, url: str, body: bytes) -> Staged:
    """Publish a small file with ONE Put Blob, its MD5 checked by the server."""
    request_count.count("put")
    try:
        blobs.blob(fs, url).upload_blob(body, overwrite=True, validate_content=True)
    except (HttpResponseError, OSError) as exc:
        raise DestinationWriteError(f"cannot write {fsutil.display(url)}: {exc}",
                                    path=url) from exc
    return Staged.published(url)


class BlockWriter(StageWriter):
    """A stream staged as blocks of ``url``, up to BLOCKS_IN_FLIGHT sent at once (with
    ``hold_small``: a stream shorter than one block stays in memory for ``put_whole``)."""

    def __init__(self, fs: Any, url: str, block_size: int, hold_small: bool) -> None:
        self.fs, self.url, self.block_size, self.hold_small = fs, url, block_size, hold_small
        self.upload_id = ""
        self._pending: list[bytes] = []
        self._held = 0
        self._futures: list[tuple[int, int, Future[str]]] = []
        self._pool: ThreadPoolExecutor | None = None

    def write(self, chunk: memoryview) -> None:
        if not chunk:
            return
        if not self.hold_small:
            self.upload_id = self.upload_id or new_upload()
        self._pending.append(bytes(chunk))
        self._held += len(chunk)
        if self._held >= self.block_size:
            data = b"".join(self._pending)
            body, rest = data[:self.block_size], data[self.block_size:]
            self._send(body)
            self._pending, self._held = ([rest], len(rest)) if rest else ([], 0)
            self._wait_window()

    def commit(self, digest: Digest, buffer: bytearray) -> StagedStream:
        if not self.upload_id or (not self._futures and self.hold_small):
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
            verify_blocks(self.fs, self.url, self.upload_id, parts)
        except BaseException as exc:
            self.abort()
            if isinstance(exc, (OSError, HttpResponseError)):
                raise self.failure(exc) from exc  # type: ignore[arg-type]
            raise
        return StagedStream(Staged.upload(self.upload_id, self.url), digest.size,
                            digest.hexdigest(), tuple(parts))

    def abort(self) -> None:
        self._close_pool()
        if self._futures:
            discard(self.fs, self.url, self.upload_id)

    def failure(self, exc: OSError) -> Exception:
        if not self._futures:
            return exc  # nothing sent: the error is the source's
        return DestinationWriteError(f"cannot stage {fsutil.display(self.url)}: {exc}",
                                     path=self.url)

    def _send(self, body: bytes) -> None:
        self.upload_id = self.upload_id or new_upload()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(BLOCKS_IN_FLIGHT)
        number = len(self._futures) + 1
        self._futures.append((number, len(body), self._pool.submit(
            request_count.carry(stage_block), self.fs, self.url, self.upload_id, number,
            body)))

    def _wait_window(self) -> None:
        """Block until fewer than BLOCKS_IN_FLIGHT blocks are in flight; raise a block's
        error."""
        running = [f for _, _, f in self._futures if not f.done()]
        if len(running) >= BLOCKS_IN_FLIGHT:
            wait(running, return_when=FIRST_COMPLETED)
        for _, _, f in self._futures:
            exc = f.exception() if f.done() else None
            if exc is not None:
                raise exc

    def _close_pool(self) -> None:
        """Wait for the blocks in flight (a discard must come after them)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def write_range(fs: Any, staged: Staged, at: RangeAt, source: RangeSource) -> tuple[str, bytes]:
    """One range = block ``index + 1`` of the split file's upload, held in memory (one
    request), then listed back: a late block of a killed attempt must not stand."""
    body = bytearray(at.length)
    digest = Digest()
    source.fill(memoryview(body), digest)
    url, number = staged.location, at.index + 1
    try:
        block = stage_block(fs, url, staged.upload_id, number, memoryview(body))
    except (HttpResponseError, OSError) as exc:
        raise DestinationWriteError(f"cannot stage block {number} of {fsutil.display(url)}: "
                                    f"{exc}", path=url) from exc
    held = (staged_blocks(fs, url, staged.upload_id) or {}).get(number)
    if held != (block, at.length):
        raise IntegrityError(f"block {number} of {fsutil.display(url)} holds {held}, "
                             f"sent {at.length} bytes", path=url)
    return block, digest.blocks()
