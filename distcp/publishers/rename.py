"""RenamePublisher, the default: staged outputs moved into place per file set (driver).

Staged files are renamed into place, and staged multipart uploads are completed (the
zero-copy publish of S3).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from distcp.commit.steps import (
    CommitSequence,
    CommitStep,
    DeletePaths,
    MakeDirectories,
    PublishFiles,
    RemoveStaging,
    SetAttributes,
    SetOwners,
)
from distcp.commit.upload_steps import CheckDigests, CompleteUploads
from distcp.model import TaskResult
from distcp.publishers.base import FileSetOutcome, Publisher
from distcp.storage import parse_staged


class RenamePublisher(Publisher):
    """delete extras -> mkdirs -> check joined files -> rename staged files / complete
    uploads -> directory attributes -> remove range records.

    Directories are made first so that a destination that cannot take them fails
    the set before any file of it appears at a final path. Object stores have no
    directories: there, empty source directories are dropped (docs/guide/object-stores.md).
    """

    def sequence_for(self, outcome: FileSetOutcome, staging_dirs: Sequence[str]) -> CommitSequence:
        files = [r for r in outcome.results if r.ok and r.staging]
        # Objects a task already published (--visibility file) need no step of their own.
        renamed = [r for r in files if parse_staged(r.staging).needs_rename]
        uploads = [r for r in files if parse_staged(r.staging).needs_complete]
        planned = (
            _delete_extras(outcome),
            _make_directories(outcome, renamed),
            _check_joined(outcome, renamed),
            _rename_staged(renamed),
            _complete_uploads(uploads),
            _set_directory_attributes(outcome),
            _set_directory_owners(outcome),
            _remove_range_records(files),
        )
        steps = tuple(step for step in planned if step is not None)
        return CommitSequence(outcome.dataset_urn, outcome.file_set, steps)


def _delete_extras(outcome: FileSetOutcome) -> CommitStep | None:
    """Extras go first: an entry the source no longer has may stand where a new one lands."""
    return DeletePaths(tuple(outcome.deletes)) if outcome.deletes else None


def _make_directories(outcome: FileSetOutcome, renamed: list[TaskResult]) -> CommitStep | None:
    """Before any file lands, so a destination that cannot take them fails the set
    with no file of it at a final path; object stores have none to make."""
    if not outcome.capabilities.directories:
        return None
    dirs = _directories(outcome, renamed)
    return MakeDirectories(tuple(sorted(dirs))) if dirs else None


def _check_joined(outcome: FileSetOutcome, renamed: list[TaskResult]) -> CommitStep | None:
    """Ranges written into one local file were never checked as a whole: re-read it
    here. Elsewhere the join task (distcp.copying.join) verified what it wrote."""
    if not outcome.capabilities.offset_writes:
        return None
    joined = [r for r in renamed if r.records]
    if not joined:
        return None
    return CheckDigests(tuple((r.staging, r.destination, r.bytes_written, r.checksum)
                              for r in joined))


def _rename_staged(renamed: list[TaskResult]) -> CommitStep | None:
    """Staged files renamed into place: the publish itself on filesystems."""
    if not renamed:
        return None
    return PublishFiles(tuple((r.staging, r.destination, r.bytes_written) for r in renamed))


def _complete_uploads(uploads: list[TaskResult]) -> CommitStep | None:
    """Completing a staged multipart upload is the zero-copy publish of S3."""
    if not uploads:
        return None
    return CompleteUploads(tuple((r.staging, r.destination, r.bytes_written, tuple(r.parts))
                                 for r in uploads))


def _set_directory_attributes(outcome: FileSetOutcome) -> CommitStep | None:
    """After the files: publishing into a directory changes its mtime."""
    attrs = [(d.destination, d.mode, d.mtime) for d in outcome.directories]
    attrs += _archive_dirs(outcome)
    return SetAttributes(tuple(attrs)) if attrs else None


def _set_directory_owners(outcome: FileSetOutcome) -> CommitStep | None:
    """--chown's owner for directories (files were given theirs when staged)."""
    owners = [(d.destination, d.owner, d.group) for d in outcome.directories
              if d.owner is not None or d.group is not None]
    return SetOwners(tuple(owners)) if owners and outcome.capabilities.directories else None


def _remove_range_records(files: list[TaskResult]) -> CommitStep | None:
    """Last: until the set is published, the records let a next run resume its ranges."""
    records = sorted({r.records for r in files if r.records})
    return RemoveStaging(tuple(records)) if records else None


def _directories(outcome: FileSetOutcome, files: list[TaskResult]) -> set[str]:
    made = [r.destination.rstrip("/") for r in outcome.results if r.destination.endswith("/")]
    dirs = {posixpath.dirname(r.destination) for r in files}
    return dirs | {d.destination for d in outcome.directories} | set(made)


def _archive_dirs(outcome: FileSetOutcome) -> list[tuple[str, int | None, float | int | None]]:
    """(path, mode, mtime) of the directories archives hold, set after their files land."""
    return [(r.destination.rstrip("/"), r.mode, r.mtime) for r in outcome.results
            if r.destination.endswith("/") and (r.mode is not None or r.mtime is not None)]
