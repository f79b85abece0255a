"""A stream or a range staged as an uncompleted multipart upload (driver and executor).

Bytes are sent as parts of at least 5 MiB (one part for a small file), up to
PARTS_IN_FLIGHT at once; nothing is visible at the key until the upload is
completed (the publish). Any failure (the source, a part, the watchdog) aborts the
upload before the error goes up, so a failed copy leaves neither an object nor a
pending upload. Never ``with fs.open(final, "wb")``: its ``close()`` in
``__exit__`` would publish the partial object (PITFALLS.md).

With per-file visibility (``--visibility file``) the task publishes each file
itself once its source is checked: a file smaller than one part is held in memory
and sent as ONE PutObject to its final key (``hold_small``, then ``put_whole``),
a bigger one is completed at once (``complete_now``). Either way the object
appears whole or not at all.

Every function looks ``s3.<request>`` up when it runs (tests replace one to play a
misbehaving server).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from distcp import request_count
from distcp.checksum import Digest
from distcp.errors import DestinationWriteError, IntegrityError, PublishError
from distcp.storage import filesystems as fsutil
from distcp.storage.errors import ServerSideCopyUnsupported
from distcp.storage.parts import PartWriter, SentPart
from distcp.storage.s3 import ops as s3
from distcp.storage.staged import Staged
from distcp.storage.staging import (
    Parts,
    RangeAt,
    RangeSource,
    StagedFile,
    StagedStream,
)

T = TypeVar("T")

#: Parts of one file in flight at once: a server's per-request latency is hidden the way
#: ``aws s3 cp`` hides it, at a memory cost of this many parts per task.
PARTS_IN_FLIGHT = 4
#: Times a part is sent again when the server then holds another body under its
#: number: a late request of a killed earlier attempt of the range can land after
#: ours and replace it (seen once); the last writer wins, so we write again.
PART_RESENDS = 2


class UploadWriter(PartWriter):
    """A stream staged as a new upload on ``final_url``, created with the first bytes
    (with ``hold_small``: once they fill a part; a shorter stream stays in memory)."""

    def __init__(self, fs: Any, final_url: str, part_size: int, hold_small: bool,
                 extra: Mapping[str, Any] | None = None) -> None:
        super().__init__(fs, final_url, part_size, hold_small, PARTS_IN_FLIGHT)
        self.extra = extra  # what the object is created with (``s3.object_arguments``)

    @property
    def touched(self) -> bool:
        return bool(self.upload_id)  # the upload itself exists from its creation

    def start(self) -> str:
        return s3.create(self.fs, self.url, self.extra)

    def send_part(self, fs: Any, url: str, upload_id: str, number: int, body: bytes) -> str:
        return s3.upload_part(fs, url, upload_id, number, body)

    def verify(self, parts: list[SentPart]) -> None:
        verify_parts(self.fs, self.url, self.upload_id, parts)

    def discard(self) -> None:
        s3.abort(self.fs, self.url, self.upload_id)


def verify_parts(fs: Any, url: str, upload_id: str, sent: list[tuple[int, str, int]],
                 always: bool = False) -> None:
    """What the server holds for this upload is exactly the parts we sent.

    A one-part upload is not listed again: the server checked that part's body
    against the request checksum botocore sends, and its size is checked at
    publish (a request per small file is what small-file throughput is made of).
    Parts copied server-side are always listed (``always``): no body of ours was
    checked, and a server may answer a copy it did not make.
    """
    if len(sent) == 1 and not always:
        return
    held = s3.list_parts(fs, url, upload_id) or {}
    want = {n: (e, size) for n, e, size in sent}
    if held != want:
        raise IntegrityError(f"staged upload of {fsutil.display(url)} holds parts "
                             f"{sorted(held)} but {sorted(want)} were sent", path=url)


def put_whole(fs: Any, url: str, body: bytes, extra: Mapping[str, Any] | None = None) -> Staged:
    """Publish a small file with ONE PutObject.

    The request carries the body's Content-MD5 (S3 refuses other bytes) and the
    answer's ETag must be that MD5; a server whose ETags are not MD5s (SSE-KMS) gets
    a HEAD for the size. An object found wrong is deleted before the error goes up.
    """
    try:
        md5 = hashlib.md5(body)  # one digest for the request and the answer's check
        etag = s3.put(fs, url, body, extra, md5.digest())
        if etag.strip('"') != md5.hexdigest() and not s3.holds(fs, url, len(body)):
            _remove(fs, url)
            raise IntegrityError(f"{fsutil.display(url)}: the server holds other bytes than "
                                 f"the {len(body)} sent (ETag {etag})", path=url)
    except OSError as exc:
        raise DestinationWriteError(f"cannot write {fsutil.display(url)}: {exc}",
                                    path=url) from exc
    return Staged.published(url)


def complete_now(fs: Any, staged: Staged, size: int, parts: Parts,
                 extra: Mapping[str, Any] | None = None) -> Staged:
    """Publish a staged upload (or an empty file) at once.

    The object must have the multipart ETag of exactly our parts (or, on a server
    that gives plain MD5s, our size): the check ``CompleteUploads`` makes at publish.
    """
    upload_id, url = staged.upload_id, staged.location
    try:
        if not upload_id:
            return put_whole(fs, url, b"", extra)
        etag = s3.complete(fs, url, upload_id, parts)
        if etag != s3.multipart_etag([e for _, e, _ in sorted(parts)]) \
                and not s3.holds(fs, url, size, parts):
            _remove(fs, url)
            raise IntegrityError(f"{fsutil.display(url)} does not have the size and ETag "
                                 "of its parts after completing it", path=url)
    except OSError as exc:
        raise DestinationWriteError(f"cannot complete the upload of {fsutil.display(url)}: "
                                    f"{exc}", path=url) from exc
    return Staged.published(url)


def _remove(fs: Any, url: str) -> None:
    """Delete an object found wrong right after it was written (best effort)."""
    try:
        bucket, key = s3.bucket_key(fs, url)
        s3.call(fs, "delete_object", Bucket=bucket, Key=key)
        s3.written(fs, bucket, key)
    except OSError:
        pass


def copy_in(fs: Any, source_url: str, final_url: str, size: int,
            part_size: int, extra: Mapping[str, Any] | None = None) -> StagedStream:
    """S3 -> S3 on one endpoint: UploadPartCopy every range; no byte comes here."""
    if size == 0:
        return StagedStream(Staged.empty(final_url), 0, Digest().hexdigest())
    part_size = s3.part_size_for(size, part_size)
    upload_id = s3.create(fs, final_url, extra)
    parts: list[tuple[int, str, int]] = []
    try:
        for offset in range(0, size, part_size):
            last = min(size, offset + part_size) - 1
            number = len(parts) + 1
            etag = s3.copy_part(fs, final_url, upload_id, number, source_url, offset, last)
            parts.append((number, etag, last - offset + 1))
        verify_parts(fs, final_url, upload_id, parts, always=True)
    except BaseException as exc:
        s3.abort(fs, final_url, upload_id)
        if isinstance(exc, OSError) and not isinstance(exc, ServerSideCopyUnsupported):
            raise DestinationWriteError(f"cannot copy {fsutil.display(source_url)} to "
                                        f"{fsutil.display(final_url)} server-side: {exc}",
                                        path=final_url) from exc
        raise
    return StagedStream(Staged.upload(upload_id, final_url), size, "", tuple(parts), size)


def write_part(fs: Any, staged: Staged, at: RangeAt, source: RangeSource) -> tuple[str, bytes]:
    """One range = one part: S3 needs the whole part in one request, so the part's
    bytes are held in memory (the range size; see docs/guide/copying.md on --split-size). The part
    is listed back, and sent again while another body holds its number."""
    upload_id, final = staged.upload_id, staged.location
    body = bytearray(at.length)
    digest = Digest()
    source.fill(memoryview(body), digest)
    number = at.index + 1
    for _ in range(1 + PART_RESENDS):
        try:
            etag = s3.upload_part(fs, final, upload_id, number, memoryview(body))
        except OSError as exc:
            raise DestinationWriteError(f"cannot stage part {number} of "
                                        f"{fsutil.display(final)}: {exc}", path=final) from exc
        held = (s3.list_parts(fs, final, upload_id) or {}).get(number)
        if held == (etag, at.length):
            return etag, digest.blocks()
    raise IntegrityError(f"part {number} of {fsutil.display(final)} holds "
                         f"{held}, sent {at.length} bytes with ETag {etag} "
                         f"{1 + PART_RESENDS} times", path=final)


def copy_range(fs: Any, staged: Staged, at: RangeAt, source_url: str) -> str:
    """UploadPartCopy of one range into its part of ``staged``; the part's ETag."""
    upload_id, final = staged.upload_id, staged.location
    last = at.offset + at.length - 1
    try:
        return s3.copy_part(fs, final, upload_id, at.index + 1, source_url, at.offset, last)
    except OSError as exc:
        raise DestinationWriteError(f"cannot copy part {at.index + 1} of "
                                    f"{fsutil.display(final)} server-side: {exc}",
                                    path=final) from exc


def pending(fs: Any, files: Sequence[StagedFile]) -> set[str]:
    """Ids of uploads still pending under the files' common prefix (a few LISTs)."""
    finals = [f.final for f in files if f.staged.upload_id]
    if not finals:
        return set()
    prefix = posixpath.dirname(os.path.commonprefix(finals))
    return {upload_id for _, upload_id, _ in s3.uploads(fs, prefix)}


def holds(fs: Any, f: StagedFile) -> bool:
    """The object at ``f.final`` has its size and the ETag of its parts (one HEAD)."""
    return s3.holds(fs, f.final, f.size, f.parts if f.staged.upload_id else ())


def all_published(fs: Any, files: Sequence[StagedFile], pool_size: int) -> bool:
    """No upload of the set is pending and every object is there whole. An upload
    still pending is not done whatever the key holds (an older object of the same
    size must not pass for the new one)."""
    waiting = pending(fs, files)
    if any(f.staged.upload_id in waiting for f in files):
        return False
    return all(_map(files, lambda f: holds(fs, f), pool_size))


def publish_all(fs: Any, files: Sequence[StagedFile],
                after_each: Callable[[StagedFile], None] | None,
                pool_size: int, extra: Mapping[str, Any] | None = None) -> None:
    """Complete each staged upload (PUT each empty file); one no longer pending whose
    object is there whole is done already. The object must then be built from exactly
    our parts (the multipart ETag), or hold them by a HEAD's account."""
    waiting = pending(fs, files)

    def one(f: StagedFile) -> None:
        upload_id = f.staged.upload_id
        if upload_id not in waiting and holds(fs, f):
            return
        etag = ""
        try:
            if upload_id:
                etag = s3.complete(fs, f.final, upload_id, f.parts)
            else:
                s3.put(fs, f.final, b"", extra)
        except FileNotFoundError:
            if not holds(fs, f):  # completed by an interrupted run?
                raise
        expected = s3.multipart_etag([e for _, e, _ in sorted(f.parts)]) if f.parts else ""
        if not (etag and etag == expected) and not holds(fs, f):
            raise PublishError(f"{fsutil.display(f.final)} does not have the size and "
                               "ETag of its staged parts after completing it", file_set="")
        if after_each is not None:
            after_each(f)

    _map(files, one, pool_size)


def _map(files: Sequence[StagedFile], fn: Callable[[StagedFile], T],
         pool_size: int) -> list[T]:
    """``fn`` over the files in a bounded pool: each is a remote round trip."""
    if len(files) <= 1:
        return [fn(f) for f in files]
    with ThreadPoolExecutor(min(pool_size, len(files))) as pool:
        return list(pool.map(request_count.carry(fn), files))
