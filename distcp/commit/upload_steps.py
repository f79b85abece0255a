"""Commit steps that publish staged multipart uploads and check joined files (driver and executor).

``CompleteUploads`` is the zero-copy publish of object stores: completing an
upload makes the object appear whole, in one request, with no byte copied.
Its ``verify()`` judges from the object's observed state (size and the
multipart ETag the completed parts must give), so a replay after a crash
between complete and the removal of the sequence does nothing twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from distcp.commit.steps import CommitContext, CommitStep, staged_target
from distcp.copying.resultfiles import Upload
from distcp.errors import PublishError
from distcp.faults import crash_hook_or_none
from distcp.state.bounds import DESTINATION
from distcp.storage import filesystems as fsutil
from distcp.storage import parse_staged, storage_for
from distcp.storage.staging import StagedFile


@dataclass(frozen=True)
class CompleteUploads(CommitStep):
    """Complete each staged upload (or PUT an empty file) at its final key.

    An upload still listed as pending is not done whatever the key holds (an
    older object of the same size must not pass for the new one); one that is no
    longer pending is done when the object has its size and multipart ETag.
    """

    kind: ClassVar[str] = "s3-complete"
    per_file: ClassVar[str] = "uploads"
    uploads: tuple[Upload, ...]

    def verify(self, ctx: CommitContext) -> bool:
        if not self.uploads:
            return True
        return ctx.storage(self.uploads[0][1]).all_published(self._files())

    def upload_ids(self, options: dict[str, Any]) -> Iterator[str]:
        return (parse_staged(u[0]).upload_id for u in self.uploads)

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        for staging, final, *_ in self.uploads:
            yield staged_target(staging)
            yield DESTINATION, final

    def execute(self, ctx: CommitContext) -> None:
        if not self.uploads:
            return
        ctx.storage(self.uploads[0][1]).publish_all(
            self._files(), crash_hook_or_none("mid_publish"))

    def staged_files(self, options: dict[str, Any]) -> Iterator[StagedFile]:
        return iter(self._files())

    def _files(self) -> tuple[StagedFile, ...]:
        return tuple(StagedFile(parse_staged(staging), final, size, parts)
                     for staging, final, size, parts in self.uploads)


@dataclass(frozen=True)
class CheckDigests(CommitStep):
    """Re-read files joined from ranges and compare with the ranges' composite digest.

    ``entries`` are (staging URL, final URL, size, digest). A file already
    published (staging gone, final of the right size) passes.
    """

    kind: ClassVar[str] = "check-digest"
    per_file: ClassVar[str] = "entries"
    entries: tuple[tuple[str, str, int, str], ...]

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        for staging, final, _, _ in self.entries:
            yield staged_target(staging)
            yield DESTINATION, final

    def verify(self, ctx: CommitContext) -> bool:
        return not self._bad(ctx)

    def execute(self, ctx: CommitContext) -> None:
        bad = self._bad(ctx)
        if bad:
            raise PublishError(f"joined file differs from its ranges: "
                               f"{', '.join(fsutil.display(b) for b in bad)}; its ranges are "
                               "copied again by the next run", file_set="")

    def _bad(self, ctx: CommitContext) -> list[str]:
        bad = []
        buffer = bytearray(8 << 20)
        for staging, final, size, digest in self.entries:
            storage = ctx.storage(staging)
            if not storage.exists(staging):
                if not _final_has(ctx, final, size):
                    bad.append(final)
                continue
            got = storage.digest_of(staging, buffer)
            if got.size != size or got.hexdigest() != digest:
                bad.append(final)
        return bad


def _final_has(ctx: CommitContext, url: str, size: int) -> bool:
    try:
        return ctx.storage(url).entry_size(url) == size
    except FileNotFoundError:
        return False


def abort_uploads(stagings: list[str], options: dict[str, Any]) -> None:
    """Abort staged uploads that will not be published (their file set failed)."""
    for staging in stagings:
        staged = parse_staged(staging)
        storage_for(staged.location, options).discard(staged)
