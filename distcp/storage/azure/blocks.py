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
from typing import Any

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import BlobBlock, StandardBlobTier

from distcp import request_count
from distcp.checksum import Digest
from distcp.errors import DestinationWriteError, IntegrityError
from distcp.storage import filesystems as fsutil
from distcp.storage.azure import blobs
from distcp.storage.parts import PartWriter, SentPart
from distcp.storage.staged import Staged
from distcp.storage.staging import Parts, RangeAt, RangeSource
from distcp.storage.writes import WriteOptions

#: Blocks of one file in flight at once (as S3's parts: latency hidden, memory bounded).
BLOCKS_IN_FLIGHT = 4


def new_upload() -> str:
    """A fresh upload id: 32 hex digits, so every block id of a blob has one length."""
    return uuid.uuid4().hex


def stage_block(fs: Any, url: str, upload_id: str, number: int, body: Any,
                scope: str | None = None) -> str:
    """Put Block, its MD5 checked by the server; the block's id (a part's "ETag").
    ``scope``: the encryption scope the blob is committed with (``--kms-key-id``)."""
    request_count.count("put")
    block = blobs.block_id(upload_id, number)
    blobs.blob(fs, url).stage_block(block, bytes(body), validate_content=True,
                                    **scoped(scope))
    return block


def scoped(scope: str | None) -> dict[str, Any]:
    """The encryption scope argument of a request that writes bytes, where one is set."""
    return {"encryption_scope": scope} if scope else {}


#: The access tiers a block blob is committed with (``--storage-class``).
TIERS = ("Hot", "Cool", "Cold", "Archive")


def tier(name: str) -> StandardBlobTier | None:
    """The access tier ``name`` names, whatever its case; None when it names none."""
    found = next((t for t in TIERS if t.lower() == name.lower()), None)
    return StandardBlobTier(found) if found else None


def blob_arguments(writes: WriteOptions | None,
                   metadata: dict[str, str] | None = None) -> dict[str, Any]:
    """Put Block List's and Put Blob's arguments giving the blob the write options:
    metadata (the user's, with pydistcp's own ``metadata`` over them), the access tier
    (``--storage-class``), blob index tags and the encryption scope (``--kms-key-id``)."""
    out: dict[str, Any] = {}
    merged = {**dict(writes.metadata if writes else ()), **(metadata or {})}
    if merged:
        out["metadata"] = merged
    if writes is None:
        return out
    if writes.storage_class:
        out["standard_blob_tier"] = tier(writes.storage_class)
    if writes.tags:
        out["tags"] = dict(writes.tags)
    return {**out, **scoped(writes.kms_key_id)}


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


def commit(fs: Any, url: str, parts: Parts, metadata: dict[str, str] | None = None,
           writes: WriteOptions | None = None) -> None:
    """Put Block List: the blob appears whole, made of exactly ``parts`` (an empty list
    writes an empty blob). Blocks no longer there (committed by an interrupted run, or
    gone) raise FileNotFoundError, as a move whose source is gone would."""
    request_count.count("put")
    try:
        blobs.blob(fs, url).commit_block_list(
            [BlobBlock(block_id=b) for _, b, _ in sorted(parts)],
            **blob_arguments(writes, metadata))
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
        if found == {blobs.blocks_key(upload_id)} and not blobs.committed_exists(client):
            client.delete_blob()
    except (ResourceNotFoundError, OSError):
        pass


def put_whole(fs: Any, url: str, body: bytes, writes: WriteOptions | None = None,
              metadata: dict[str, str] | None = None) -> Staged:
    """Publish a small file with ONE Put Blob, its MD5 checked by the server."""
    request_count.count("put")
    try:
        blobs.blob(fs, url).upload_blob(body, overwrite=True, validate_content=True,
                                        **blob_arguments(writes, metadata))
    except (HttpResponseError, OSError) as exc:
        raise DestinationWriteError(f"cannot write {fsutil.display(url)}: {exc}",
                                    path=url) from exc
    return Staged.published(url)


class BlockWriter(PartWriter):
    """A stream staged as blocks of ``url``, up to BLOCKS_IN_FLIGHT sent at once (with
    ``hold_small``: a stream shorter than one block stays in memory for ``put_whole``)."""

    errors = (OSError, HttpResponseError)

    def __init__(self, fs: Any, url: str, block_size: int, hold_small: bool,
                 scope: str | None = None) -> None:
        super().__init__(fs, url, block_size, hold_small, BLOCKS_IN_FLIGHT)
        self.scope = scope

    def start(self) -> str:
        return new_upload()  # nothing on the service until the first block

    def send_part(self, fs: Any, url: str, upload_id: str, number: int, body: bytes) -> str:
        return stage_block(fs, url, upload_id, number, body, self.scope)

    def verify(self, parts: list[SentPart]) -> None:
        verify_blocks(self.fs, self.url, self.upload_id, parts)

    def discard(self) -> None:
        discard(self.fs, self.url, self.upload_id)


def write_range(fs: Any, staged: Staged, at: RangeAt, source: RangeSource,
                scope: str | None = None) -> tuple[str, bytes]:
    """One range = block ``index + 1`` of the split file's upload, held in memory (one
    request), then listed back: a late block of a killed attempt must not stand."""
    body = bytearray(at.length)
    digest = Digest()
    source.fill(memoryview(body), digest)
    url, number = staged.location, at.index + 1
    try:
        block = stage_block(fs, url, staged.upload_id, number, memoryview(body), scope)
    except (HttpResponseError, OSError) as exc:
        raise DestinationWriteError(f"cannot stage block {number} of {fsutil.display(url)}: "
                                    f"{exc}", path=url) from exc
    held = (staged_blocks(fs, url, staged.upload_id) or {}).get(number)
    if held != (block, at.length):
        raise IntegrityError(f"block {number} of {fsutil.display(url)} holds {held}, "
                             f"sent {at.length} bytes", path=url)
    return block, digest.blocks()
