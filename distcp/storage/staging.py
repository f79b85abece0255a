"""Staging bytes on a storage: the writer of one stream, what comes back (executor).

The engine reads (and hashes) a file's bytes; the storage decides where they go
before the publish: a private file (local disk, any fsspec filesystem) or an
uncompleted multipart upload on the final key (object stores). A ``StageWriter``
takes the bytes, then ``commit`` checks what landed and reports it as a
``StagedStream``, or ``abort`` leaves nothing behind. A range of a split file is
staged the same way from a ``RangeSource`` (``Storage.write_range``).

Values here cross back to the driver inside TaskResults as their text forms; the
writer itself never leaves the task.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from distcp.checksum import Digest
from distcp.storage.staged import Staged
from distcp.values import built_by_plain_stores

#: Parts of a staged upload as (number, ETag, size); empty where staging is a file.
Parts = tuple[tuple[int, str, int], ...]


@dataclass(frozen=True, slots=True)
class StagedStream:
    """What one staged stream became: where it is staged, its bytes and their digest.

    ``staged`` is None for a small file held in memory (``body``) for one PUT once
    the source is checked (per-file visibility); ``body`` never leaves the task.
    ``server_side`` counts the bytes the store copied itself.
    """

    staged: Staged | None
    size: int
    checksum: str
    parts: Parts = ()
    server_side: int = 0
    body: bytes | None = field(default=None, repr=False)

    @property
    def text(self) -> str:
        """The staging marker written in TaskResults ("" while held in memory)."""
        return self.staged.text if self.staged is not None else ""


@built_by_plain_stores
@dataclass(frozen=True, slots=True)
class StagedFile:
    """One staged file of a file set, where it goes, and what must be there after the
    publish: ``size`` bytes (and, for an upload, the object of exactly ``parts``)."""

    staged: Staged
    final: str
    size: int
    parts: Parts = ()


class StageWriter(ABC):
    """One stream being staged; used once: ``write``... then ``commit`` or ``abort``."""

    #: ``copy_file`` can stage a regular local file without the bytes passing here.
    copies_files: ClassVar[bool] = False

    def copy_file(self, fd: int, buffer: bytearray, source: str,
                  fresh: os.stat_result | None = None) -> Digest | None:
        """Stage the rest of the regular local file ``fd`` without the bytes passing
        through Python, where this storage can (local disk: the kernel copies); the
        digest of what was read, or None when the engine must write the bytes itself.
        ``fresh``: ``fd``'s status, when it was just opened and is read no further."""
        return None

    #: ``keep_attributes`` is asked before the first ``write``: the attributes go up
    #: with the bytes (an object's metadata, in its upload request).
    attributes_with_bytes: ClassVar[bool] = False

    def keep_attributes(self, mode: int | None, mtime: float | None) -> bool:
        """Give the staged copy ``mode`` and ``mtime`` before ``commit``, where that is
        cheaper than the storage's ``set_staged_attributes`` after it; False: not done."""
        return False

    @abstractmethod
    def write(self, chunk: memoryview) -> None:
        """Stage the next bytes of the stream (``chunk`` is reused by the caller)."""

    @abstractmethod
    def commit(self, digest: Digest, buffer: bytearray) -> StagedStream:
        """Finish and check what landed against the ``digest`` of what was read;
        on any failure nothing is left staged and the error names the staging."""

    @abstractmethod
    def abort(self) -> None:
        """Leave nothing staged (the stream or the destination failed); quiet."""

    @abstractmethod
    def failure(self, exc: OSError) -> Exception:
        """The error to report for ``exc``, raised while staging, in this storage's
        words (``exc`` itself when the destination was not touched yet)."""


@dataclass(frozen=True, slots=True)
class RangeAt:
    """One range of a split file: its index (part ``index + 1``), offset and length."""

    index: int
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class WrittenRange:
    """A range as staged: its part's ETag (uploads), the block digests of the bytes
    read, and its part file's name (part-file storages), the fields of its record."""

    etag: str
    blocks: bytes
    part: str = ""


class RangeSource(Protocol):
    """The source side of one range, read and hashed by the engine: the storage pulls
    the bytes in the shape it writes them (chunks, one whole part, or a kernel copy)."""

    @property
    def url(self) -> str:
        """The source's URL (error messages)."""

    def regular_fd(self) -> int | None:
        """The descriptor of a regular local source file (kernel copies), else None."""

    def chunks(self, view: memoryview, digest: Digest) -> Iterator[memoryview]:
        """The range's bytes in ``view``-sized chunks, hashed into ``digest``."""

    def fill(self, view: memoryview, digest: Digest) -> None:
        """Exactly ``len(view)`` bytes of the range into ``view``, hashed into ``digest``."""

    def copied(self, count: int) -> None:
        """``count`` bytes of the source were copied without passing through ``chunks``."""
