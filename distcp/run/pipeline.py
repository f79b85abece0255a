"""The order of every run, written once (driver).

Lock, replay, plan, route, copy, agree, publish, sweep, over a list of branches
(``conduct``); what each phase does is the run's kind, its ``Steps``.

A copy or a move (``CopySteps``) is one branch, a fork several (``run.fork`` adds
routing, one read for all branches and the ``all`` policy); a check (``run.check``) is
one branch that takes no lock, lists and pairs both sides as its plan, reads digests as
its copy and publishes nothing. What each phase does to one destination lives in
``run.branch``; how a branch plans in ``run.planners``, how a run copies in
``run.copiers`` (one branch) and ``run.fork`` (several), what it reports in
``run.report``; the copy on Spark in ``spark.job`` and publishing in ``commit``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from distcp import collection, metrics, request_count
from distcp.callbacks import DEFAULT_CALLBACK, Callback
from distcp.checking.compare import CheckSettings
from distcp.checking.report import CheckReport
from distcp.commit.collisions import refuse_collisions
from distcp.commit.orphans import abort_orphans
from distcp.commit.publish import publish_plan
from distcp.configuration import CopyConfiguration
from distcp.converters.base import expands
from distcp.datasets.base import CopyableDataset
from distcp.events.run import RunEvents
from distcp.fork.agree import agreed
from distcp.fork.branches import Branch, ForkSettings, branches_of, check_branches, settings_of
from distcp.planning.listing import find_datasets
from distcp.planning.strategy import NOTHING, Strategy
from distcp.run.branch import (
    BranchRun,
    event_sink,
    jobs_with_commits,
    locked,
    new_job_id,
    on_session,
    opened,
    prepared,
    publishing,
    recover,
    remove_job_folders,
)
from distcp.run.check import CheckSteps
from distcp.run.contents import compare_contents
from distcp.run.copiers import copy_branch
from distcp.run.fork import copy_forked, fold, route
from distcp.run.planners import planned
from distcp.run.report import (
    count_requests,
    decisions,
    dry_run_counts,
    per_dataset,
    record_outcomes,
    record_strategies,
)
from distcp.runlog import RunLog
from distcp.spark.job import Sessions
from distcp.spark.keptcopy import publish_all_kept
from distcp.spark.listing import LazySession
from distcp.storage import filesystems as fsutil
from distcp.storage import spec_for
from distcp.summary import Summary, Tally
from distcp.timeline import mark

R_co = TypeVar("R_co", covariant=True)


class Steps(Protocol[R_co]):
    """What each phase of a run does: the run's kind (a copy or move, a check)."""

    def lock(self, runs: list[BranchRun], stack: ExitStack) -> None: ...
    def replay(self, runs: list[BranchRun]) -> None: ...
    def plan(self, runs: list[BranchRun]) -> None: ...
    def route(self, runs: list[BranchRun]) -> None: ...
    def plan_only(self) -> bool: ...
    def copy(self, runs: list[BranchRun]) -> int: ...
    def agree(self, runs: list[BranchRun]) -> None: ...
    def publish(self, runs: list[BranchRun], read: int) -> None: ...
    def sweep(self, runs: list[BranchRun]) -> None: ...
    def finish(self, runs: list[BranchRun]) -> R_co: ...


R = TypeVar("R")


def conduct(steps: Steps[R], runs: list[BranchRun]) -> R:
    """lock -> replay -> plan -> route -> copy -> agree -> publish -> sweep: the order of
    every run (a dry run stops after the plan); ``copy`` returns the files it read."""
    with ExitStack() as stack:
        steps.lock(runs, stack)
        mark("locked")
        steps.replay(runs)
        mark("replayed")
        steps.plan(runs)
        mark("planned")
        steps.route(runs)
        if not steps.plan_only():
            read = steps.copy(runs)
            mark("copied")
            steps.agree(runs)
            steps.publish(runs, read)
            mark("published")
            steps.sweep(runs)
        return steps.finish(runs)


@dataclass(frozen=True)
class Within:
    """A run that is one batch of a longer one (``copy --continuous``): the longer run
    holds the destination's lock and the Spark session, and says which datasets, of
    those the finder finds, the batch copies, and of which files."""

    spark: Any
    found: Callable[[CopyConfiguration], list[CopyableDataset]] = find_datasets


def run_copy(cfg: CopyConfiguration, callback: Callback = DEFAULT_CALLBACK,
             within: Within | None = None) -> Summary:
    """One whole run of ``cfg`` (with ``--fork``, of each of its branches); the metrics
    file (``--metrics-file``) written on progress ticks and at the end. A continuous
    copy (``run.continuous``) is a streaming query whose batches are such runs,
    ``within`` it."""
    if cfg.fork:
        return run_branches(branches_of(cfg), settings_of(cfg), callback, within)
    return run_branches((Branch("main", cfg),), None, callback, within)


def run_branches(branches: tuple[Branch, ...], settings: ForkSettings | None,
                 callback: Callback = DEFAULT_CALLBACK, within: Within | None = None
                 ) -> Summary:
    """One run over ``branches``: a fork when ``settings`` are given (even of one).

    Listings this process's filesystems cached in an earlier run (a continuous copy's
    catch-up and batches, the warm engine's runs) are forgotten first: objects were
    written since, by its tasks or by another process, and a stat answered from such a
    listing would call a published file missing and copy it again."""
    fsutil.forget_listings()
    with metrics.reporting(branches[0].cfg.metrics_file, callback) as report:
        if settings is not None:
            check_branches(branches)
        steps = CopySteps(branches[0].cfg, settings, report, within)
        summary = conduct(steps, opened(branches, steps.summary, forked=settings is not None,
                                        found=within.found if within else find_datasets))
        report.finish(summary)
        return summary


def run_check(cfg: CopyConfiguration, settings: CheckSettings,
              callback: Callback = DEFAULT_CALLBACK) -> CheckReport:
    """Compare ``cfg.sources`` with ``cfg.destination``; the report of every path."""
    steps = CheckSteps(cfg, settings, callback)
    return conduct(steps, opened((Branch("main", cfg),), Summary(job_id=steps.job_id),
                                 forked=False))


class CopySteps:
    """A copy's steps (a move's too: its publish deletes the sources), over one branch
    or a fork's several; what it returns is the run's ``Summary``."""

    def __init__(self, lead: CopyConfiguration, settings: ForkSettings | None,
                 callback: Callback, within: Within | None = None) -> None:
        self.lead, self.settings, self.callback = lead, settings, callback
        self.within = within
        self.start = time.monotonic()
        self.summary = Summary(job_id=new_job_id(), dry_run=lead.dry_run)
        self.sessions = Sessions(lead, self.summary.job_id, callback)
        self.session = LazySession(self.sessions if within is None
                                   else lambda: nullcontext(within.spark))

    def lock(self, runs: list[BranchRun], stack: ExitStack) -> None:
        """Every branch's destination locked, then the run's log, Spark session (opened
        by the first phase that needs it), START/COMPLETE/FAIL events and each branch's
        publishing."""
        lead, job_id = self.lead, self.summary.job_id
        self.log = RunLog(lead.log_file, job_id)
        stack.callback(self.log.close)
        if self.within is None:  # else the longer run holds the lock
            locked(runs, job_id, stack)
        stack.callback(self.session.close)
        sink = event_sink(lead, runs[0].root)  # the run's own events: the lead's target
        self.events = stack.enter_context(RunEvents(sink, job_id, lead.destination,
                                                    lead.sources, enabled=not lead.dry_run))
        for n, run in enumerate(runs):
            pub = publishing(run.cfg, job_id, run.root, run.name, sink if n == 0 else None)
            run.pub = on_session(replace(pub, log=self.log), self.session, run.cfg)

    def replay(self, runs: list[BranchRun]) -> None:
        """Earlier runs' pending commits finished; a dataset whose commit could not be
        is not copied now."""
        self.dst = spec_for(self.lead.destination, dict(self.lead.dst_options))  # once a run
        self.asked = {run.name: [d.urn for d in run.datasets] for run in runs}
        if self.lead.dry_run:
            return
        for run in runs:
            blocked, recovered = recover(run.publishing, run.cfg)
            run.summary.add(recovered)
            run.datasets = [d for d in run.datasets if d.urn not in blocked]

    def plan(self, runs: list[BranchRun]) -> None:
        """Each branch's plan; with ``--checksum``, the copies that wait on their
        contents settled by reading them (``run.contents``), a dry run's too."""
        _plan(runs, self.callback, self.summary, self.log, self.session)
        for run in runs:
            t = time.monotonic()
            compared = compare_contents(run, self.session, self.callback)
            if compared.files_compared:
                run.summary.add(compared)
                run.summary.phases["compare_s"] = round(time.monotonic() - t, 3)

    def route(self, runs: list[BranchRun]) -> None:
        """A fork's files to its branches; then what the plan says, before any copy."""
        if self.settings is not None:
            unrouted = route(runs, self.settings)
            if unrouted:
                self.summary.notes.append(f"{unrouted} file(s) went to no branch (the fork "
                                          "operator chose none for them)")
        _report_plan(runs, self.summary, self.start, self.log)

    def plan_only(self) -> bool:
        return self.lead.dry_run

    def copy(self, runs: list[BranchRun]) -> int:
        forked = self.settings is not None
        for run in runs:
            prepared(run, None if forked else self.dst, server_side=not forked)
        if self.settings is not None:
            read, tally = copy_forked(runs, self.settings, self.callback, self.session,
                                      self.log)
        else:
            read, tally = copy_branch(runs[0], self.sessions, self.session, self.callback,
                                      self.log)
        self.summary.add_copy(tally)
        return read

    def agree(self, runs: list[BranchRun]) -> None:
        """Sources whose outputs land on one file fail whole (``commit.collisions``);
        then, ``--fork-policy all``: a file some branch would not publish fails in all."""
        for run in runs:
            if expands(run.cfg.converters):  # else planning saw every destination
                run.results = refuse_collisions(run.results, run.plan)
        if self.settings is None or self.settings.policy != "all":
            return
        for run, rs in zip(runs, agreed([r.name for r in runs], [r.plan for r in runs],
                                        [r.results for r in runs],
                                        [r.publishing for r in runs]), strict=True):
            run.results = rs

    def publish(self, runs: list[BranchRun], read: int) -> None:
        _publish(runs, self.callback, self.summary, read)

    def sweep(self, runs: list[BranchRun]) -> None:
        _sweep(runs)

    def finish(self, runs: list[BranchRun]) -> Summary:
        self.summary.log_file = self.sessions.log_file
        if self.lead.dry_run:
            return self.events.end(_dry_run(runs, self.summary, self.start, self.log))
        for run in runs:  # before fold: each branch's failures are its own
            record_outcomes(run.root, run.publishing.ctx.dst_options, self.summary.job_id,
                            self.asked[run.name], run.summary.failures)
        return self.events.end(_finish(runs, self.settings, self.summary, self.start))


def _plan(runs: list[BranchRun], callback: Callback, summary: Summary, log: RunLog,
          session: LazySession) -> None:
    """Each branch's plan, by the planner chosen for it; the source listing's entries
    not copied are reported once (every branch lists the same sources)."""
    for n, run in enumerate(runs):
        done = planned(run, session, callback.message)
        run.plan = done.plan
        summary.strategy.setdefault("plan", []).extend(
            {"branch": run.name, **row} if run.forked else row
            for row in record_strategies(log, "plan", done.strategies, run.cfg.destination))
        run.summary.destination_listings = done.destination_listings
        run.summary.plan_rows_collected = done.rows_collected
        if n == 0:
            summary.add_skipped(done.skipped)
            log.not_copied(done.skipped)


def _report_plan(runs: list[BranchRun], summary: Summary, start: float, log: RunLog) -> None:
    """What the plan says, before anything is copied: the log file's decisions, the
    files skipped, and (``--dry-run``, ``-v``) every decision."""
    lead = runs[0].cfg
    for run in runs:
        log.plan(run.plan)
        run.summary.files_skipped = sum(d.files_skipped for d in run.plan.datasets)
    summary.phases["plan_s"] = round(time.monotonic() - start, 3)
    summary.datasets = len({d.urn for run in runs for d in run.plan.datasets})
    if lead.dry_run or lead.log_level in ("info", "debug"):
        summary.plan = [{**row, "branch": run.name} if run.forked else row
                        for run in runs for row in decisions(run.plan)]


def _dry_run(runs: list[BranchRun], summary: Summary, start: float, log: RunLog
             ) -> Summary:
    summary.strategy["copy"] = record_strategies(log, "copy", (
        ("", Strategy(NOTHING, "--dry-run: nothing is copied")),), runs[0].cfg.destination)
    for run in runs:
        dry_run_counts(run.summary, run.plan)
    if runs[0].forked:
        fold(summary, runs)
    summary.duration_s = round(time.monotonic() - start, 3)
    return summary


def _publish(runs: list[BranchRun], callback: Callback, summary: Summary, read: int) -> None:
    """Each branch's file sets through its commit log, one branch after the other."""
    if any(run.rest.files_to_copy or run.kept for run in runs):
        callback.message("publishing")
    t = time.monotonic()
    with request_count.counting() as published, collection.paused():
        for run in runs:
            run.summary.add(publish_plan(run.rest, run.results, run.publishing))
            run.summary.add(publish_all_kept(run.copies, run.publishing))
    count_requests(summary, published.items(), read)
    summary.phases["publish_s"] = round(time.monotonic() - t, 3)
    for run in runs:
        run.summary.per_dataset = per_dataset(
            run.plan, run.results, run.publishing,
            Counter({c.dataset.urn: c.files_failed for c in run.copies}))


def _sweep(runs: list[BranchRun]) -> None:
    """What the run leaves: its job's folders (unless a pending commit needs its staged
    copies) and the uploads nothing will complete (stores that stage uploads). When
    every commit the run logged was finished, its store knows that (``left_by``) and the
    log is listed only if an upload is pending (``abort_orphans``): two listings, one
    round trip on an object store, saved in the common case."""
    for run in runs:
        unfinished = None
        if run.publishing.store.left_by(run.publishing.job_id):
            unfinished = run.publishing.store.unfinished()  # read once for both
        if unfinished is None or run.publishing.job_id not in jobs_with_commits(unfinished):
            remove_job_folders(run.task)
        run.summary.add(Tally(uploads_aborted=abort_orphans(
            run.cfg.destination, run.root, run.task.dst_options, unfinished=unfinished)))


def _finish(runs: list[BranchRun], settings: ForkSettings | None, summary: Summary,
            start: float) -> Summary:
    if settings is not None:
        fold(summary, runs)
    summary.duration_s = round(time.monotonic() - start, 3)
    return summary
