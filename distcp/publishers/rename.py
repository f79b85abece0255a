"""RenamePublisher: the default; staged files are renamed into place per file set,
and staged multipart uploads are completed (the zero-copy publish of S3)."""

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
)
from distcp.commit.upload_steps import CheckDigests, CompleteUploads
from distcp.model import TaskResult
from distcp.publishers.base import FileSetOutcome, Publisher
from distcp.storage import parse_staged


class RenamePublisher(Publisher):
    """mkdirs -> delete extras -> check joined files -> rename staged files / complete
    uploads -> directory attributes -> remove range records.

    Directories are made first so that a destination that cannot take them fails
    the set before any file of it appears at a final path. Object stores have no
    directories: there, empty source directories are dropped (README, S3 section).
    """

    def sequence_for(self, outcome: FileSetOutcome, staging_dirs: Sequence[str]) -> CommitSequence:
        files = [r for r in outcome.results if r.ok and r.staging]
        # Objects a task already published (--visibility file) need no step of their own.
        uploads = [r for r in files if parse_staged(r.staging).needs_complete]
        renamed = [r for r in files if parse_staged(r.staging).needs_rename]
        steps: list[CommitStep] = []
        if outcome.deletes:
            steps.append(DeletePaths(tuple(outcome.deletes)))
        if outcome.capabilities.directories:
            dirs = _directories(outcome, renamed)
            if dirs:
                steps.append(MakeDirectories(tuple(sorted(dirs))))
        # Ranges written into one local file were never checked as a whole: re-read it
        # here. Elsewhere the join task (distcp.copying.join) verified what it wrote.
        offsets = outcome.capabilities.offset_writes
        joined = [r for r in renamed if r.records and offsets]
        if joined:
            steps.append(CheckDigests(tuple((r.staging, r.destination, r.bytes_written,
                                             r.checksum) for r in joined)))
        if renamed:
            steps.append(PublishFiles(tuple((r.staging, r.destination, r.bytes_written)
                                            for r in renamed)))
        if uploads:
            steps.append(CompleteUploads(tuple((r.staging, r.destination, r.bytes_written,
                                                tuple(r.parts)) for r in uploads)))
        attrs = [(d.destination, d.mode, d.mtime) for d in outcome.directories]
        attrs += _archive_dirs(outcome)
        if attrs:
            steps.append(SetAttributes(tuple(attrs)))
        records = sorted({r.records for r in files if r.records})
        if records:
            steps.append(RemoveStaging(tuple(records)))
        return CommitSequence(outcome.dataset_urn, outcome.file_set, tuple(steps))


def _directories(outcome: FileSetOutcome, files: list[TaskResult]) -> set[str]:
    made = [r.destination.rstrip("/") for r in outcome.results if r.destination.endswith("/")]
    dirs = {posixpath.dirname(r.destination) for r in files}
    return dirs | {d.destination for d in outcome.directories} | set(made)


def _archive_dirs(outcome: FileSetOutcome) -> list[tuple[str, int | None, float | int | None]]:
    """(path, mode, mtime) of the directories archives hold, set after their files land."""
    return [(r.destination.rstrip("/"), r.mode, r.mtime) for r in outcome.results
            if r.destination.endswith("/") and (r.mode is not None or r.mtime is not None)]
