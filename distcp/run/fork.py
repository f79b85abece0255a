"""DRIVER: a fork run: plan each branch, copy every file once into all its branches, publish.

Each branch is a whole destination with its own state root, lock, commit log,
recovery area and plan (its own skip decisions against its own destination), so
everything a plain copy guarantees holds per branch. What the fork adds: the
operator's routing, one Spark job whose tasks read each source once for all its
branches (``distcp.fork.task``), and the ``all`` policy (``distcp.fork.agree``)
before any branch publishes. Branches publish one after the other, each through its
commit log: a crash between two leaves the later ones' commits to the next run,
which publishes them from their staged or kept copies.
"""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from distcp import preflight, request_count
from distcp.callbacks import DEFAULT_CALLBACK, Callback
from distcp.commit.orphans import abort_orphans
from distcp.commit.publish import Publishing, publish_plan
from distcp.copying.taskspec import TaskSpec
from distcp.events.run import RunEvents
from distcp.events.sinks import EventSink
from distcp.fork.agree import agreed
from distcp.fork.branches import Branch, ForkSettings, check_branches
from distcp.fork.operators import decide, operator_for
from distcp.fork.task import ForkedFile, ForkSpec, ForkUnit, fork_runner
from distcp.fork.tee import QueueStats
from distcp.model import CopyableFile, TaskResult
from distcp.planning.listing import find_datasets, plan_all, state_root
from distcp.planning.packing import pack, per_core, unit_count
from distcp.planning.plan import Plan
from distcp.planning.strategy import FORK, NOTHING, Strategy
from distcp.run.branch import (
    check_destination,
    event_sink,
    jobs_with_commits,
    new_job_id,
    on_session,
    prepare_staging,
    prepare_state_dirs,
    publishing,
    recover,
    remove_job_folders,
    split_recovered,
    task_spec,
)
from distcp.run.report import count_requests, decisions, record_strategies
from distcp.runlog import RunLog
from distcp.spark.arrow import run_pickled
from distcp.spark.job import run_session
from distcp.spark.listing import LazySession
from distcp.spark.session import default_parallelism
from distcp.state.lock import DestinationLock
from distcp.state.store import StateStore
from distcp.storage import filesystems as fsutil
from distcp.summary import Summary


@dataclass
class _Branch:
    """One branch during the run: its configuration and what the run learns of it."""

    branch: Branch
    datasets: list[Any]
    root: str
    pub: Publishing | None = None
    plan: Plan = field(default_factory=lambda: Plan(()))
    spec: TaskSpec | None = None
    results: list[TaskResult] = field(default_factory=list)
    summary: Summary = field(default_factory=Summary)

    @property
    def name(self) -> str:
        return self.branch.name


def run_fork(branches: tuple[Branch, ...], settings: ForkSettings,
             callback: Callback = DEFAULT_CALLBACK) -> Summary:
    """One fork run: every branch's recovery and plan, one copy job, each branch's publish."""
    check_branches(branches)
    start = time.monotonic()
    lead = branches[0].cfg
    summary = Summary(job_id=new_job_id(), dry_run=lead.dry_run)
    for b in branches:
        preflight.check_run(b.cfg)
    runs = []
    for b in branches:
        datasets = find_datasets(b.cfg)
        runs.append(_Branch(b, datasets, state_root(b.cfg, datasets)))
    log = RunLog(lead.log_file, summary.job_id)
    try:
        with ExitStack() as stack:
            if not lead.dry_run:
                for run in sorted(runs, key=lambda r: r.root):  # one order: no deadlock
                    preflight.check_local_destination(run.root, run.branch.cfg.destination,
                                                      run.branch.cfg.dst_options)
                    stack.enter_context(DestinationLock(
                        run.root, dict(run.branch.cfg.dst_options), summary.job_id))
            session = LazySession(partial(run_session, lead, summary, callback))
            stack.callback(session.close)
            sink = event_sink(lead, runs[0].root)  # the run's own events: the lead's target
            with RunEvents(sink, summary.job_id, lead.destination, lead.sources,
                           enabled=not lead.dry_run) as events:
                return events.end(_run_locked(runs, settings, callback, summary, start, log,
                                              session, sink))
    finally:
        log.close()


def _run_locked(runs: list[_Branch], settings: ForkSettings, callback: Callback,
                summary: Summary, start: float, log: RunLog, session: LazySession,
                sink: EventSink) -> Summary:
    """The run once it holds every branch's destination. The Spark session opens at the
    copy (or at a replayed catalog step) and stays open until the run ends."""
    lead = runs[0].branch.cfg
    for run in runs:
        cfg = run.branch.cfg
        run.summary = Summary(job_id=summary.job_id)
        pub = replace(publishing(cfg, summary.job_id, run.root, run.name,
                                 sink if run is runs[0] else None), log=log)
        run.pub = on_session(pub, session, cfg)
        datasets = run.datasets
        if not cfg.dry_run:
            blocked = recover(run.pub, cfg, run.summary)
            datasets = [d for d in datasets if d.urn not in blocked]
        planned = plan_all(cfg, callback.message, datasets,
                           StateStore(run.root, dict(cfg.dst_options)))
        run.plan = planned.plan
        summary.strategy.setdefault("plan", []).extend(
            {"branch": run.name, **row}
            for row in record_strategies(log, "plan", planned.strategies))
        run.summary.destination_listings = planned.destination_listings
        if run is runs[0]:  # one source listing's skipped entries, reported once
            summary.add_skipped(planned.skipped)
    unrouted = _route(runs, settings)
    if unrouted:
        summary.notes.append(f"{unrouted} file(s) went to no branch (the fork operator "
                             "chose none for them)")
    for run in runs:
        log.plan(run.plan)
        run.summary.files_skipped = sum(d.files_skipped for d in run.plan.datasets)
    summary.phases["plan_s"] = round(time.monotonic() - start, 3)
    summary.datasets = len({d.urn for run in runs for d in run.plan.datasets})
    if lead.dry_run or lead.log_level in ("info", "debug"):
        summary.plan = [{**row, "branch": run.name} for run in runs
                        for row in decisions(run.plan)]
    if lead.dry_run:
        return _dry_run(runs, summary, start)
    todo = _prepare(runs)
    summary.strategy["copy"] = record_strategies(log, "copy", (("", Strategy(
        FORK if todo else NOTHING, f"{len(runs)} destinations, each file read once for all "
        "the branches it goes to" if todo else "nothing to copy: no Spark job")),))
    if todo:
        results = _copy_on_spark(runs, todo, settings, callback, summary, session)
        by_name = {run.name: run for run in runs}
        for r in results:
            by_name[r.branch].results.append(r)
    if settings.policy == "all":
        agreed_results = agreed([r.name for r in runs], [r.plan for r in runs],
                                [r.results for r in runs], [r.pub for r in runs])  # type: ignore[misc]
        for run, rs in zip(runs, agreed_results, strict=True):
            run.results = rs
    if any(run.plan.files_to_copy for run in runs):
        callback.message("publishing")
    t = time.monotonic()
    with request_count.counting() as published:
        for run in runs:
            assert run.pub is not None and run.spec is not None
            run.summary.add(publish_plan(run.plan, run.results, run.pub))
            if summary.job_id not in jobs_with_commits(run.pub.store):
                remove_job_folders(run.spec)
            run.summary.uploads_aborted += abort_orphans(
                run.branch.cfg.destination, run.root, run.spec.dst_options)
    summary.phases["publish_s"] = round(time.monotonic() - t, 3)
    _fold(summary, runs)
    count_requests(summary, published.items(), len(todo))
    summary.duration_s = round(time.monotonic() - start, 3)
    return summary


def _route(runs: list[_Branch], settings: ForkSettings) -> int:
    """Apply the fork operator: each branch keeps the files routed to it. Returns how
    many files no branch receives."""
    branches = [run.branch for run in runs]
    operator = operator_for(settings.operator, branches)
    name = settings.operator or type(operator).__name__
    roots = {d.urn: d.root for run in runs for d in run.datasets}
    chosen: dict[str, tuple[bool, ...]] = {}
    for run in runs:
        for d in run.plan.datasets:
            for a in d.copy:
                if a.file.guid not in chosen:
                    chosen[a.file.guid] = decide(operator, name, a.file,
                                                 _relative(a.file, roots.get(d.urn, "")))
    for n, run in enumerate(runs):
        run.plan = Plan(tuple(replace(d, copy=tuple(a for a in d.copy if chosen[a.file.guid][n]))
                              for d in run.plan.datasets))
    return sum(1 for c in chosen.values() if not any(c))


def _relative(file: CopyableFile, root: str) -> str:
    """The origin's path under its dataset's source root ('/'-separated)."""
    url = file.origin.url
    base = root.rstrip("/")
    if base and url.startswith(base + "/"):
        return url[len(base) + 1:]
    return url.rsplit("/", 1)[-1]


def _prepare(runs: list[_Branch]) -> list[ForkedFile]:
    """Each branch's task spec, state folders, staging and kept copies; the files still
    to read, each with every branch that needs it (a branch whose verified copy an
    earlier run kept takes that copy instead, without a read)."""
    targets: dict[str, list[tuple[int, CopyableFile]]] = defaultdict(list)
    for n, run in enumerate(runs):
        cfg = run.branch.cfg
        assert run.pub is not None
        run.spec = replace(task_spec(cfg, run.pub.job_id, run.root), server_side=False)
        check_destination(cfg, run.spec, run.plan.files_to_copy)
        prepare_state_dirs(run.root, run.spec)
        recovered, files = split_recovered(run.plan.files_to_copy, run.pub.recovery)
        run.summary.add(run.pub.recovery.refusals())
        run.results = [replace(r, branch=run.name) for rs in recovered for r in rs]
        if files:
            prepare_staging(run.spec, cfg)
        for f in files:
            targets[f.guid].append((n, f))
    return [ForkedFile(tuple(t)) for t in targets.values()]


def _copy_on_spark(runs: list[_Branch], todo: list[ForkedFile], settings: ForkSettings,
                   callback: Callback, summary: Summary, session: LazySession
                   ) -> list[TaskResult]:
    """One Spark job: each task reads its files once, for all their branches."""
    lead = runs[0].branch.cfg
    t = time.monotonic()
    spark = session()
    summary.phases["spark_start_s"] = round(time.monotonic() - t, 3)
    cores = lead.parallelism or default_parallelism(spark)
    by_guid = {f.lead.guid: f for f in todo}
    cost = sum(f.lead.origin.size for f in todo) + len(todo) * lead.file_cost
    packed = pack([f.lead for f in todo], unit_count(
        len(todo), lead.tasks or cores, per_core(lead.tasks, cost, cores)), lead.file_cost)
    units = [ForkUnit(u.unit_id, tuple(by_guid[f.guid] for f in u.files)) for u in packed]
    callback.set_size(len(todo), sum(f.lead.origin.size for f in todo))
    specs = tuple(run.spec for run in runs)
    fork = ForkSpec(tuple(run.name for run in runs), specs,  # type: ignore[arg-type]
                    settings.queue, settings.queue_timeout)
    t = time.monotonic()
    try:
        results: list[TaskResult] = run_pickled(
            spark, [(u.unit_id, u) for u in units], partial(fork_runner, fork))
    except Exception as exc:  # noqa: BLE001 - Spark errors arrive as many types
        results = _job_failed(runs, todo, exc)
    summary.phases["copy_s"] = round(time.monotonic() - t, 3)
    callback.update(len(todo), sum(r.bytes_read for r in results))
    callback.close()
    summary.bytes_read += sum(r.bytes_read for r in results)
    summary.requests = request_count.total(r.requests for r in results)
    return results


def _job_failed(runs: list[_Branch], todo: list[ForkedFile], exc: BaseException
                ) -> list[TaskResult]:
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    return [TaskResult(guid=f.guid, unit_id=-1, attempt="", origin=f.origin.url,
                       destination=f.destination, dataset_urn=f.dataset_urn,
                       file_set=f.file_set, status="failed", error_type="SparkJobError",
                       branch=runs[b].name,
                       message=f"{fsutil.display(f.origin.url)}: Spark job failed: {reason}")
            for forked in todo for b, f in forked.targets]


queue_log = logging.getLogger("distcp.fork")

#: Counts of a branch's own summary that the run's adds up.
_ADDED = ("files_copied", "links_copied", "bytes_copied", "files_skipped", "files_failed",
          "files_deleted", "files_not_published", "files_recovered", "bytes_recovered",
          "sequences_replayed", "sequences_set_aside", "recovery_expired",
          "destination_listings", "uploads_aborted", "directories_created")


def _fold(summary: Summary, runs: list[_Branch]) -> None:
    """The run's summary: the branches' counts added up, and each branch's own."""
    for run in runs:
        b = run.summary
        for name in _ADDED:
            setattr(summary, name, getattr(summary, name) + getattr(b, name))
        summary.failures.extend(b.failures)
        summary.notes.extend(f"{run.name}: {note}" for note in b.notes)
        queue = QueueStats()
        for r in run.results:
            if r.queue:
                queue = queue + QueueStats.of_pairs(r.queue)
        queue_log.debug("fork branch %s: queue %s", run.name, json.dumps(queue.report()))
        summary.branches[run.name] = {
            "destination": fsutil.display(run.branch.cfg.destination),
            "files_copied": b.files_copied, "bytes_copied": b.bytes_copied,
            "files_skipped": b.files_skipped, "files_failed": b.files_failed,
            "files_not_published": b.files_not_published,
            "files_recovered": b.files_recovered, "queue": queue.report()}


def _dry_run(runs: list[_Branch], summary: Summary, start: float) -> Summary:
    for run in runs:
        files = run.plan.files_to_copy
        run.summary.files_copied = len(files)
        run.summary.bytes_copied = run.plan.bytes_to_copy
        run.summary.files_deleted = sum(len(d.delete) for d in run.plan.datasets)
    _fold(summary, runs)
    summary.duration_s = round(time.monotonic() - start, 3)
    return summary


