"""``move``'s commit step: delete each source once its copy is published (driver and executor).

Appended last to a file set's sequence (after the data, the state and the event), so
a source file is removed only when its destination is published, recorded and found
again with the copied size by this step itself. A crash anywhere before leaves the
source in place (the next run skips or replays); a crash during it leaves some sources
removed, each with its published copy, and the replay finishes the rest. Nothing
here deletes a source that changed since it was listed (another version: the next run
copies it), nor one whose destination is missing or of another size.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from distcp.commit.steps import CommitContext, CommitStep
from distcp.errors import PublishError
from distcp.faults import crash_hook, delay_at
from distcp.mtimes import same_mtime
from distcp.state.bounds import DESTINATION, SOURCE
from distcp.storage import Storage
from distcp.storage import filesystems as fsutil

#: (source URL, its listed size, its listed mtime, ((destination URL, size), ...)).
SourceEntry = tuple[str, int, float, tuple[tuple[str, int], ...]]


@dataclass(frozen=True)
class DeleteSources(CommitStep):
    """Remove moved sources; done when no entry's listed version is still there."""

    kind: ClassVar[str] = "delete-source"
    per_file: ClassVar[str] = "entries"
    entries: tuple[SourceEntry, ...]

    def works_on(self, ctx: CommitContext) -> Storage:
        return ctx.source_storage(self.entries[0][0])

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        for src, _, _, outputs in self.entries:
            yield SOURCE, src
            yield from ((DESTINATION, dst) for dst, _ in outputs)

    def verify(self, ctx: CommitContext) -> bool:
        return not any(_still_there(ctx, src, size, mtime) for src, size, mtime, _ in self.entries)

    def execute(self, ctx: CommitContext) -> None:
        pause = delay_at("mid_move")  # lets a test kill the run mid-deletion
        crash = crash_hook("mid_move")
        for src, size, mtime, outputs in self.entries:
            if not _still_there(ctx, src, size, mtime):
                continue
            for dst, want in outputs:
                _check_destination(ctx, src, dst, want)
            ctx.source_storage(src).remove(src)
            crash(src)
            if pause:  # time.sleep(0) is not free: one per source deleted
                time.sleep(pause)


def _still_there(ctx: CommitContext, src: str, size: int, mtime: float) -> bool:
    """Whether the source version that was copied is still at ``src``."""
    try:
        now = ctx.source_storage(src).stat(src)
    except FileNotFoundError:
        return False
    return now.size == size and same_mtime(now.mtime, mtime)


def _check_destination(ctx: CommitContext, src: str, dst: str, want: int) -> None:
    """Never delete a source whose copy is not where, and as large as, it was published."""
    try:
        got = ctx.storage(dst).entry_size(dst)
    except FileNotFoundError:
        got = None
    if got != want:
        found = "missing" if got is None else f"{got} bytes, not {want}"
        raise PublishError(f"move: {fsutil.display(src)} not deleted: its copy "
                           f"{fsutil.display(dst)} is {found}")


@dataclass(frozen=True)
class RemoveEmptySourceDirs(CommitStep):
    """``--delete-empty-src-dirs``: source directories a move left empty, deepest first
    (rclone's flag). A directory holding anything (a failed or kept file, a file that
    arrived since) stays: done when none of them is there and empty."""

    kind: ClassVar[str] = "delete-empty-source-dirs"
    urls: tuple[str, ...]

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        return ((SOURCE, u) for u in self.urls)

    def verify(self, ctx: CommitContext) -> bool:
        return not any(_empty_dir(ctx, u) for u in self.urls)

    def execute(self, ctx: CommitContext) -> None:
        for url in sorted(self.urls, key=lambda u: -u.rstrip("/").count("/")):
            if _empty_dir(ctx, url):
                ctx.source_storage(url).remove_empty_folder(url)


def _empty_dir(ctx: CommitContext, url: str) -> bool:
    storage = ctx.source_storage(url)
    try:
        return storage.isdir(url) and not storage.names(url)
    except FileNotFoundError:
        return False
