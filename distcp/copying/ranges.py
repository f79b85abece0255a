"""Copy one byte range of a split file into the file's shared staging (executor).

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
from collections.abc import Iterator
from typing import Any

from distcp.checksum import Digest
from distcp.copying.results import ResultKey, failed
from distcp.copying.sources import open_source, recheck_source
from distcp.copying.taskspec import TaskSpec
from distcp.copying.writer import SourceReader
from distcp.errors import SourceReadError
from distcp.faults import crash_point
from distcp.model import CopyableFile, Split, TaskResult
from distcp.storage import filesystems as fsutil
from distcp.storage import parse_staged
from distcp.storage.atomic import write_atomic
from distcp.storage.errors import ServerSideCopyUnsupported
from distcp.storage.staging import RangeAt


def copy_range(file: CopyableFile, split: Split, spec: TaskSpec, key: ResultKey,
               buffer: bytearray) -> TaskResult:
    """Copy ``split`` of ``file``; a failure is a failed TaskResult, as for whole files."""
    reader: SourceReader | None = None
    try:
        copied = _copy_server_side(file, split, spec) if spec.server_side else None
        if copied is not None:
            etag, blocks, part, read = copied, b"", "", 0
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


def _write(reader: SourceReader, file: CopyableFile, split: Split, spec: TaskSpec,
           buffer: bytearray, attempt: str) -> tuple[str, bytes, str]:
    """(part ETag, block digests, part file name) of the range as written: the storage
    stages it its way (a part of the upload, bytes at their offset, a part file)."""
    written = spec.dst.open().write_range(
        parse_staged(split.staging), RangeAt(split.index, split.offset, split.length),
        RangeReader(reader, file, split), buffer, spec.verify, split.records, attempt)
    return written.etag, written.blocks, written.part


class RangeReader:
    """The source side of one range (a ``RangeSource``): its bytes, hashed on the way;
    a source that ends early is a SourceReadError naming it."""

    def __init__(self, reader: SourceReader, file: CopyableFile, split: Split) -> None:
        self.reader, self.file, self.split = reader, file, split

    @property
    def url(self) -> str:
        return self.reader.url

    def regular_fd(self) -> int | None:
        return self.reader.regular_fd()

    def copied(self, count: int) -> None:
        self.reader.count += count

    def fill(self, view: memoryview, digest: Digest) -> None:
        pos = 0
        while pos < len(view):
            n = self.reader.readinto(view[pos:])
            if not n:
                raise SourceReadError(f"source changed while copying: "
                                      f"{fsutil.display(self.file.origin.url)} ended before "
                                      "its listed size", path=self.file.origin.url)
            digest.update(view[pos:pos + n])
            pos += n

    def chunks(self, view: memoryview, digest: Digest) -> Iterator[memoryview]:
        pos, length = 0, self.split.length
        while pos < length:
            n = self.reader.readinto(view[:min(len(view), length - pos)])
            if not n:
                raise SourceReadError(f"source ended before its listed size: "
                                      f"{fsutil.display(self.reader.url)}", path=self.reader.url)
            digest.update(view[:n])
            yield view[:n]
            pos += n


def _copy_server_side(file: CopyableFile, split: Split, spec: TaskSpec) -> str | None:
    """The range copied by the store into its staging; None where the store cannot copy
    a range (``ServerSideCopyUnsupported``: GCS rewrites whole objects only, Azurite has
    no Put Block From URL), and the range's bytes come through the task instead."""
    try:
        return spec.dst.open().copy_range(parse_staged(split.staging),
                                          RangeAt(split.index, split.offset, split.length),
                                          file.origin.url)
    except ServerSideCopyUnsupported:
        return None
