"""Abort multipart uploads that nothing will ever complete.

A killed task, a lost speculative attempt or a dead driver leaves its staged
uploads pending: invisible, but billed, until aborted. An upload is *orphaned*
when neither a pending commit sequence (which a replay will complete) nor a
split record (which a later run resumes) refers to it. Runs sweep orphans
under their destination before and after copying; ``pydistcp cleanup DST``
does it on demand for uploads older than a threshold.
"""

from __future__ import annotations

from typing import Any

from distcp import fs as fsutil
from distcp import s3
from distcp.commit_log import CommitStepStore
from distcp.splitting import SplitStore
from distcp.upload_steps import CompleteUploads


def referenced_uploads(state_root: str, options: dict[str, Any],
                       splits_older_than: float | None = None) -> set[str]:
    """Upload ids a pending or set-aside commit, or a live split record, refers to.

    With ``splits_older_than`` (seconds), split records older than that are
    expired instead (their uploads become orphans and their records go).
    """
    store = CommitStepStore(state_root, options)
    ids = {s3.parse_staged(u[0])[0]
           for p in store.pending() + store.pending(aside=True)
           for step in p.sequence.steps if isinstance(step, CompleteUploads)
           for u in step.uploads}
    splits = SplitStore(state_root, options, "s3")
    for folder, meta in splits.metas():
        staging = str(meta.get("staging", ""))
        stale = splits_older_than is not None and s3.older_than(
            float(meta.get("created", 0)), splits_older_than)
        if stale:
            splits.discard(meta, folder)
        elif s3.is_staged(staging):
            ids.add(s3.parse_staged(staging)[0])
    return ids


def abort_orphans(destination: str, state_root: str, options: dict[str, Any],
                  older_than: float = 0.0, expire_splits: bool = False) -> int:
    """Abort unreferenced uploads under ``destination`` initiated ``older_than`` s ago."""
    fs, path = fsutil.filesystem(destination, options)
    if not s3.is_s3(fs):
        return 0
    keep = referenced_uploads(state_root, options, older_than if expire_splits else None)
    aborted = 0
    for final, upload_id, initiated in list(s3.uploads(fs, fsutil.to_url(fs, path))):
        if upload_id in keep or not s3.older_than(initiated, older_than):
            continue
        s3.abort(fs, final, upload_id)
        aborted += 1
    return aborted
