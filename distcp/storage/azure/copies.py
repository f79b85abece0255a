"""Server-side copies within one Azure account: Put Block From URL (driver and executor).

The service reads each range of the source blob itself and stages it as a block of the
destination blob, so a copy is staged like any upload and published by the same commit
(Copy Blob would write the destination at once, visible before the publish). The
service reads the source with a read-only SAS of a few hours signed with the account
key, or with the SAS the user gave; with neither (a token credential), the copy is
``ServerSideCopyUnsupported`` and the task copies the bytes itself.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobSasPermissions, generate_blob_sas

from distcp import request_count
from distcp.checksum import Digest
from distcp.errors import DestinationWriteError
from distcp.storage import filesystems as fsutil
from distcp.storage.azure import blobs, blocks
from distcp.storage.errors import ServerSideCopyUnsupported
from distcp.storage.staged import Staged
from distcp.storage.staging import RangeAt, StagedStream

#: Answers of a service that cannot make the copy: Azurite has no Put Block From URL
#: (APINotImplemented); a source the service may not read (CannotVerifyCopySource).
_UNSUPPORTED = {"APINotImplemented", "NotImplemented", "CannotVerifyCopySource"}
#: The most one Put Block From URL may copy (Azure's limit for the request).
MAX_COPY_BLOCK = 100 << 20
#: How long the source's SAS is valid: long enough for the slowest task of a run.
SAS_HOURS = 6


def readable_url(fs: Any, url: str) -> str:
    """The source blob's URL with a read-only SAS the service can read it by."""
    client = blobs.blob(fs, url)
    credential = client.credential
    key = getattr(credential, "account_key", None)
    if key:
        sas = generate_blob_sas(client.account_name or "", client.container_name,
                                client.blob_name, account_key=key,
                                permission=BlobSasPermissions(read=True),
                                expiry=datetime.now(UTC) + timedelta(hours=SAS_HOURS))
        return f"{client.url}?{sas}"
    if "sig=" in client.url:  # built with the user's SAS token: its URL carries it
        return str(client.url)
    raise ServerSideCopyUnsupported(f"no account key or SAS to let Azure read "
                                    f"{fsutil.display(url)}")


def copy_block(fs: Any, final: str, upload_id: str, number: int, source: str,
               offset: int, length: int, scope: str | None = None) -> str:
    """Block ``number`` of ``final`` made by the service from ``length`` bytes of the
    source at ``offset``; the block's id."""
    request_count.count("put")
    block = blobs.block_id(upload_id, number)
    try:
        blobs.blob(fs, final).stage_block_from_url(block, source, source_offset=offset,
                                                   source_length=length,
                                                   **blocks.scoped(scope))
    except HttpResponseError as exc:
        code = str(getattr(exc, "error_code", "") or "")
        if code in _UNSUPPORTED:
            raise ServerSideCopyUnsupported(f"the service answered Put Block From URL with "
                                            f"{code}") from exc
        raise
    return block


def copy_in(fs: Any, source_url: str, final: str, size: int, part_size: int,
            scope: str | None = None) -> StagedStream:
    """The whole source staged as blocks of ``final`` by the service; no byte comes here."""
    if size == 0:
        return StagedStream(Staged.empty(final), 0, Digest().hexdigest())
    source = readable_url(fs, source_url)
    block_size = min(part_size, MAX_COPY_BLOCK)
    upload_id = blocks.new_upload()
    parts: list[tuple[int, str, int]] = []
    try:
        for offset in range(0, size, block_size):
            length = min(size - offset, block_size)
            number = len(parts) + 1
            parts.append((number, copy_block(fs, final, upload_id, number, source, offset,
                                             length, scope), length))
        blocks.verify_blocks(fs, final, upload_id, parts, always=True)
    except BaseException as exc:
        blocks.discard(fs, final, upload_id)
        if isinstance(exc, (OSError, HttpResponseError)) and \
                not isinstance(exc, ServerSideCopyUnsupported):
            raise DestinationWriteError(f"cannot copy {fsutil.display(source_url)} to "
                                        f"{fsutil.display(final)} server-side: {exc}",
                                        path=final) from exc
        raise
    return StagedStream(Staged.upload(upload_id, final), size, "", tuple(parts), size)


def copy_range(fs: Any, staged: Staged, at: RangeAt, source_url: str,
               scope: str | None = None) -> str:
    """One range of a split file staged by the service as its block; the block's id."""
    final = staged.location
    try:
        return copy_block(fs, final, staged.upload_id, at.index + 1,
                          readable_url(fs, source_url), at.offset, at.length, scope)
    except HttpResponseError as exc:
        raise DestinationWriteError(f"cannot copy block {at.index + 1} of "
                                    f"{fsutil.display(final)} server-side: {exc}",
                                    path=final) from exc
