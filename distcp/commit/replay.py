"""Finish what earlier runs left: pending commits, then orphaned copies (driver).

Runs before anything new is planned (Gobblin's exactly-once rule): every
persisted CommitSequence is replayed (verified steps skipped, the rest
executed); one that keeps failing is set aside after ``max_replays`` tries and
its dataset is not copied in this run. Then the staging directories of dead
jobs are swept: copies their tasks journaled as verified move to the recovery
area, the rest is deleted.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from distcp.commit.catalog_steps import registered_in, registration_only, registrations_left
from distcp.commit.kept_steps import PublishKept
from distcp.commit.log import CommitStepStore, PendingSequence
from distcp.commit.recovery import RecoveryArea
from distcp.commit.state_steps import RecordRun
from distcp.commit.steps import CommitContext, CommitSequence, PublishFiles
from distcp.copying.progress import JOURNAL, journal_records
from distcp.errors import CatalogError, PublishError, StateError
from distcp.model import TaskResult
from distcp.state.bounds import inside, plain_name
from distcp.state.layout import StateLayout
from distcp.storage import filesystems as fsutil
from distcp.storage import parse_staged, storage_for
from distcp.summary import Failure, Tally, tally_of


def replay_pending(store: CommitStepStore, ctx: CommitContext, max_replays: int,
                   listed: list[PendingSequence] | None = None) -> tuple[set[str], Tally]:
    """Replay every pending sequence (``listed``, when the caller has listed them);
    return the URNs that must not be copied now, and what the replays did."""
    blocked: set[str] = set()
    done: list[Tally] = []
    for pending in store.pending() if listed is None else listed:
        tally, block = _replay_one(store, pending, ctx, max_replays)
        done.append(tally)
        if block:
            blocked.add(pending.sequence.dataset_urn)
    return blocked, tally_of(done)


def _replay_one(store: CommitStepStore, pending: PendingSequence, ctx: CommitContext,
                max_replays: int) -> tuple[Tally, bool]:
    """What replaying one sequence did, and whether its dataset must not be copied now."""
    seq = pending.sequence
    refused = _out_of_bounds(store, pending, ctx)
    if refused is not None:
        return refused
    if pending.replays >= max_replays:
        store.set_aside(pending)
        return Tally(sequences_set_aside=1, failures=(Failure(
            fsutil.display(seq.dataset_urn),
            f"commit {seq.id} failed {pending.replays} replays; set aside in "
            f"{fsutil.display(store.url_of(seq.id, aside=True))}; dataset not copied",
            seq.dataset_urn, files=0),)), True
    leftover = registration_only(seq)
    store.persist(seq, pending.job_id, replays=pending.replays + 1)
    try:
        seq.run(ctx)
    except CatalogError as exc:
        # Only the registration is left (it is the last step): the data is published,
        # so the dataset is copied as usual, and a metastore that stays down is
        # retried every run instead of being set aside. Once it has failed in the run
        # that published the data, failing again fails no later run: it is pending.
        store.persist(registrations_left(seq), pending.job_id, replays=pending.replays)
        if leftover:
            return Tally(catalog_pending=(Failure(
                fsutil.display(seq.dataset_urn),
                f"commit {seq.id}: {exc}; each run retries it ('pydistcp cleanup DST "
                "--forget-registrations' drops it)"),)), False
        return Tally(catalog_failures=(Failure(
            fsutil.display(seq.dataset_urn),
            f"replay of commit {seq.id}: {exc}; the data is published, the next run "
            "registers it"),)), False
    except (PublishError, StateError) as exc:
        return _failed(store, pending, ctx, exc)
    store.remove(seq.id)
    moves = [m for step in seq.steps if isinstance(step, PublishFiles) for m in step.moves]
    # a set whose results stayed in results files: its files and bytes as recorded
    kept = sum(step.file_count() for step in seq.steps if isinstance(step, PublishKept))
    kept_bytes = sum(step.nbytes for step in seq.steps
                     if isinstance(step, RecordRun)) if kept else 0
    # published without reading the source again
    files, nbytes = len(moves) + kept, sum(size for _, _, size in moves) + kept_bytes
    return Tally(sequences_replayed=1, files_recovered=files, bytes_recovered=nbytes,
                 files_replayed=files, bytes_replayed=nbytes,
                 partitions_registered=registered_in(seq.steps)), False


def _failed(store: CommitStepStore, pending: PendingSequence, ctx: CommitContext,
            exc: Exception) -> tuple[Tally, bool]:
    """A replay that failed: set aside at once when a staged copy it needs is gone (no
    replay can mend that: the dataset is copied again now), else a failure that blocks
    its dataset and counts the try."""
    seq = pending.sequence
    lost = _lost_copy(seq, ctx)
    if lost is None:
        return Tally(failures=(Failure(fsutil.display(seq.dataset_urn),
                                       f"replay of commit {seq.id} failed: {exc}",
                                       seq.dataset_urn, files=0),)), True
    store.set_aside(pending)
    return Tally(sequences_set_aside=1, notes=(
        (f"commit {seq.id} of {fsutil.display(seq.dataset_urn)} cannot finish: its staged "
        f"copy of {fsutil.display(lost)} is gone; set aside in "
        f"{fsutil.display(store.url_of(seq.id, aside=True))}; the dataset is copied again"),
    )), False


#: Files of a failed commit a replay looks at for a lost staged copy (a request or two
#: each on an object store): a commit of a million files that failed for another cause
#: (a server down) must not cost a million requests. A loss further in is found by the
#: replays' limit instead (``--max-replays``).
LOST_CHECK_MAX = 1_000


def _lost_copy(seq: CommitSequence, ctx: CommitContext) -> str | None:
    """The final URL of the first file of ``seq`` whose staged copy is gone (a temp
    cleaner, a hand) and that is not published either, or None: read after a failed
    replay only, stopping at the first, and after LOST_CHECK_MAX files."""
    files = (f for step in seq.steps for f in step.staged_files(ctx.dst_options))
    try:
        for f in itertools.islice(files, LOST_CHECK_MAX):
            storage = ctx.storage(f.final)
            if not storage.holds_staged(f.staged) and \
                    not storage.is_published(f.staged, f.final, f.size):
                return f.final
    except FileNotFoundError as exc:  # a results file listing the copies is gone
        return exc.filename or str(exc)
    return None


def _out_of_bounds(store: CommitStepStore, pending: PendingSequence, ctx: CommitContext
                   ) -> tuple[Tally, bool] | None:
    """A log entry that names a path outside the run's roots (or an id that is not its
    file's name) is moved aside unread and never executed: one line says where, and
    its dataset is not copied in this run (True). One whose results file is gone (its
    staged copies went with it) is moved aside the same way, and the dataset copied
    again (False): no replay could ever finish it."""
    bounds = ctx.bounds
    if bounds is None:
        raise ValueError("replaying a commit log needs the run's bounds")
    seq = pending.sequence
    gone = False
    try:
        targets = list(seq.targets(ctx.dst_options))
    except (OSError, ValueError) as exc:  # a results file it names cannot be read
        gone = isinstance(exc, FileNotFoundError)
        targets = [("unreadable", f"{type(exc).__name__}: {exc}")]
    if not pending.url.endswith(f"/{seq.id}.json"):
        gone = False
        targets.insert(0, ("unknown", f"id {seq.id!r} in {pending.url}"))
    bad = bounds.first_outside(targets)
    if bad is None:
        return None
    role, url = bad
    aside = store.set_aside_unread(pending)
    if gone:
        return Tally(sequences_set_aside=1, notes=(
            (f"commit log entry {fsutil.display(pending.url)} cannot finish: {url}; set "
            f"aside in {fsutil.display(aside)}; the dataset is copied again"),)), False
    return Tally(sequences_set_aside=1, failures=(Failure(
        fsutil.display(pending.url),
        f"commit log entry names {url!r} ({role}), outside the destination "
        f"{fsutil.display(bounds.destination)} and its state directory; not executed, "
        f"set aside in {fsutil.display(aside)}", seq.dataset_urn, files=0),)), True


def sweep_dead_jobs(state_root: str, options: dict[str, Any], current_job: str,
                    recovery: RecoveryArea, keep_jobs: set[str]) -> int:
    """Move journaled copies of finished or killed jobs to recovery; delete the rest."""
    kept = 0
    layout = StateLayout(state_root)
    storage = storage_for(state_root, options)
    try:
        jobs = storage.names(layout.staging())
    except FileNotFoundError:
        jobs = []
    for job in jobs:
        if job == current_job or job in keep_jobs:
            continue
        kept += _promote_journal(state_root, options, job, recovery)
        for folder in layout.job_folders(job):
            storage.remove(folder)
    return kept


def read_journal(state_root: str, options: dict[str, Any], job: str
                 ) -> dict[str, tuple[str, list[TaskResult]]]:
    """guid -> (planned destination, results) of the copies ``job``'s tasks journaled."""
    storage = storage_for(state_root, options)
    progress = StateLayout(state_root).progress(job)
    try:
        names = [n for n in storage.names(progress) if JOURNAL.search(n)]
    except FileNotFoundError:
        return {}
    out: dict[str, tuple[str, list[TaskResult]]] = {}
    for name in names:
        try:
            records = json.loads(storage.read_bytes(fsutil.join(progress, name), "journal"))
        except (OSError, ValueError):
            continue  # a segment cut short by the kill: its copies are simply re-done
        for planned, results in journal_records(records):
            out[results[0].guid] = (planned, results)
    return out


def _promote_journal(state_root: str, options: dict[str, Any], job: str,
                     recovery: RecoveryArea) -> int:
    kept = 0
    known = recovery.guids()
    staging = StateLayout(state_root).staging(job)
    for guid, (planned, results) in read_journal(state_root, options, job).items():
        if guid in known or not plain_name(guid) or any(
                r.staging and not inside(r.staging, staging) for r in results):
            continue  # not a copy of this job's: never moved, deleted with the job's folders
        if not _intact(results, options):
            continue
        recovery.keep(guid, planned, results)
        kept += 1
    return kept


def _intact(results: list[TaskResult], options: dict[str, Any]) -> bool:
    for r in results:
        if not r.staging:
            continue
        if parse_staged(r.staging).in_store:
            return False  # staged uploads are not kept (the orphan sweep aborts them), and
            # published objects (--visibility file) are in place already
        try:
            if storage_for(r.staging, options).entry_size(r.staging) != r.bytes_written:
                return False
        except FileNotFoundError:
            return False
    return True
