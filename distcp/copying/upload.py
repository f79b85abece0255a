"""EXECUTOR: stage a stream as an uncompleted multipart upload on its final key.

The S3 counterpart of ``writer.write_staged``: bytes are hashed in the same
loop and sent as parts of at least 5 MiB (one part for a small file); nothing
is visible at the key until a commit step completes the upload. Any failure
(the source, a part, the watchdog) aborts the upload before the error goes
up, so a failed copy leaves neither an object nor a pending upload. Never
``with fs.open(final, "wb")``: its ``close()`` in ``__exit__`` would publish
the partial object (PITFALLS.md).

With per-file visibility (``--visibility file``) the task publishes each file
itself once its source is checked: a file smaller than one part is held in memory
and sent as ONE PutObject to its final key (``hold_small``, then ``put_whole``),
a bigger one is completed at once (``complete_now``). Either way the object
appears whole or not at all.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from distcp import request_count
from distcp.checksum import Digest
from distcp.errors import CopyError, DestinationWriteError, IntegrityError
from distcp.storage import Staged, parse_staged, s3
from distcp.storage import filesystems as fsutil


@dataclass(frozen=True, slots=True)
class StagedUpload:
    """What was staged: the marker, the bytes, their digest and the parts sent.

    ``body`` is a small file held in memory, not sent yet (``hold_small``): the
    staging marker is then "" until ``put_whole`` publishes it. It never leaves
    the task.
    """

    staging: str
    size: int
    checksum: str
    parts: tuple[tuple[int, str, int], ...] = ()
    server_side: int = 0
    body: bytes | None = field(default=None, repr=False)


def stage_upload(stream: Any, final_url: str, options: dict[str, Any], buffer: bytearray,
                 size_hint: int, *, hold_small: bool = False) -> StagedUpload:
    """Read ``stream`` to its end into a new upload on ``final_url``.

    With ``hold_small``, a stream that ends before one part is full is returned as
    ``body`` instead, for one PutObject once the caller has checked its source.
    """
    fs, _ = fsutil.filesystem(final_url, options)
    final_url = fsutil.to_url(fs, fs._strip_protocol(final_url))
    digest = Digest()
    view = memoryview(buffer)
    part_size = s3.part_size_for(size_hint, max(len(buffer), s3.MIN_PART))
    first = _read_part(stream, view, part_size) if hold_small else _read(stream, view)
    if not first:
        return StagedUpload(Staged.empty(final_url).text, 0, digest.hexdigest())
    if hold_small and len(first) < part_size:
        digest.update(first)
        return StagedUpload("", len(first), digest.hexdigest(), body=first)
    upload_id = s3.create(fs, final_url)
    try:
        parts = _send_parts(fs, final_url, upload_id, stream, view, first, digest, part_size)
        _verify_parts(fs, final_url, upload_id, parts)
    except BaseException as exc:
        s3.abort(fs, final_url, upload_id)
        if isinstance(exc, OSError) and not isinstance(exc, CopyError):
            raise DestinationWriteError(f"cannot stage {fsutil.display(final_url)}: {exc}",
                                        path=final_url) from exc
        raise
    return StagedUpload(Staged.upload(upload_id, final_url).text, digest.size,
                        digest.hexdigest(), tuple(parts))


def _read(stream: Any, view: memoryview) -> bytes:
    readinto = getattr(stream, "readinto", None)
    if readinto is None:
        return bytes(stream.read(len(view)))
    n = readinto(view)
    return bytes(view[:n]) if n else b""


def _read_part(stream: Any, view: memoryview, part_size: int) -> bytes:
    """Up to ``part_size`` bytes, or fewer at the stream's end: short reads (pipes,
    converters) must not make a small file look like a big one."""
    chunks: list[bytes] = []
    held = 0
    while held < part_size:
        chunk = _read(stream, view)
        if not chunk:
            break
        chunks.append(chunk)
        held += len(chunk)
    return b"".join(chunks)


def put_whole(url: str, options: dict[str, Any], body: bytes) -> str:
    """Publish a small file with ONE PutObject; returns its published marker.

    The request carries the body's Content-MD5 (S3 refuses other bytes) and the
    answer's ETag must be that MD5; a server whose ETags are not MD5s (SSE-KMS) gets
    a HEAD for the size. An object found wrong is deleted before the error goes up.
    """
    fs, _ = fsutil.filesystem(url, options)
    url = fsutil.to_url(fs, fs._strip_protocol(url))
    try:
        etag = s3.put(fs, url, body)
        if etag.strip('"') != hashlib.md5(body).hexdigest() and not s3.holds(fs, url, len(body)):
            _remove(fs, url)
            raise IntegrityError(f"{fsutil.display(url)}: the server holds other bytes than "
                                 f"the {len(body)} sent (ETag {etag})", path=url)
    except OSError as exc:
        if isinstance(exc, CopyError):
            raise
        raise DestinationWriteError(f"cannot write {fsutil.display(url)}: {exc}",
                                    path=url) from exc
    return Staged.published(url).text


def complete_now(staging: str, size: int, parts: tuple[tuple[int, str, int], ...],
                 options: dict[str, Any]) -> str:
    """Publish a staged upload (or an empty file) at once; returns its published marker.

    The object must have the multipart ETag of exactly our parts (or, on a server
    that gives plain MD5s, our size): the check ``CompleteUploads`` makes at publish.
    """
    staged = parse_staged(staging)
    upload_id, url = staged.upload_id, staged.location
    fs, _ = fsutil.filesystem(url, options)
    try:
        if not upload_id:
            put_whole(url, options, b"")
            return Staged.published(url).text
        etag = s3.complete(fs, url, upload_id, parts)
        if etag != s3.multipart_etag([e for _, e, _ in sorted(parts)]) \
                and not s3.holds(fs, url, size, parts):
            _remove(fs, url)
            raise IntegrityError(f"{fsutil.display(url)} does not have the size and ETag "
                                 "of its parts after completing it", path=url)
    except OSError as exc:
        if isinstance(exc, CopyError):
            raise
        raise DestinationWriteError(f"cannot complete the upload of {fsutil.display(url)}: "
                                    f"{exc}", path=url) from exc
    return Staged.published(url).text


def _remove(fs: Any, url: str) -> None:
    """Delete an object found wrong right after it was written (best effort)."""
    try:
        bucket, key = s3.bucket_key(fs, url)
        s3.call(fs, "delete_object", Bucket=bucket, Key=key)
    except OSError:
        pass


#: Parts of one file in flight at once: a server's per-request latency is hidden the way
#: ``aws s3 cp`` hides it, at a memory cost of this many parts per task.
PARTS_IN_FLIGHT = 4


def _send_parts(fs: Any, url: str, upload_id: str, stream: Any, view: memoryview, first: bytes,
                digest: Digest, part_size: int) -> list[tuple[int, str, int]]:
    futures: list[tuple[int, int, Future[str]]] = []
    pending, held = [first], len(first)
    digest.update(first)
    with ThreadPoolExecutor(PARTS_IN_FLIGHT) as pool:
        while True:
            chunk = _read(stream, view)
            if chunk:
                digest.update(chunk)
                pending.append(chunk)
                held += len(chunk)
            if held >= part_size or (not chunk and held):
                data = b"".join(pending)
                body, rest = (data[:part_size], data[part_size:]) if chunk else (data, b"")
                number = len(futures) + 1
                futures.append((number, len(body), pool.submit(
                    request_count.carry(s3.upload_part), fs, url, upload_id, number, body)))
                pending, held = ([rest], len(rest)) if rest else ([], 0)
                _wait_window(futures)
            if not chunk:
                return [(n, f.result(), size) for n, size, f in futures]


def _wait_window(futures: list[tuple[int, int, Future[str]]]) -> None:
    """Block until fewer than PARTS_IN_FLIGHT parts are in flight; raise a part's error."""
    running = [f for _, _, f in futures if not f.done()]
    if len(running) >= PARTS_IN_FLIGHT:
        wait(running, return_when=FIRST_COMPLETED)
    for _, _, f in futures:
        if f.done() and f.exception() is not None:
            raise f.exception()  # type: ignore[misc]


def _verify_parts(fs: Any, url: str, upload_id: str, sent: list[tuple[int, str, int]],
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


def stage_server_side(source_url: str, final_url: str, options: dict[str, Any],
                      size: int, part_size: int) -> StagedUpload:
    """S3 -> S3 on one endpoint: UploadPartCopy every range; no byte comes here."""
    fs, _ = fsutil.filesystem(final_url, options)
    final_url = fsutil.to_url(fs, fs._strip_protocol(final_url))
    if size == 0:
        return StagedUpload(Staged.empty(final_url).text, 0, Digest().hexdigest())
    part_size = s3.part_size_for(size, part_size)
    upload_id = s3.create(fs, final_url)
    parts: list[tuple[int, str, int]] = []
    try:
        for offset in range(0, size, part_size):
            last = min(size, offset + part_size) - 1
            number = len(parts) + 1
            etag = s3.copy_part(fs, final_url, upload_id, number, source_url, offset, last)
            parts.append((number, etag, last - offset + 1))
        _verify_parts(fs, final_url, upload_id, parts, always=True)
    except BaseException as exc:
        s3.abort(fs, final_url, upload_id)
        if isinstance(exc, OSError) and not isinstance(exc, (CopyError,
                                                             s3.ServerSideCopyUnsupported)):
            raise DestinationWriteError(f"cannot copy {fsutil.display(source_url)} to "
                                        f"{fsutil.display(final_url)} server-side: {exc}",
                                        path=final_url) from exc
        raise
    return StagedUpload(Staged.upload(upload_id, final_url).text, size, "", tuple(parts), size)
