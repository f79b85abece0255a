"""Commit steps that publish staged multipart uploads and check joined files.

``CompleteUploads`` is the zero-copy publish of object stores: completing an
upload makes the object appear whole, in one request, with no byte copied.
Its ``verify()`` judges from the object's observed state (size and the
multipart ETag the completed parts must give), so a replay after a crash
between complete and the removal of the sequence does nothing twice.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar

from distcp import request_count
from distcp.checksum import Digest, digest_of_stream
from distcp.commit.steps import REMOTE_POOL, CommitContext, CommitStep
from distcp.storage import holes
from distcp.errors import PublishError
from distcp.faults import crash_point
from distcp.storage import Storage, parse_staged, s3, storage_for
from distcp.storage import filesystems as fsutil
from distcp.storage.local import os_path

#: (staging marker, final URL, size, parts as (number, ETag, size))
Upload = tuple[str, str, int, tuple[tuple[int, str, int], ...]]


@dataclass(frozen=True)
class CompleteUploads(CommitStep):
    """Complete each staged upload (or PUT an empty file) at its final key.

    An upload still listed as pending is not done whatever the key holds (an
    older object of the same size must not pass for the new one); one that is no
    longer pending is done when the object has its size and multipart ETag.
    """

    kind: ClassVar[str] = "s3-complete"
    uploads: tuple[Upload, ...]

    def verify(self, ctx: CommitContext) -> bool:
        pending = _pending(ctx, self.uploads)
        if any(parse_staged(u[0]).upload_id in pending for u in self.uploads):
            return False
        return all(_map(ctx, self.uploads, lambda u: _published(ctx, u)))

    def execute(self, ctx: CommitContext) -> None:
        pending = _pending(ctx, self.uploads)

        def one(upload: Upload) -> None:
            staging, final, _, parts = upload
            upload_id = parse_staged(staging).upload_id
            fs, _ = ctx.fs(final)
            if upload_id not in pending and _published(ctx, upload):
                return
            etag = ""
            try:
                if upload_id:
                    etag = s3.complete(fs, final, upload_id, parts)
                else:
                    s3.put(fs, final, b"")
            except FileNotFoundError:
                if not _published(ctx, upload):  # completed by an interrupted run?
                    raise
            expected = s3.multipart_etag([e for _, e, _ in sorted(parts)]) if parts else ""
            if etag and etag == expected:
                pass  # the server built the object from exactly our parts
            elif not _published(ctx, upload):  # the whole object, as S3 now holds it
                raise PublishError(f"{fsutil.display(final)} does not have the size and "
                                   "ETag of its staged parts after completing it", file_set="")
            crash_point("mid_publish")

        _map(ctx, self.uploads, one)


def _map(ctx: CommitContext, uploads: tuple[Upload, ...], fn: Callable[[Upload], Any]) -> list:
    """``fn`` over the uploads in a bounded pool: each is a remote round trip."""
    if len(uploads) <= 1:
        return [fn(u) for u in uploads]
    with ThreadPoolExecutor(min(REMOTE_POOL, len(uploads))) as pool:
        return list(pool.map(request_count.carry(fn), uploads))


def _pending(ctx: CommitContext, uploads: tuple[Upload, ...]) -> set[str]:
    """Ids of uploads still pending under the uploads' common prefix (a few LISTs)."""
    finals = [u[1] for u in uploads if parse_staged(u[0]).upload_id]
    if not finals:
        return set()
    prefix = posixpath.dirname(os.path.commonprefix(finals))
    fs, _ = ctx.fs(finals[0])
    return {upload_id for _, upload_id, _ in s3.uploads(fs, prefix)}


def _published(ctx: CommitContext, upload: Upload) -> bool:
    staging, final, size, parts = upload
    fs, _ = ctx.fs(final)
    return s3.holds(fs, final, size, parts if parse_staged(staging).upload_id else ())


@dataclass(frozen=True)
class CheckDigests(CommitStep):
    """Re-read files joined from ranges and compare with the ranges' composite digest.

    ``entries`` are (staging URL, final URL, size, digest). A file already
    published (staging gone, final of the right size) passes.
    """

    kind: ClassVar[str] = "check-digest"
    entries: tuple[tuple[str, str, int, str], ...]

    def verify(self, ctx: CommitContext) -> bool:
        return not self._bad(ctx)

    def execute(self, ctx: CommitContext) -> None:
        bad = self._bad(ctx)
        if bad:
            raise PublishError(f"joined file differs from its ranges: "
                               f"{', '.join(fsutil.display(b) for b in bad)}; its ranges are "
                               "copied again by the next run", file_set="")

    def _bad(self, ctx: CommitContext) -> list[str]:
        bad = []
        buffer = bytearray(8 << 20)
        for staging, final, size, digest in self.entries:
            storage = ctx.storage(staging)
            if not storage.exists(staging):
                if not _final_has(ctx, final, size):
                    bad.append(final)
                continue
            got = _digest_of(storage, staging, buffer)
            if got.size != size or got.hexdigest() != digest:
                bad.append(final)
        return bad


def _digest_of(storage: Storage, url: str, buffer: bytearray) -> Digest:
    """A local joined file's holes hash as zeros unread (a sparse file stays cheap)."""
    if storage.capabilities.local_paths:
        return holes.digest_of_file(os_path(url), buffer)
    fs, path = storage.fs(url)
    with fs.open(path, "rb") as f:
        return digest_of_stream(f, buffer)


def _final_has(ctx: CommitContext, url: str, size: int) -> bool:
    try:
        return ctx.storage(url).entry_size(url) == size
    except FileNotFoundError:
        return False


def abort_uploads(stagings: list[str], options: dict[str, Any]) -> None:
    """Abort staged uploads that will not be published (their file set failed)."""
    for staging in stagings:
        staged = parse_staged(staging)
        storage_for(staged.location, options).discard(staged)
