"""EXECUTOR: stage a stream as an uncompleted multipart upload on its final key.

The S3 counterpart of ``writer.write_staged``: bytes are hashed in the same
loop and sent as parts of at least 5 MiB (one part for a small file); nothing
is visible at the key until a commit step completes the upload. Any failure
(the source, a part, the watchdog) aborts the upload before the error goes
up, so a failed copy leaves neither an object nor a pending upload. Never
``with fs.open(final, "wb")``: its ``close()`` in ``__exit__`` would publish
the partial object (PITFALLS.md).
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from distcp import fs as fsutil
from distcp import s3
from distcp.checksum import Digest
from distcp.errors import CopyError, DestinationWriteError, IntegrityError


@dataclass(frozen=True, slots=True)
class StagedUpload:
    """What was staged: the marker, the bytes, their digest and the parts sent."""

    staging: str
    size: int
    checksum: str
    parts: tuple[tuple[int, str, int], ...] = ()
    server_side: int = 0


def stage_upload(stream: Any, final_url: str, options: dict[str, Any], buffer: bytearray,
                 size_hint: int) -> StagedUpload:
    """Read ``stream`` to its end into a new upload on ``final_url``."""
    fs, _ = fsutil.filesystem(final_url, options)
    final_url = fsutil.to_url(fs, fs._strip_protocol(final_url))
    digest = Digest()
    view = memoryview(buffer)
    first = _read(stream, view)
    if not first:
        return StagedUpload(s3.EMPTY_PREFIX + final_url, 0, digest.hexdigest())
    part_size = s3.part_size_for(size_hint, max(len(buffer), s3.MIN_PART))
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
    return StagedUpload(s3.staged_upload(upload_id, final_url), digest.size,
                        digest.hexdigest(), tuple(parts))


def _read(stream: Any, view: memoryview) -> bytes:
    readinto = getattr(stream, "readinto", None)
    if readinto is None:
        return bytes(stream.read(len(view)))
    n = readinto(view)
    return bytes(view[:n]) if n else b""


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
                    s3.upload_part, fs, url, upload_id, number, body)))
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
        return StagedUpload(s3.EMPTY_PREFIX + final_url, 0, Digest().hexdigest())
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
    return StagedUpload(s3.staged_upload(upload_id, final_url), size, "", tuple(parts), size)
