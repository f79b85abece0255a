"""Commit steps whose per-file entries stay in results files (driver and executor).

A file set whose results never reached the driver (``distcp.copying.resultfiles``) is
published by the same steps as any other, except that its sequence names the results
files instead of holding an entry per file: the commit log entry stays a few KiB for a
million files. Each step reads the files a row group at a time, so neither the driver
nor an executor holds the set; the files stay until the sequence is done (the job's
folders are kept while a commit of the job is pending), so a replay reads them again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from distcp.commit.state_steps import _StateChange
from distcp.commit.steps import (
    CommitContext,
    CommitStep,
    PublishFiles,
    moved_files,
    staged_target,
)
from distcp.commit.upload_steps import CompleteUploads
from distcp.copying.resultfiles import publishing_by_folder, publishing_of, staged_tables
from distcp.faults import crash_hook_or_none
from distcp.state.bounds import DESTINATION, STATE
from distcp.state.store import DatasetState, StateStore
from distcp.storage import Storage, parse_staged
from distcp.storage.staging import StagedFile

#: A results file and the staged outputs it lists.
ResultsFile = tuple[str, int]


@dataclass(frozen=True)
class PublishKept(CommitStep):
    """Publish the staged files the results files list: per results file, a
    ``PublishFiles`` of its renames and a ``CompleteUploads`` of its staged uploads
    (object stores), each idempotent entry by entry: a rename is done when the staging
    copy is gone and the final path has the staged size, an upload when it is no longer
    pending and the object has its size and ETag."""

    kind: ClassVar[str] = "publish-listed"
    per_file: ClassVar[str] = "results"
    min_piece: ClassVar[int] = 1
    #: The results files are this run's copy tasks', whose staged copies nothing has
    #: published before the sequence's first run; ``execute`` skips an entry done
    #: anyway. B's first copy read a results file of 5,000 entries and built their
    #: steps to learn that its first rename was not done (benchmarks/RESULTS.md,
    #: 2026-12-03); an object store's pending uploads were a LIST more.
    new_until_run: ClassVar[bool] = True
    results: tuple[ResultsFile, ...]

    def file_count(self) -> int:
        return sum(n for _, n in self.results)

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        """The results files, then every rename and upload they list (read here: a
        replayed record's files are checked before any of them is published)."""
        for url, _ in self.results:
            yield STATE, url
            moves, uploads = publishing_of(url, options)
            for staging, final, _ in moves:
                yield staged_target(staging)
                yield DESTINATION, final
            for staging, final, *_ in uploads:
                yield staged_target(staging)
                yield DESTINATION, final

    def works_on(self, ctx: CommitContext) -> Storage:
        return ctx.storage(self.results[0][0])

    def verify(self, ctx: CommitContext) -> bool:
        """Done when every listed file is (stops at the first that is not: a first
        publish reads one results file)."""
        return all(step.verify(ctx) for step in self._steps(ctx.dst_options))

    def execute(self, ctx: CommitContext) -> None:
        """Each results file's renames, those of a folder's files grouped by Arrow
        (``publishing_by_folder``: the storage may publish them by one rename), then its
        completes. A rename or complete already done is skipped inside them, so no
        verify first (on an object store that would be a LIST of the pending uploads
        more per results file)."""
        hook = crash_hook_or_none("mid_publish")
        for url, _ in self.results:
            found = publishing_by_folder(url, ctx.dst_options)
            if found is None:  # a name in the escaped form: the steps read it
                for step in self._steps_of(url, ctx.dst_options):
                    step.execute(ctx)
                continue
            folders, moves, uploads = found
            if folders or moves:
                ctx.storage(folders[0].staged if folders else moves[0][0]).publish_all(
                    moved_files(moves), hook, folders)
            CompleteUploads(tuple(uploads)).execute(ctx)

    def upload_ids(self, options: dict[str, Any]) -> Iterator[str]:
        """The staged uploads this step completes: an orphan sweep must leave them."""
        for url, _ in self.results:
            for staging, *_ in publishing_of(url, options)[1]:
                yield parse_staged(staging).upload_id

    def staged_files(self, options: dict[str, Any]) -> Iterator[StagedFile]:
        """Those every results file lists, read when its turn comes (FileNotFoundError
        when a results file is gone: its copies are)."""
        for step in self._steps(options):
            yield from step.staged_files(options)

    def _steps(self, options: dict[str, Any]) -> Iterator[CommitStep]:
        """Per results file, read when its turn comes: its renames, its completes."""
        for url, _ in self.results:
            yield from self._steps_of(url, options)

    @staticmethod
    def _steps_of(url: str, options: dict[str, Any]) -> Iterator[CommitStep]:
        moves, uploads = publishing_of(url, options)
        if moves:
            yield PublishFiles(tuple(moves))
        if uploads:
            yield CompleteUploads(tuple(uploads))


@dataclass(frozen=True)
class AppendManifestKept(_StateChange):
    """``state_steps.AppendManifest`` of the outputs the results files list (and of ``removed``):
    one segment, written a table at a time."""

    kind: ClassVar[str] = "manifest-listed"
    marker_suffix: ClassVar[str] = "mfl"
    results: tuple[ResultsFile, ...]
    removed: tuple[str, ...] = ()

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        return ((STATE, url) for url, _ in self.results)

    def apply(self, state: DatasetState, store: StateStore) -> None:
        staged = (t for url, _ in self.results for t in staged_tables(url, store.options))
        store.append_kept(state, self.sequence_id, staged, self.removed)
