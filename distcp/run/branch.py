"""One destination of a run, and the value the phases fill in for it (driver).

Its job id, publishing, task spec and folders, and ``BranchRun``.

A plain copy has one branch, a fork several (``distcp.run.fork``); each branch gets its
own publishing (commit log, recovery area, event sink, bounds), its own TaskSpec and
its own staging, and finishes earlier runs' work on its destination before it plans
(``recover``).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Any

from distcp import preflight
from distcp.commit.catalog_steps import CatalogTarget
from distcp.commit.log import CommitStepStore, PendingSequence
from distcp.commit.orphans import abort_orphans
from distcp.commit.publish import Publishing
from distcp.commit.recovery import RecoveryArea
from distcp.commit.replay import replay_pending, sweep_dead_jobs
from distcp.commit.steps import CommitContext
from distcp.configuration import CopyConfiguration
from distcp.copying.taskenv import task_environment
from distcp.copying.taskspec import TaskSpec
from distcp.datasets.base import CopyableDataset
from distcp.errors import DestinationNotWritableError, PlanningError
from distcp.events.sinks import EventSink
from distcp.fork.branches import Branch
from distcp.model import CopyableFile, TaskResult
from distcp.planning.listing import find_datasets, state_root
from distcp.planning.plan import DatasetPlan, Plan
from distcp.quality import check_list
from distcp.spark.keptcopy import KeptCopy, split_kept
from distcp.spark.listing import LazySession
from distcp.spark.publish import fan_out_with
from distcp.state.bounds import Bounds, protected_roots, source_roots
from distcp.state.layout import StateLayout
from distcp.state.lock import DestinationLock
from distcp.storage import StorageSpec, spec_for, storage_for, watchdog_seconds, writes
from distcp.storage import filesystems as fsutil
from distcp.storage.spec import written_url
from distcp.summary import Summary, Tally


def new_job_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)


def publishing(cfg: CopyConfiguration, job_id: str, root: str, branch: str = "main",
               sink: EventSink | None = None) -> Publishing:
    """``sink``: the run's event sink, shared with its START/COMPLETE events (one
    endpoint found dead is not tried again)."""
    options = dict(cfg.dst_options)
    ctx = CommitContext(dst_options=options, state_root=root,
                        src_options=dict(cfg.src_options),
                        events=sink or event_sink(cfg, root),
                        bounds=bounds_of(cfg, root))
    catalog = (CatalogTarget(cfg.catalog_table, cfg.catalog_partitions or "")
               if cfg.catalog_table else None)
    return Publishing(job_id=job_id, started=time.time(), ctx=ctx,
                      store=CommitStepStore(root, options), recovery=RecoveryArea(root, options),
                      policy=cfg.commit_policy,  # type: ignore[arg-type]
                      catalog=catalog, move=cfg.move, compare=cfg.compare,
                      delete_empty_src_dirs=cfg.delete_empty_src_dirs,
                      destination=cfg.destination, branch=branch)


def bounds_of(cfg: CopyConfiguration, root: str) -> Bounds:
    """The roots the run's records may act in, spelled as records spell URLs (a server's
    user named in an FTP URL, a local path plain: ``fsutil.to_url``)."""
    return Bounds(written_url(cfg.destination, cfg.dst_options), root,
                  tuple(written_url(s, cfg.src_options) for s in source_roots(cfg.sources)))


def on_session(pub: Publishing, session: LazySession, cfg: CopyConfiguration) -> Publishing:
    """``pub`` with the run's Spark session: catalog steps open it lazily, per-file
    steps go to the executors as ``--publishing`` says (``distcp.spark.publish``)."""
    return replace(pub, ctx=replace(pub.ctx, spark=session, fan_out=fan_out_with(
        session, cfg.publishing, cfg.master)))


def event_sink(cfg: CopyConfiguration, root: str) -> EventSink:
    return EventSink(cfg.events, root, dict(cfg.dst_options), cfg.events_timeout)


def task_spec(cfg: CopyConfiguration, job_id: str, root: str,
               dst: StorageSpec | None = None) -> TaskSpec:
    dst = dst or spec_for(cfg.destination, dict(cfg.dst_options))
    server_side = _server_side(cfg, dst)
    return TaskSpec(
        job_id=job_id,
        staging_root=StateLayout(root).staging(job_id),
        progress_root=StateLayout(root).progress(job_id),
        state_root=root,
        buffer_size=cfg.buffer_size,
        verify=cfg.verify,
        src_options=dict(cfg.src_options),
        dst_options=dict(cfg.dst_options),
        converter_options=cfg.converter_options,
        dst=dst,
        server_side=server_side,
        server_side_ranges=server_side and dst.capabilities.server_side_ranges,
        part_size=cfg.buffer_size,
        env=task_environment(),
        request_timeout=watchdog_seconds(),
        checks=check_list(cfg.check),
        chmod=cfg.chmod_rules,
        protected=protected_roots(written_url(cfg.destination, cfg.dst_options), root),
    )


def _server_side(cfg: CopyConfiguration, dst: StorageSpec) -> bool:
    """One store copies itself (S3 -> S3, Azure -> Azure) where the options are the same
    (one endpoint, one account), no URL names another account, and no converter runs.
    The write options are not the store's options: the copy is created with them."""
    if cfg.converters or not dst.capabilities.server_side_copy \
            or writes.without(cfg.src_options) != writes.without(cfg.dst_options):
        return False
    storage = dst.open()
    account = storage.account(cfg.destination)
    return all(storage.account(src) == account for src in cfg.sources)


def prepare_state_dirs(root: str, spec: TaskSpec) -> None:
    """Create the state root's folders on filesystems that need a folder before a
    file goes into it (FTP, SFTP...); object stores and local writes need none."""
    storage = spec.dst.open()
    for folder in StateLayout(root).document_folders():
        try:
            storage.prepare_folder(folder)
        except OSError as exc:
            raise PlanningError(f"cannot write to the state directory {fsutil.display(root)}: "
                                f"{exc}", path=root) from exc


def prepare_staging(spec: TaskSpec, cfg: CopyConfiguration) -> None:
    """Fail fast, with one clear line, when the destination cannot take any write."""
    for url in (spec.staging_root, spec.progress_root):
        try:
            storage_for(url, spec.dst_options).makedirs(url)
        except OSError as exc:
            raise DestinationNotWritableError(
                f"cannot write to destination {fsutil.display(cfg.destination)}: "
                f"{exc.strerror or exc}", path=cfg.destination) from exc


def remove_job_folders(spec: TaskSpec) -> None:
    """Remove this job's staging and progress directories.

    The state directory itself stays: removing it would change the mtime of the
    destination root after its attributes were set. On an object store both go at once
    (each is a listing and a delete: round trips, not work).
    """
    def remove(url: str) -> None:
        try:
            storage_for(url, spec.dst_options).remove(url)
        except OSError:
            pass  # leftovers of a failed cleanup are swept by the next run

    storage_for(spec.staging_root, spec.dst_options).for_each(
        (spec.staging_root, spec.progress_root), remove)


def jobs_with_commits(unfinished: list[PendingSequence]) -> set[str]:
    """Jobs whose staged copies a pending or set-aside commit (the commit log's
    ``unfinished()``) still refers to."""
    return {p.job_id for p in unfinished}


def recover(pub: Publishing, cfg: CopyConfiguration) -> tuple[set[str], Tally]:
    """Replay pending commits, keep orphaned verified copies, expire old ones.

    Returns the URNs whose commits could not be finished (they are not copied now), and
    what recovering reports to the summary.
    """
    pending, aside = pub.store.pending_and_aside()
    blocked, replayed = replay_pending(pub.store, pub.ctx, cfg.max_replays, pending)
    # read again as the replays left them (sweeping changes no commit); with nothing
    # to replay, the log is as just listed
    unfinished = pub.store.unfinished() if pending else aside
    sweep_dead_jobs(pub.ctx.state_root, pub.ctx.dst_options, pub.job_id, pub.recovery,
                    jobs_with_commits(unfinished))
    return blocked, replayed + Tally(
        recovery_expired=pub.recovery.expire(cfg.recovery_retention),
        uploads_aborted=abort_orphans(cfg.destination, pub.ctx.state_root,
                                      pub.ctx.dst_options, unfinished=unfinished))


def split_recovered(files: list[CopyableFile], recovery: RecoveryArea
                     ) -> tuple[list[list[TaskResult]], list[CopyableFile]]:
    """Files whose verified copy an earlier run kept, and the files still to copy."""
    kept = recovery.kept()
    recovered: list[list[TaskResult]] = []
    todo: list[CopyableFile] = []
    for f in files:
        results = recovery.take(f) if kept and f.guid in kept else None  # a sha1 a file
        if results:
            recovered.append(results)
        else:
            todo.append(f)
    return recovered, todo


@dataclass
class BranchRun:
    """One destination during a run: its configuration and what the phases learn of it.

    A plain copy is one branch whose ``summary`` is the run's own; a fork has several,
    each with a summary of its own that the run adds up (``distcp.run.fork.fold``)."""

    branch: Branch
    datasets: list[Any]
    root: str
    summary: Summary
    pub: Publishing | None = None
    #: The plan, then (after routing) what this branch copies.
    plan: Plan = field(default_factory=lambda: Plan(()))
    #: Why its files to copy must come to the driver (None: they may stay on executors).
    collects: str | None = None
    spec: TaskSpec | None = None
    #: Datasets whose files to copy stayed on the executors, and the rest of the plan.
    kept: tuple[DatasetPlan, ...] = ()
    rest: Plan = field(default_factory=lambda: Plan(()))
    #: Files still to read (not taken from the recovery area).
    files: list[CopyableFile] = field(default_factory=list)
    results: list[TaskResult] = field(default_factory=list)
    copies: list[KeptCopy] = field(default_factory=list)
    #: One of a fork's branches (its results carry its name).
    forked: bool = False

    @property
    def name(self) -> str:
        return self.branch.name

    @property
    def cfg(self) -> CopyConfiguration:
        return self.branch.cfg

    @property
    def publishing(self) -> Publishing:
        assert self.pub is not None, "publishing is set up before planning"
        return self.pub

    @property
    def task(self) -> TaskSpec:
        assert self.spec is not None, "the task spec is made before copying"
        return self.spec


def opened(branches: tuple[Branch, ...], summary: Summary, forked: bool,
           found: Callable[[CopyConfiguration], list[CopyableDataset]] = find_datasets
           ) -> list[BranchRun]:
    """Each branch checked before Spark (``preflight``), its datasets ``found`` and its
    state root chosen; a plain copy's one branch reports into the run's summary itself."""
    for b in branches:
        preflight.check_run(b.cfg)
    runs = []
    for b in branches:
        datasets = found(b.cfg)
        runs.append(BranchRun(b, datasets, state_root(b.cfg, datasets),
                              Summary(job_id=summary.job_id) if forked else summary,
                              forked=forked))
    return runs


def locked(runs: list[BranchRun], job_id: str, stack: ExitStack) -> None:
    """Every branch's destination locked, in one order (two runs never deadlock); a dry
    run changes nothing and takes no lock."""
    if runs[0].cfg.dry_run:
        return
    for run in sorted(runs, key=lambda r: r.root):
        preflight.check_local_destination(run.root, run.cfg.destination, run.cfg.dst_options)
        stack.enter_context(DestinationLock(run.root, dict(run.cfg.dst_options), job_id))


def prepared(run: BranchRun, dst: StorageSpec | None = None, server_side: bool = True
             ) -> None:
    """Before the copy: the task spec, the state folders, the copies the recovery area
    holds, and the staging folders when anything is read. A destination that cannot
    hold a file's name fails that file in its task (``TaskSpec.refuse_protected``)."""
    cfg, pub = run.cfg, run.publishing
    spec = task_spec(cfg, pub.job_id, run.root, dst)
    run.spec = spec if server_side else replace(spec, server_side=False,
                                                     server_side_ranges=False)
    run.kept, run.rest = split_kept(run.plan)  # kept: files that stayed on the executors
    prepare_state_dirs(run.root, run.task)
    recovered, run.files = split_recovered(run.rest.files_to_copy, pub.recovery)
    run.summary.add(pub.recovery.refusals())
    run.results = [replace(r, branch=run.name) if run.forked else r
                   for rs in recovered for r in rs]
    if run.files or run.kept:
        prepare_staging(run.task, cfg)
