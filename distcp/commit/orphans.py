"""Abort multipart uploads that nothing will ever complete (driver).

A killed task, a lost speculative attempt or a dead driver leaves its staged
uploads pending: invisible, but billed, until aborted. An upload is *orphaned*
when neither a pending commit sequence (which a replay will complete) nor a
split record (which a later run resumes) refers to it. Runs sweep orphans
under their destination before and after copying; ``pydistcp cleanup DST``
does it on demand for uploads older than a threshold.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from distcp.commit.catalog_steps import registration_only
from distcp.commit.log import CommitStepStore, PendingSequence
from distcp.commit.recovery import RecoveryArea
from distcp.mtimes import aged
from distcp.planning.splitting import SplitStore
from distcp.state.layout import StateLayout
from distcp.storage import Storage, parse_staged, storage_for
from distcp.storage import filesystems as fsutil
from distcp.summary import CleanupReport


def referenced_uploads(state_root: str, options: dict[str, Any],
                       splits_older_than: float | None = None,
                       unfinished: list[PendingSequence] | None = None) -> set[str]:
    """Upload ids a pending or set-aside commit, or a live split record, refers to.

    With ``splits_older_than`` (seconds), split records older than that are
    expired instead (their uploads become orphans and their records go).
    ``unfinished``: the commit log's ``unfinished()``, when the caller has just read it.
    """
    if unfinished is None:
        unfinished = CommitStepStore(state_root, options).unfinished()
    ids = {upload_id for p in unfinished
           for step in p.sequence.steps for upload_id in step.upload_ids(options)}
    splits = SplitStore(state_root, options, storage_for(state_root, options))
    for folder, meta in splits.metas():
        staged = parse_staged(str(meta.get("staging", "")))
        stale = splits_older_than is not None and aged(
            float(meta.get("created", 0)), splits_older_than)
        if stale:
            splits.discard(meta, folder)
        elif staged.in_store:
            ids.add(staged.upload_id)
    return ids


def abort_orphans(destination: str, state_root: str, options: dict[str, Any],
                  older_than: float = 0.0, expire_splits: bool = False,
                  dry_run: bool = False, unfinished: list[PendingSequence] | None = None
                  ) -> int:
    """Abort unreferenced uploads under ``destination`` initiated ``older_than`` s ago
    (with ``dry_run``: count them, abort nothing). ``unfinished``: as
    ``referenced_uploads``."""
    storage = storage_for(destination, options)
    if not storage.capabilities.multipart:
        return 0  # nothing staged as uploads: nothing to abort
    if expire_splits:  # the stale split records go whether or not an upload is pending
        return storage.sweep_orphans(destination, referenced_uploads(
            state_root, options, older_than, unfinished), older_than, dry_run)
    return storage.sweep_orphans(destination, Referenced(
        lambda: referenced_uploads(state_root, options, None, unfinished)), older_than, dry_run)


_S = TypeVar("_S")


class Referenced(AbstractSet[str]):
    """The referenced upload ids, read (the split records listed) when first asked: a
    destination with no upload pending, the common case, is not asked, and its sweep
    costs one listing of the uploads instead of two round trips."""

    def __init__(self, read: Callable[[], set[str]]) -> None:
        self._read = read
        self._ids: set[str] | None = None

    def _known(self) -> set[str]:
        if self._ids is None:
            self._ids = self._read()
        return self._ids

    def __contains__(self, upload_id: object) -> bool:
        return upload_id in self._known()

    def __iter__(self) -> Iterator[str]:
        return iter(self._known())

    def __len__(self) -> int:
        return len(self._known())

    @classmethod
    def _from_iterable(cls, it: Iterable[_S]) -> AbstractSet[_S]:
        """What ``&``, ``|`` and ``-`` give: a plain set."""
        return set(it)


def free_dead_runs(destination: str, state_root: str, options: dict[str, Any],
                   older_than: float, dry_run: bool = False) -> CleanupReport:
    """Remove what runs that are no longer running left under the state root, if older
    than ``older_than`` seconds: their staging and progress folders, split files nobody
    resumed, verified copies kept for recovery, and (object stores) orphaned uploads.

    The caller holds the destination's lock, so no live run's staging is here; staged
    files a pending commit will publish are kept (the commit needs them). With
    ``dry_run``, the report says what would be freed and nothing is removed.
    """
    jobs = splits_freed = size = 0
    store = CommitStepStore(state_root, options)
    keep = {p.job_id for p in store.unfinished()}
    layout = StateLayout(state_root)
    storage = storage_for(state_root, options)
    for part in (layout.staging(), layout.progress()):
        try:
            names = storage.names(part)
        except FileNotFoundError:
            continue
        for job in names:
            folder = fsutil.join(part, job)
            if job in keep or not aged(_job_started(storage, folder, job), older_than):
                continue
            size += _size(storage, folder)
            if not dry_run:
                storage.remove(folder)
            jobs += part == layout.staging()
    splits = SplitStore(state_root, options, storage)
    for folder, meta in splits.metas():
        if aged(float(meta.get("created", 0)), older_than):
            size += _size(storage, folder)
            if not dry_run:
                splits.discard(meta, folder)
            splits_freed += 1
    recovery = RecoveryArea(state_root, options)
    size += sum(o.get("bytes_written", 0) for e in recovery.entries()
                if aged(float(e.get("kept", 0)), older_than)
                for o in e["outputs"])
    kept = recovery.expire(older_than, dry_run=dry_run)
    uploads = abort_orphans(destination, state_root, options, older_than, dry_run=dry_run)
    return CleanupReport(destination=destination, state_dir=fsutil.display(state_root),
                         jobs=jobs, splits=splits_freed, recovery=kept, uploads=uploads,
                         bytes=size, dry_run=dry_run)


def forget_registrations(state_root: str, options: dict[str, Any], dry_run: bool = False
                         ) -> int:
    """Drop the pending commits that hold nothing but a catalog registration an earlier
    run could not make (``pydistcp cleanup --forget-registrations``): their data is
    published, and a table that is gone for good would otherwise be retried by every
    run. Commits with data steps left are never touched. How many were (or would be)
    dropped."""
    store = CommitStepStore(state_root, options)
    leftovers = [p for p in store.pending() if registration_only(p.sequence)]
    if not dry_run:
        for pending in leftovers:
            store.remove(pending.sequence.id)
    return len(leftovers)


def _job_started(storage: Storage, folder: str, job: str) -> float:
    """When a job started: its id begins with the local time (``new_job_id``); else the
    folder's mtime, and 0 (long ago) where the store keeps none for folders."""
    try:
        return time.mktime(time.strptime(job.split("-", 1)[0], "%Y%m%dT%H%M%S"))
    except ValueError:
        try:
            return storage.stat(folder).mtime
        except (OSError, ValueError):
            return 0.0


def _size(storage: Storage, url: str) -> int:
    try:
        return storage.usage(url)
    except (OSError, ValueError):
        return 0
