"""Commit steps whose per-file entries stay in the copy tasks' results files.

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
from typing import ClassVar

from distcp.commit.state import DatasetState, StateStore
from distcp.commit.state_steps import _StateChange
from distcp.commit.steps import CommitContext, CommitStep, PublishFiles
from distcp.copying.resultfiles import moves_of
from distcp.storage import Storage

#: A results file and the staged outputs it lists.
ResultsFile = tuple[str, int]


@dataclass(frozen=True)
class PublishListed(CommitStep):
    """Rename the staged files the results files list to their final paths: per
    results file, a ``PublishFiles`` verified and executed (each rename idempotent:
    done when the staging copy is gone and the final path has the staged size)."""

    kind: ClassVar[str] = "publish-listed"
    per_file: ClassVar[str] = "results"
    min_piece: ClassVar[int] = 1
    results: tuple[ResultsFile, ...]

    def file_count(self) -> int:
        return sum(n for _, n in self.results)

    def works_on(self, ctx: CommitContext) -> Storage:
        return ctx.storage(self.results[0][0])

    def verify(self, ctx: CommitContext) -> bool:
        """Done when every listed file is (stops at the first that is not: a first
        publish reads one results file)."""
        return all(step.verify(ctx) for step in self._steps(ctx))

    def execute(self, ctx: CommitContext) -> None:
        for step in self._steps(ctx):
            if not step.verify(ctx):
                step.execute(ctx)

    def _steps(self, ctx: CommitContext) -> Iterator[PublishFiles]:
        """One PublishFiles per results file, read when its turn comes."""
        for url, _ in self.results:
            yield PublishFiles(tuple(moves_of(url, ctx.dst_options)))


@dataclass(frozen=True)
class AppendManifestListed(_StateChange):
    """``state_steps.AppendManifest`` of the outputs the results files list (and of ``removed``):
    one segment, written a row group at a time."""

    kind: ClassVar[str] = "manifest-listed"
    marker_suffix: ClassVar[str] = "mfl"
    results: tuple[ResultsFile, ...]
    removed: tuple[str, ...] = ()

    def apply(self, state: DatasetState, store: StateStore) -> None:
        store.append_listed(state, self.sequence_id, tuple(u for u, _ in self.results),
                            self.removed)
