"""EXECUTOR: copy one byte range of a split file into the file's shared staging.

A file larger than ``--split-size`` is copied by several tasks, one range each
(seed 003's block-level work units). On S3 a range is one part (number
``index + 1``) of the multipart upload the driver created for the file; on a
local filesystem it is written at its offset into one staging file; on other
filesystems (FTP, SFTP, ...: no writes at an offset, no multipart uploads) it is
its own part file, ``p<index>-<attempt>`` beside the records, which a join task
concatenates later (``distcp.copying.join``). A range that was written and verified
leaves a record (its block digests, part ETag or part file name) in
``<state>/splits/<guid>/r<index>.json``: a later run reuses it instead of
sending those bytes again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from distcp.checksum import Digest, digest_of_stream
from distcp.copying import holes, localcopy
from distcp.copying.results import ResultKey, failed
from distcp.copying.sources import open_source, recheck_source
from distcp.copying.taskspec import TaskSpec
from distcp.errors import DestinationWriteError, IntegrityError, SourceReadError
from distcp.faults import crash_point
from distcp.model import CopyableFile, Split, TaskResult
from distcp.storage import filesystems as fsutil
from distcp.storage import parse_staged, s3
from distcp.storage.atomic import write_atomic
from distcp.storage.local import os_path

#: Times a part is sent again when the server then holds another body under its
#: number: a late request of a killed earlier attempt of the range can land after
#: ours and replace it (seen once); the last writer wins, so we write again.
PART_RESENDS = 2


def copy_range(file: CopyableFile, split: Split, spec: TaskSpec, key: ResultKey,
               buffer: bytearray) -> TaskResult:
    """Copy ``split`` of ``file``; a failure is a failed TaskResult, as for whole files."""
    reader = None
    try:
        if spec.server_side:
            etag, blocks, read = _copy_server_side(file, split, spec), b"", 0
        else:
            reader = open_source(file, spec)
            reader.seek(split.offset)
            etag, blocks, part = _write(reader, file, split, spec, buffer, key.attempt)
            read = reader.count
        recheck_source(file, spec)
        record = {"index": split.index, "offset": split.offset, "length": split.length,
                  "etag": etag, "blocks": blocks.hex()}
        if part:
            record["part"] = part
        write_atomic(fsutil.join(split.records, f"r{split.index}.json"),
                     json.dumps(record).encode(), spec.dst_options, durable=False)
        crash_point("after_range")
    except Exception as exc:  # noqa: BLE001 - reported as data, like task.copy_file
        return failed(key.result(file.destination, split_index=split.index,
                                 bytes_read=reader.count if reader else 0), exc)
    finally:
        if reader is not None:
            reader.close()
    return range_result(file, split, key, record, read)


def range_result(file: CopyableFile, split: Split, key: ResultKey,
                 record: dict[str, Any], bytes_read: int) -> TaskResult:
    """The TaskResult of a range, from its record (also for ranges a run resumes)."""
    parts = ((split.index + 1, record["etag"], split.length),) if record["etag"] else ()
    return key.result(file.destination, staging=split.staging, bytes_read=bytes_read,
                      bytes_written=split.length, split_index=split.index,
                      blocks=record["blocks"], parts=parts,
                      bytes_server_side=0 if record["blocks"] else split.length)


def _write(reader: Any, file: CopyableFile, split: Split, spec: TaskSpec, buffer: bytearray,
           attempt: str) -> tuple[str, bytes, str]:
    """(part ETag, block digests, part file name) of the range as written."""
    if parse_staged(split.staging).needs_complete:
        return (*_write_part(reader, file, split, spec), "")
    if spec.dst.capabilities.joins_parts:
        name = part_name(split.index, attempt)
        return "", _write_part_file(reader, split, spec, buffer, name), name
    return "", _write_local(reader, split, spec, buffer), ""


def part_name(index: int, attempt: str) -> str:
    """One part file per range and task attempt: two attempts of a range (a retry,
    speculation) never write the same file; the record names the one it verified."""
    return f"p{index}-{attempt}"


def _read_exactly(reader: Any, view: memoryview, digest: Digest, file: CopyableFile) -> None:
    pos = 0
    while pos < len(view):
        n = reader.readinto(view[pos:])
        if not n:
            raise SourceReadError(f"source changed while copying: {fsutil.display(file.origin.url)}"
                                  f" ended before its listed size", path=file.origin.url)
        digest.update(view[pos:pos + n])
        pos += n


def _write_part(reader: Any, file: CopyableFile, split: Split, spec: TaskSpec) -> tuple[str, bytes]:
    """One range = one part: S3 needs the whole part in one request, so the part's
    bytes are held in memory (the range size; see README on --split-size)."""
    staged = parse_staged(split.staging)
    upload_id, final = staged.upload_id, staged.location
    fs, _ = fsutil.filesystem(final, spec.dst_options)
    body = bytearray(split.length)
    digest = Digest()
    _read_exactly(reader, memoryview(body), digest, file)
    for _ in range(1 + PART_RESENDS):
        try:
            etag = s3.upload_part(fs, final, upload_id, split.index + 1, body)
        except OSError as exc:
            raise DestinationWriteError(f"cannot stage part {split.index + 1} of "
                                        f"{fsutil.display(final)}: {exc}", path=final) from exc
        held = (s3.list_parts(fs, final, upload_id) or {}).get(split.index + 1)
        if held == (etag, split.length):
            return etag, digest.blocks()
    raise IntegrityError(f"part {split.index + 1} of {fsutil.display(final)} holds "
                         f"{held}, sent {split.length} bytes with ETag {etag} "
                         f"{1 + PART_RESENDS} times", path=final)



def _chunks(reader: Any, split: Split, view: memoryview, digest: Digest
            ) -> Iterator[memoryview]:
    """The range's bytes in buffer-sized chunks, hashed on the way; a source that ends
    early is a SourceReadError."""
    pos = 0
    while pos < split.length:
        n = reader.readinto(view[:min(len(view), split.length - pos)])
        if not n:
            raise SourceReadError(f"source ended before its listed size: "
                                  f"{fsutil.display(reader.url)}", path=reader.url)
        digest.update(view[:n])
        yield view[:n]
        pos += n


def _write_part_file(reader: Any, split: Split, spec: TaskSpec, buffer: bytearray,
                     name: str) -> bytes:
    """The range as its own file, written in buffer-sized blocks (one request each on
    FTP), then checked: its size, and with ``--verify digest`` its bytes re-read."""
    url = fsutil.join(split.records, name)
    fs, path = fsutil.filesystem(url, spec.dst_options)
    digest = Digest()
    view = memoryview(buffer)
    try:
        with fs.open(path, "wb", block_size=len(buffer)) as out:
            for chunk in _chunks(reader, split, view, digest):
                out.write(chunk)
        _verify_part_file(fs, path, split, buffer, digest.blocks(), spec.verify)
    except BaseException as exc:
        _remove_quietly(fs, path)
        if isinstance(exc, OSError):
            raise DestinationWriteError(f"cannot write range {split.index} to part file "
                                        f"{fsutil.display(url)}: {exc}", path=url) from exc
        raise
    return digest.blocks()


def _verify_part_file(fs: Any, path: str, split: Split, buffer: bytearray, want: bytes,
                      verify: str) -> None:
    size = fs.size(path)
    if size != split.length:
        raise IntegrityError(f"range {split.index}: part file {fsutil.display(path)} holds "
                             f"{size} bytes, {split.length} were written", path=path)
    if verify != "digest":
        return
    with fs.open(path, "rb", block_size=len(buffer)) as f:
        got = digest_of_stream(f, buffer)
    if got.blocks() != want:
        raise IntegrityError(f"range {split.index}: part file {fsutil.display(path)} differs "
                             "from what was read after writing it", path=path)


def _remove_quietly(fs: Any, path: str) -> None:
    try:
        fs.rm_file(path)
    except Exception:  # noqa: BLE001, S110 - ftplib's errors are no OSError
        pass  # never written, or the filesystem is gone: the folder goes with the split


def _write_local(reader: Any, split: Split, spec: TaskSpec, buffer: bytearray) -> bytes:
    """Write the range at its offset into the shared staging file, then re-read to verify.

    A regular local source goes through the kernel with its holes kept
    (``distcp.copying.localcopy``); any other source through pwrite of what was read.
    """
    path = os_path(split.staging)
    digest = Digest()
    src = reader.regular_fd()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        if src is not None:
            localcopy.copy_span(src, fd, split.offset, split.length, buffer, digest,
                                source=fsutil.display(reader.url))
            reader.count += digest.size
            localcopy.extend_to(fd, split.offset + split.length)
        else:
            pos = split.offset
            for chunk in _chunks(reader, split, memoryview(buffer), digest):
                os.pwrite(fd, chunk, pos)
                pos += len(chunk)
    except OSError as exc:
        raise DestinationWriteError(f"cannot write range {split.index} to staging "
                                    f"{fsutil.display(path)}: {exc}", path=path) from exc
    finally:
        os.close(fd)
    if spec.verify == "digest":
        _verify_local(path, split, buffer, digest.blocks())
    return digest.blocks()


def _verify_local(path: str, split: Split, buffer: bytearray, want: bytes) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        got = holes.digest_span(fd, split.offset, split.length, buffer)
    finally:
        os.close(fd)
    if got.blocks() != want:
        raise IntegrityError(f"range {split.index} of {fsutil.display(path)} differs from what "
                             "was read after writing it", path=path)


def _copy_server_side(file: CopyableFile, split: Split, spec: TaskSpec) -> str:
    staged = parse_staged(split.staging)
    upload_id, final = staged.upload_id, staged.location
    fs, _ = fsutil.filesystem(final, spec.dst_options)
    last = split.offset + split.length - 1
    try:
        return s3.copy_part(fs, final, upload_id, split.index + 1, file.origin.url,
                            split.offset, last)
    except OSError as exc:
        raise DestinationWriteError(f"cannot copy part {split.index + 1} of "
                                    f"{fsutil.display(final)} server-side: {exc}",
                                    path=final) from exc
