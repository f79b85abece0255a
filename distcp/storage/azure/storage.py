"""Azure Blob Storage (``az://``, ``abfs://``) as a backend (driver and executor).

Blocks staged on the final blob are the staging, committing the block list is the
publish.

A staged file is a list of uncommitted blocks on its final blob (invisible to
readers); Put Block List publishes it whole; deleting a blob that holds only our
blocks discards them. A state document is one Put Blob (atomic). Listings, reads and
the questions every filesystem answers go through adlfs; writes through Azure's SDK,
after which adlfs's cached listings are dropped. A file's mtime is kept as the blob's
``mtime`` metadata, as rclone keeps it, written by the commit (``keep_mtime``) and read
back by listings (``distcp.storage.keptmtimes``).
"""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceModifiedError, ResourceNotFoundError

from distcp.errors import IntegrityError
from distcp.model import FileStatus
from distcp.mtimes import aged
from distcp.storage import filesystems as fsutil
from distcp.storage.azure import blobs, blocks, copies
from distcp.storage.azure.probe import probe_problem
from distcp.storage.base import Capabilities, Storage
from distcp.storage.errors import VersionChanged
from distcp.storage.keptmtimes import AZURE_MTIME_KEY, nanoseconds, rfc3339
from distcp.storage.s3.ops import part_size_for
from distcp.storage.staged import Staged, StagedKind
from distcp.storage.staging import (
    Parts,
    RangeAt,
    RangeSource,
    StagedStream,
    StageWriter,
    WrittenRange,
)
from distcp.storage.writes import WriteOptions

#: What Azure takes as a metadata name: a C# identifier (ASCII here).
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class AzureStorage(Storage):
    """Azure Blob Storage and Azurite (block blobs)."""

    name = "azure"
    capabilities = Capabilities(multipart=True, server_side_copy=True, directories=False,
                                server_side_ranges=True, conditional_reads=True,
                                exclusive_create=True, file_visibility=True)
    #: The access tier (``--storage-class``), the encryption scope (``--kms-key-id``),
    #: metadata and blob index tags, given at the block list's commit (the scope to
    #: every block too); Azure has no canned ACLs per blob and no requester pays.
    write_options = frozenset({"storage_class", "kms_key_id", "metadata", "tags"})
    own_metadata_keys = frozenset({AZURE_MTIME_KEY})

    def _blob(self, url: str) -> tuple[Any, str]:
        """The adlfs filesystem of ``url`` and its canonical URL (``abfs://c/p``)."""
        fs, path = self.fs(url)
        return fs, fsutil.to_url(fs, path)

    def _written(self, fs: Any, url: str) -> None:
        """Forget adlfs's cached listings: a blob was written or removed behind them."""
        fs.invalidate_cache()

    # -- reading ------------------------------------------------------------------
    def read_bytes(self, url: str, what: str) -> bytes:
        fs, final = self._blob(url)
        try:
            return bytes(blobs.blob(fs, final).download_blob().readall())
        except ResourceNotFoundError as exc:
            raise FileNotFoundError(f"no {what} at {fsutil.display(url)}") from exc

    def read_version(self, url: str, etag: str) -> bytes:
        """One GET If-Match the listed ETag: the bytes are that version's."""
        fs, final = self._blob(url)
        try:
            return bytes(blobs.blob(fs, final).download_blob(
                etag=etag, match_condition=MatchConditions.IfNotModified).readall())
        except ResourceModifiedError as exc:
            raise VersionChanged(f"{fsutil.display(url)} is no longer {etag}") from exc
        except ResourceNotFoundError as exc:
            raise FileNotFoundError(fsutil.display(url)) from exc

    def stored_checksum(self, status: FileStatus) -> str | None:
        return None  # a blob committed from blocks has no MD5 of its whole content

    def probe(self, url: str, setting: str) -> None:
        """The container's properties: credentials present and accepted, endpoint
        reachable, container there (``probe`` words what went wrong)."""
        container = ""
        try:
            fs, path = self.fs(url)
            container = path.split("/", 1)[0]
            client = blobs.probe_service(fs).get_container_client(container)
            client.get_container_properties()
        except Exception as exc:  # noqa: BLE001 - classified, re-raised as ours
            raise probe_problem(exc, url, container, setting) from None

    def write_value_problem(self, writes: WriteOptions, shown: str) -> str | None:
        """``--storage-class`` is an access tier of block blobs; a metadata name is a C#
        identifier (letters, digits and '_', not first a digit)."""
        if writes.storage_class and blocks.tier(writes.storage_class) is None:
            return (f"--storage-class: {shown} has the access tiers "
                    f"{', '.join(blocks.TIERS)}, not {writes.storage_class!r}")
        bad = next((k for k, _ in writes.metadata if not _IDENTIFIER.fullmatch(k)), None)
        if bad is not None:
            return (f"--metadata {bad}: {shown} takes metadata names of letters, digits and "
                    "'_' (not first a digit)")
        return None

    def part_size(self, size: int, wanted: int) -> int:
        return part_size_for(size, wanted)

    def name_problem(self, url: str) -> str | None:
        """Azure takes names of up to 1,024 characters, any but a trailing dot or slash."""
        name = blobs.container_blob(self.fs(url)[0], url)[1]
        if len(name) > 1024:
            return f"a blob name is at most 1,024 characters ({len(name)} here)"
        if name.endswith((".", "/")):
            return "a blob name cannot end with a dot or a slash"
        return None

    # -- writing ------------------------------------------------------------------
    def write_atomic(self, url: str, data: bytes, durable: bool = True) -> None:
        fs, final = self._blob(url)  # one Put Blob: atomic
        blobs.blob(fs, final).upload_blob(data, overwrite=True)
        self._written(fs, final)

    def create_new(self, url: str, data: bytes) -> bool:
        """One Put Blob If-None-Match ``*``: a 409 (BlobAlreadyExists) means someone was
        first; of writers racing for one name exactly one wins (``exclusive_create``)."""
        fs, final = self._blob(url)
        try:
            blobs.blob(fs, final).upload_blob(data, overwrite=False)
        except HttpResponseError as exc:
            if exc.status_code in (409, 412):
                return False
            raise
        self._written(fs, final)
        return True

    def prepare_folder(self, url: str) -> None:
        """Nothing: blob names need no folder."""

    def makedirs(self, url: str) -> None:
        """Nothing: blob names need no folder (adlfs would write a marker blob)."""

    def remove(self, url: str) -> None:
        super().remove(url)
        self._written(self.fs(url)[0], url)

    def remove_file(self, url: str) -> None:
        super().remove_file(url)
        self._written(self.fs(url)[0], url)

    # -- staging and publishing -----------------------------------------------------
    def stage(self, data: bytes, final_url: str, staging_url: str) -> tuple[Staged, Parts]:
        """Blocks on the final blob holding ``data`` as one block (nothing for 0 bytes)."""
        fs, final = self._blob(final_url)
        if not data:
            return Staged.empty(final), ()
        upload_id = blocks.new_upload()
        block = blocks.stage_block(fs, final, upload_id, 1, data, self.writes.kms_key_id)
        return Staged.upload(upload_id, final), ((1, block, len(data)),)

    def open_stage(self, final_url: str, staging_url: str, *, verify: str = "size",
                   size_hint: int = 0, buffer_size: int = 0,
                   hold_small: bool = False) -> StageWriter:
        """Blocks on the final blob (``staging_url`` is not used), sized as S3's parts."""
        fs, final = self._blob(final_url)
        block_size = part_size_for(size_hint, buffer_size)
        return blocks.BlockWriter(fs, final, block_size, hold_small, self.writes.kms_key_id)

    def stage_split(self, final_url: str, folder_url: str, name: str) -> Staged:
        """A new upload id on the final blob: its blocks are the ranges."""
        return Staged.upload(blocks.new_upload(), self._blob(final_url)[1])

    def write_range(self, staged: Staged, at: RangeAt, source: RangeSource,
                    buffer: bytearray, verify: str, folder_url: str,
                    attempt: str) -> WrittenRange:
        fs, _ = self.fs(staged.location)
        return WrittenRange(*blocks.write_range(fs, staged, at, source, self.writes.kms_key_id))

    def copy_in(self, source_url: str, final_url: str, size: int,
                part_size: int, staging_url: str = "") -> StagedStream:
        fs, final = self._blob(final_url)
        return copies.copy_in(fs, source_url, final, size, part_size_for(size, part_size),
                              self.writes.kms_key_id)

    def copy_range(self, staged: Staged, at: RangeAt, source_url: str) -> str:
        fs, _ = self.fs(staged.location)
        return copies.copy_range(fs, staged, at, source_url, self.writes.kms_key_id)

    def uploaded_parts(self, staged: Staged) -> dict[int, tuple[str, int]] | None:
        if not staged.upload_id or _blockless(staged):
            return None
        fs, final = self._blob(staged.location)
        return blocks.staged_blocks(fs, final, staged.upload_id)

    def holds_staged(self, staged: Staged) -> bool:
        """An empty file staged to keep its mtime has no blocks to lose."""
        return _blockless(staged) or super().holds_staged(staged)

    def keep_mtime(self, staged: Staged, mtime: float | None) -> Staged:
        """The mtime rides in the staging's upload id (``blobs.with_mtime``) to the
        commit, which writes it as the blob's ``mtime`` metadata, as rclone does; an
        empty file becomes a staging without blocks, committed with the same metadata."""
        if mtime is None or not staged.needs_complete:
            return staged
        upload_id = staged.upload_id or blobs.EMPTY_UPLOAD
        return Staged.upload(blobs.with_mtime(upload_id, nanoseconds(mtime)), staged.location)

    def publish(self, staged: Staged, final_url: str, parts: Parts = ()) -> None:
        """Commit the block list (an empty file: an empty list) with the kept mtime as
        metadata; the blob appears whole."""
        fs, final = self._blob(staged.location or final_url)
        if staged.kind in (StagedKind.UPLOAD, StagedKind.EMPTY):
            blocks.commit(fs, final, parts if staged.upload_id else (),
                          metadata=_metadata(blobs.mtime_in(staged.upload_id)),
                          writes=self.writes)
            self._written(fs, final)
        else:
            super().publish(staged, final_url, parts)

    def publish_whole(self, url: str, body: bytes, mtime: float | None = None,
                      mode: int | None = None) -> Staged:
        fs, final = self._blob(url)
        kept = None if mtime is None else nanoseconds(mtime)
        published = blocks.put_whole(fs, final, body, self.writes, _metadata(kept))
        self._written(fs, final)
        return published

    def publish_checked(self, staged: Staged, size: int, parts: Parts,
                        final_url: str = "") -> Staged:
        """Commit at once, then the blob must hold ``size`` bytes (one HEAD)."""
        fs, final = self._blob(staged.location)
        self.publish(staged, final, parts)
        if not blocks.holds(fs, final, size):
            raise IntegrityError(f"{fsutil.display(final)} does not hold the {size} "
                                        "bytes of its blocks after the commit", path=final)
        return Staged.published(final)

    def is_published(self, staged: Staged, final: str, size: int) -> bool:
        if staged.upload_id and self.uploaded_parts(staged) is not None:
            return False  # still staged: whatever the blob holds is not ours
        if staged.needs_rename:
            return super().is_published(staged, final, size)
        fs, url = self._blob(final)
        return blocks.holds(fs, url, size)

    def discard(self, staged: Staged) -> None:
        if staged.upload_id and not _blockless(staged):
            fs, final = self._blob(staged.location)
            blocks.discard(fs, final, staged.upload_id)
        elif staged.needs_rename:
            super().discard(staged)

    def account(self, url: str) -> str:
        return blobs.account_in(url)

    def set_mtime(self, url: str, mtime: float | None) -> str | None:
        """Nothing after the staging: the commit writes the kept mtime (``keep_mtime``)."""
        return None

    def sweep_orphans(self, prefix_url: str, keep: AbstractSet[str], older_than: float = 0.0,
                      dry_run: bool = False) -> int:
        """Delete blobs that hold only blocks of stagings not in ``keep`` and no committed
        content, last written ``older_than`` seconds ago or earlier; the count."""
        fs, path = self.fs(prefix_url)
        container, _, prefix = path.partition("/")
        client = blobs.service(fs).get_container_client(container)
        kept = {blobs.blocks_key(k) for k in keep}
        committed = {b.name for b in client.list_blobs(name_starts_with=prefix)}
        swept = 0
        for found in client.list_blobs(name_starts_with=prefix, include=["uncommittedblobs"]):
            if found.name in committed or not aged(found.last_modified.timestamp(), older_than):
                continue
            blob = client.get_blob_client(found.name)
            uploads = {blobs.upload_of(b.id) for b in blobs.uncommitted(blob)}
            if not uploads or None in uploads or uploads & kept:
                continue
            if not dry_run:
                blob.delete_blob()
            swept += len(uploads)
        return swept


def _blockless(staged: Staged) -> bool:
    """An empty file staged to keep its mtime (``keep_mtime``): no blocks anywhere."""
    return blobs.blocks_key(staged.upload_id) == blobs.EMPTY_UPLOAD


def _metadata(mtime_ns: int | None) -> dict[str, str] | None:
    """The blob's metadata keeping ``mtime_ns`` under rclone's key, or None."""
    return None if mtime_ns is None else {AZURE_MTIME_KEY: rfc3339(mtime_ns)}
