"""RenamePublisher: the default; staged files are renamed into place per file set."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from distcp.commit import (
    CommitSequence,
    CommitStep,
    DeletePaths,
    MakeDirectories,
    PublishFiles,
    SetAttributes,
)
from distcp.publishers.base import FileSetOutcome, Publisher


class RenamePublisher(Publisher):
    """mkdirs -> delete extras -> rename staged files -> directory attributes.

    Directories are made first so that a destination that cannot take them fails
    the set before any file of it appears at a final path.
    """

    def sequence_for(self, outcome: FileSetOutcome, staging_dirs: Sequence[str]) -> CommitSequence:
        files = [r for r in outcome.results if r.ok and r.staging]
        made = [r.destination.rstrip("/") for r in outcome.results if r.destination.endswith("/")]
        dirs = {posixpath.dirname(r.destination) for r in files}
        dirs |= {d.destination for d in outcome.directories} | set(made)
        steps: list[CommitStep] = []
        if outcome.deletes:
            steps.append(DeletePaths(tuple(outcome.deletes)))
        if dirs:
            steps.append(MakeDirectories(tuple(sorted(dirs))))
        if files:
            moves = tuple((r.staging, r.destination, r.bytes_written) for r in files)
            steps.append(PublishFiles(moves))
        attrs = [(d.destination, d.mode, d.mtime) for d in outcome.directories]
        attrs += [(u, m, None) for u, m in _archive_dirs(outcome)]
        if attrs:
            steps.append(SetAttributes(tuple(attrs)))
        return CommitSequence(outcome.dataset_urn, outcome.file_set, tuple(steps))


def _archive_dirs(outcome: FileSetOutcome) -> list[tuple[str, int | None]]:
    return [(r.destination.rstrip("/"), r.mode) for r in outcome.results
            if r.destination.endswith("/") and r.mode is not None]
