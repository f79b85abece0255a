"""The values that travel between planning, executors and the commit log (driver and executor).

Every type here is a frozen, slotted dataclass of plain fields (str, int, float,
tuples of the same) so it pickles cheaply and identically in every process; none
holds a filesystem object, handle or client. Executors rebuild those from URLs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal

from distcp.values import built_by_plain_stores, pickled_as_arguments

Status = Literal["ok", "failed"]


@pickled_as_arguments
@built_by_plain_stores
@dataclass(frozen=True, slots=True)
class FileStatus:
    """What a listing knows about one origin file or directory."""

    url: str
    size: int
    mtime: float
    mode: int | None = None
    owner: str | None = None
    group: str | None = None
    checksum: str | None = None
    is_dir: bool = False
    mtime_ns: int | None = None  # exact, where the filesystem has it (float seconds lose µs)
    #: The object store's version tag from the listing (S3 ETag): a read can demand it
    #: (GET If-Match) and so needs no HEAD before or after. Not part of the guid.
    etag: str | None = None
    #: A symbolic link copied as a link (``--links copy``): its target text, verbatim.
    #: ``size`` and ``mtime`` are then the link's own (lstat), not its target's.
    link_target: str | None = None


@pickled_as_arguments
@built_by_plain_stores
@dataclass(frozen=True, slots=True)
class CopyableFile:
    """Everything an executor needs to copy one file, and the publisher to place it.

    ``destination`` is the final URL after converter renames; ``mode``/``owner``/
    ``group`` are the wanted attributes (None: leave the filesystem's default).
    """

    origin: FileStatus
    destination: str
    dataset_urn: str
    file_set: str
    mode: int | None = None
    owner: str | None = None
    group: str | None = None
    preserve: str = "pt"
    converters: tuple[str, ...] = ()

    @property
    def guid(self) -> str:
        """sha1 of origin url, length, mtime and checksum: stable across runs.

        Two CopyableFiles with the same guid describe the same origin bytes, which
        is what lets a later run reuse a copy that was staged but not published.
        """
        o = self.origin
        key = f"{o.url}\x00{o.size}\x00{o.mtime!r}\x00{o.checksum or ''}"
        if o.link_target is not None:  # a kept staged link must hold the same text
            key += f"\x00link\x00{o.link_target}"
        return hashlib.sha1(key.encode("utf-8", "surrogateescape")).hexdigest()


@pickled_as_arguments
@built_by_plain_stores
@dataclass(frozen=True, slots=True)
class CopyableDirectory:
    """A directory to reproduce at the destination (empty ones included)."""

    origin: FileStatus
    destination: str
    dataset_urn: str
    file_set: str
    mode: int | None = None
    mtime: float | int | None = None  # int: nanoseconds (exact), float: seconds
    #: --chown's owner and group (names or numeric ids; None: leave as created).
    owner: str | None = None
    group: str | None = None


@pickled_as_arguments
@built_by_plain_stores
@dataclass(frozen=True, slots=True)
class FileSet:
    """The unit published whole or not at all, e.g. one partition of one dataset."""

    dataset_urn: str
    name: str
    destination_root: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.dataset_urn, self.name)


@pickled_as_arguments
@built_by_plain_stores
@dataclass(frozen=True, slots=True)
class Split:
    """One byte range of a file that is copied by several tasks.

    ``staging`` is shared by every range of the file: the local staging file the
    ranges are written into at their offsets, or the staged multipart upload
    (``s3-upload:<id>:<final url>``) whose part ``index + 1`` this range is.
    ``records`` is the folder (``<state>/splits/<guid>``) where a range that was
    written and verified leaves its record, so that a later run resumes the file.
    """

    index: int
    count: int
    offset: int
    length: int
    staging: str = ""
    records: str = ""


@pickled_as_arguments
@built_by_plain_stores
@dataclass(frozen=True, slots=True)
class WorkUnit:
    """What one Spark task does: several small files packed together, or one split."""

    unit_id: int
    files: tuple[CopyableFile, ...]
    split: Split | None = None
    #: Guids of the files whose objects appear as soon as they are copied (per-file
    #: visibility, ``distcp.planning.visibility``), instead of when their file set is published.
    publish_now: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return self.split.length if self.split else sum(f.origin.size for f in self.files)


@pickled_as_arguments
@built_by_plain_stores
@dataclass(frozen=True, slots=True)
class TaskResult:
    """One output file of one task attempt, success or failure, as data.

    A converter that expands an archive yields several results for one origin
    (same ``guid``, different ``destination``). Failures carry the error's type
    name and message because Spark would carry an exception only as a string.
    """

    guid: str
    unit_id: int
    attempt: str
    origin: str
    destination: str
    dataset_urn: str
    file_set: str
    status: Status
    staging: str = ""
    bytes_read: int = 0
    bytes_written: int = 0
    checksum: str = ""
    error_type: str = ""
    message: str = ""
    retryable: bool = False
    mode: int | None = field(default=None)
    #: Split ranges: the range's index (-1: a whole file) and its block digests (hex).
    split_index: int = -1
    blocks: str = ""
    #: Staged multipart uploads: (part number, ETag, size) of each part.
    parts: tuple[tuple[int, str, int], ...] = ()
    #: A whole split file: the folder of its range records, removed once it is published.
    records: str = ""
    #: Bytes the store copied itself (S3 UploadPartCopy): none went through the task.
    bytes_server_side: int = 0
    #: A directory an archive holds: its mtime (int: nanoseconds, float: seconds).
    mtime: float | int | None = None
    #: S3 requests sent for this file, by kind (``distcp.request_count``); a task's
    #: first result also carries the task's own (its progress documents).
    requests: tuple[tuple[str, int], ...] = ()
    #: A symbolic link staged as a link (``--links copy``): its target text.
    link_target: str | None = None
    #: The fork branch this output belongs to ("": a run without ``--fork``).
    branch: str = ""
    #: The fork's queue statistics of this file's branch, as (name, value) pairs
    #: (``distcp.fork.tee.QueueStats``), on the branch's first result of the file.
    queue: tuple[tuple[str, float], ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"
