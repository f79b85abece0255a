"""What a fork adds to a run: routing, one copy for every branch, the sum (driver).

Each branch is a whole destination with its own state root, lock, commit log,
recovery area and plan (its own skip decisions against its own destination), so
everything a plain copy guarantees holds per branch; the run's order is the same
(``distcp.run.pipeline``). What the fork adds: the operator's routing (``route``), one
copy whose tasks read each source once for all its branches (``copy_forked``,
``distcp.fork.task``: in this process for a small plan, as a plain copy's, else one
Spark job), the ``all`` policy (``distcp.fork.agree``) before any branch
publishes, and the run's summary as the branches' added up (``fold``). Branches publish
one after the other, each through its commit log: a crash between two leaves the later
ones' commits to the next run, which publishes them from their staged or kept copies.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import defaultdict
from dataclasses import replace
from functools import partial

from distcp import request_count
from distcp.callbacks import Callback
from distcp.errors import one_line
from distcp.fork.branches import ForkSettings
from distcp.fork.operators import decide, operator_for
from distcp.fork.task import ForkedFile, ForkSpec, ForkUnit, fork_runner, fork_unit
from distcp.fork.tee import QueueStats
from distcp.model import CopyableFile, TaskResult
from distcp.planning.packing import pack, per_core, unit_count
from distcp.planning.plan import Plan
from distcp.planning.strategy import FORK, NOTHING, Strategy
from distcp.run.branch import BranchRun
from distcp.run.choice import copiers_here, cores_here, fork_copies_here, forks_here
from distcp.run.here import run_units
from distcp.run.report import record_strategies
from distcp.runlog import RunLog
from distcp.spark.arrow import run_pickled
from distcp.spark.listing import LazySession
from distcp.spark.session import default_parallelism
from distcp.storage import filesystems as fsutil
from distcp.summary import CopyTally, Summary


def route(runs: list[BranchRun], settings: ForkSettings) -> int:
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


def copy_forked(runs: list[BranchRun], settings: ForkSettings, callback: Callback,
                session: LazySession, log: RunLog) -> tuple[int, CopyTally]:
    """One copy whose tasks read each file once, for all its branches (a branch whose
    verified copy an earlier run kept takes that copy instead, without a read): in this
    process when the files are few (``choice.fork_copies_here``), else one Spark job.
    Returns how many files it read, and what the copy reports to the summary."""
    targets: dict[str, list[tuple[int, CopyableFile]]] = defaultdict(list)
    for n, run in enumerate(runs):
        for f in run.files:
            targets[f.guid].append((n, f))
    todo = [ForkedFile(tuple(t)) for t in targets.values()]
    here = fork_copies_here([run.cfg for run in runs], len(todo)) if todo else None
    why = (f"{len(runs)} destinations, each file read once for all the branches it goes "
           "to" + (f", by {copiers_here([run.cfg for run in runs])}, no Spark job: {here}"
                   if here else "")
           if todo else "nothing to copy: no Spark job")
    chosen = CopyTally(strategy=tuple(record_strategies(log, "copy", (("", Strategy(
        FORK if todo else NOTHING, why)),), runs[0].cfg.destination)))
    if not todo:
        return 0, chosen
    by_name = {run.name: run for run in runs}
    results, tally = _copy_here(runs, todo, settings, callback) if here else \
        _copy_on_spark(runs, todo, settings, callback, session)
    for r in results:
        by_name[r.branch].results.append(r)
    return len(todo), chosen + tally


def _units(runs: list[BranchRun], todo: list[ForkedFile], cores: int) -> list[ForkUnit]:
    """``todo`` packed into units as a copy's files are (``--tasks``, else by cores)."""
    lead = runs[0].cfg
    by_guid = {f.lead.guid: f for f in todo}
    cost = sum(f.lead.origin.size for f in todo) + len(todo) * lead.file_cost
    packed = pack([f.lead for f in todo], unit_count(
        len(todo), lead.tasks or cores, per_core(lead.tasks, cost, cores)), lead.file_cost)
    return [ForkUnit(u.unit_id, tuple(by_guid[f.guid] for f in u.files)) for u in packed]


def _fork_spec(runs: list[BranchRun], settings: ForkSettings, here: bool) -> ForkSpec:
    """The branches' task specs; copied here, with this process's own environment
    (``run.here``: the variables travel only to a server's workers)."""
    specs = tuple(replace(run.task, env=None) if here else run.task for run in runs)
    return ForkSpec(tuple(run.name for run in runs), specs, settings.queue,
                    settings.queue_timeout)


def _copy_here(runs: list[BranchRun], todo: list[ForkedFile], settings: ForkSettings,
               callback: Callback) -> tuple[list[TaskResult], CopyTally]:
    """``_copy_on_spark``'s counterpart: the same fork tasks (``fork.task.fork_unit``)
    in this process's forked processes between local trees, else threads
    (``run.here.run_units``)."""
    cores = cores_here(runs[0].cfg)
    units = _units(runs, todo, cores)
    fork = _fork_spec(runs, settings, here=True)
    attempt = f"here{os.getpid()}"
    callback.message(f"copying {len(todo):,} file(s) by "
                     f"{copiers_here([run.cfg for run in runs])}, no Spark job")
    callback.set_size(len(todo), sum(f.lead.origin.size for f in todo))

    def one(unit: ForkUnit, stop: threading.Event) -> list[TaskResult]:
        results: list[TaskResult] = []
        for result in fork_unit(unit, fork, attempt):
            results.append(result)
            if stop.is_set():
                break
        return results

    def failed(unit: ForkUnit, exc: BaseException) -> list[TaskResult]:
        return _failed(runs, list(unit.files), exc, "copy failed", type(exc).__name__)

    t = time.monotonic()
    results = run_units(units, cores, one, failed, lambda: None,
                        all(forks_here(run.cfg) for run in runs))
    return _copied(results, len(todo), callback, (("copy_s", round(time.monotonic() - t, 3)),))


def _copy_on_spark(runs: list[BranchRun], todo: list[ForkedFile], settings: ForkSettings,
                   callback: Callback, session: LazySession
                   ) -> tuple[list[TaskResult], CopyTally]:
    t = time.monotonic()
    spark = session()
    started = round(time.monotonic() - t, 3)
    units = _units(runs, todo, runs[0].cfg.parallelism or default_parallelism(spark))
    callback.set_size(len(todo), sum(f.lead.origin.size for f in todo))
    fork = _fork_spec(runs, settings, here=False)
    t = time.monotonic()
    try:
        results: list[TaskResult] = run_pickled(
            spark, [(u.unit_id, u) for u in units], partial(fork_runner, fork))
    except Exception as exc:  # noqa: BLE001 - Spark errors arrive as many types
        results = _failed(runs, todo, exc, "Spark job failed", "SparkJobError")
    return _copied(results, len(todo), callback, (("spark_start_s", started),
                                                   ("copy_s", round(time.monotonic() - t, 3))))


def _copied(results: list[TaskResult], files: int, callback: Callback,
            phases: tuple[tuple[str, float], ...]) -> tuple[list[TaskResult], CopyTally]:
    callback.update(files, sum(r.bytes_read for r in results))
    callback.close()
    return results, CopyTally(
        bytes_read=sum(r.bytes_read for r in results),
        requests=tuple(request_count.total(r.requests for r in results).items()),
        phases=phases)


def _failed(runs: list[BranchRun], todo: list[ForkedFile], exc: BaseException, what: str,
            error_type: str) -> list[TaskResult]:
    """Every branch's copy of each of ``todo`` failed by ``exc`` (a failed job, or a unit
    here that raised): the next run copies them again."""
    reason = one_line(exc)
    return [TaskResult(guid=f.guid, unit_id=-1, attempt="", origin=f.origin.url,
                       destination=f.destination, dataset_urn=f.dataset_urn,
                       file_set=f.file_set, status="failed", error_type=error_type,
                       branch=runs[b].name,
                       message=f"{fsutil.display(f.origin.url)}: {what}: {reason}")
            for forked in todo for b, f in forked.targets]


queue_log = logging.getLogger("distcp.fork")

#: Counts of a branch's own summary that the run's adds up.
_ADDED = ("files_copied", "links_copied", "bytes_copied", "files_skipped",
          "files_deleted", "files_not_published", "files_recovered", "bytes_recovered",
          "files_replayed", "bytes_replayed",
          "sequences_replayed", "sequences_set_aside", "recovery_expired",
          "destination_listings", "uploads_aborted", "directories_created",
          "files_compared", "files_compared_same", "bytes_compared")


def fold(summary: Summary, runs: list[BranchRun]) -> None:
    """The run's summary: the branches' counts added up, and each branch's own. A
    source file that failed in several branches is one failed file of the run: its
    lines beyond the first count no file (``Failure.files`` 0), so ``files_failed``
    counts files, not branch attempts, and still agrees with the list."""
    counted = {f.path for f in summary.failures if f.files}
    for run in runs:
        b = run.summary
        for name in _ADDED:
            setattr(summary, name, getattr(summary, name) + getattr(b, name))
        for failure in b.failures:
            if failure.files and failure.path in counted:
                failure = replace(failure, files=0)
            elif failure.files:
                counted.add(failure.path)
            summary.failures.append(failure)
            summary.files_failed += failure.files
        summary.notes.extend(f"{run.name}: {note}" for note in b.notes)
        queue = QueueStats()
        for r in run.results:
            if r.queue:
                queue = queue + QueueStats.of_pairs(r.queue)
        queue_log.debug("fork branch %s: queue %s", run.name, json.dumps(queue.report()))
        summary.branches[run.name] = {
            "destination": fsutil.display(run.cfg.destination),
            "files_copied": b.files_copied, "bytes_copied": b.bytes_copied,
            "files_skipped": b.files_skipped, "files_failed": b.files_failed,
            "files_not_published": b.files_not_published,
            "files_recovered": b.files_recovered, "queue": queue.report()}
