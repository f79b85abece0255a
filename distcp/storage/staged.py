"""A staged file as a typed value, and its one text form (driver and executor).

Tasks, the journal and the commit log carry a staged file as a string (a plain
staging URL, or ``s3-upload:<id>:<final url>``, ``s3-empty:<final url>``,
``s3-published:<final url>`` on object stores). That text is written and parsed
here only, so state written by earlier versions still replays while the engine
asks typed questions (``needs_rename``, ``needs_complete``...) instead of testing
prefixes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from distcp.values import built_by_plain_stores

UPLOAD_PREFIX = "s3-upload:"
#: A 0-byte file is staged as nothing at all and published with one PUT (never an MPU).
EMPTY_PREFIX = "s3-empty:"
#: An object already at its final key, whole (``--visibility file``).
PUBLISHED_PREFIX = "s3-published:"


#: Where an upload's id ends and its final URL begins (``:s3://``, ``:abfs://``...):
#: ids may hold colons, never ``://``.
_FINAL_URL = re.compile(r":[a-z][a-z0-9+.-]*://")


class StagedKind(Enum):
    """How a staged file becomes visible at its final path."""

    #: A file at a staging path: publishing renames (or moves) it.
    PATH = "path"
    #: An uncompleted multipart upload on its final key: publishing completes it.
    UPLOAD = "upload"
    #: An empty file not written anywhere yet: publishing writes it with one PUT.
    EMPTY = "empty"
    #: Already whole at its final key: nothing left to publish or to discard.
    PUBLISHED = "published"


@built_by_plain_stores
@dataclass(frozen=True, slots=True)
class Staged:
    """One staged file: its kind, where it is, and (uploads) the upload's id.

    ``location`` is the staging URL of a PATH and the final URL of the other kinds.
    """

    kind: StagedKind
    location: str
    upload_id: str = ""

    @staticmethod
    def path(url: str) -> Staged:
        return Staged(StagedKind.PATH, url)

    @staticmethod
    def upload(upload_id: str, final_url: str) -> Staged:
        return Staged(StagedKind.UPLOAD, final_url, upload_id)

    @staticmethod
    def empty(final_url: str) -> Staged:
        return Staged(StagedKind.EMPTY, final_url)

    @staticmethod
    def published(final_url: str) -> Staged:
        return Staged(StagedKind.PUBLISHED, final_url)

    @property
    def needs_rename(self) -> bool:
        """Published by moving a staging file to its final path."""
        return self.kind is StagedKind.PATH

    @property
    def needs_complete(self) -> bool:
        """Published inside the object store (complete an upload, PUT an empty file)."""
        return self.kind in (StagedKind.UPLOAD, StagedKind.EMPTY)

    @property
    def is_published(self) -> bool:
        """Already visible at its final path: a task published it (per-file visibility)."""
        return self.kind is StagedKind.PUBLISHED

    @property
    def in_store(self) -> bool:
        """Lives in the object store rather than at a staging path (not a file to keep)."""
        return self.kind is not StagedKind.PATH

    @property
    def final(self) -> str:
        """The final URL of a staged upload, empty or published object ("" for a PATH)."""
        return "" if self.kind is StagedKind.PATH else self.location

    @property
    def text(self) -> str:
        """The form written in TaskResults, the journal and the commit log."""
        if self.kind is StagedKind.UPLOAD:
            return f"{UPLOAD_PREFIX}{self.upload_id}:{self.location}"
        if self.kind is StagedKind.EMPTY:
            return EMPTY_PREFIX + self.location
        if self.kind is StagedKind.PUBLISHED:
            return PUBLISHED_PREFIX + self.location
        return self.location


#: The prefixes of every kind but a PATH (a plain staging URL).
NOT_A_PATH = (UPLOAD_PREFIX, EMPTY_PREFIX, PUBLISHED_PREFIX)


def is_path(text: str) -> bool:
    """``parse_staged(text).needs_rename`` without making the value: asked of each row
    of a results file (300,000 values made and dropped took 0.9 s, profiled)."""
    return not text.startswith(NOT_A_PATH)


def parse_staged(text: str) -> Staged:
    """The value a ``staging`` string written by this or an earlier version stands for."""
    if is_path(text):
        return Staged.path(text)
    if text.startswith(EMPTY_PREFIX):
        return Staged.empty(text[len(EMPTY_PREFIX):])
    if text.startswith(PUBLISHED_PREFIX):
        return Staged.published(text[len(PUBLISHED_PREFIX):])
    found = _FINAL_URL.search(text, len(UPLOAD_PREFIX))  # the one prefix left: an upload
    if found is None:
        raise ValueError(f"not a staged upload: {text!r}")
    return Staged.upload(text[len(UPLOAD_PREFIX):found.start()], text[found.start() + 1:])
