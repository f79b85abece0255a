"""The order of every run, written once (driver).

Lock, replay, plan, route, copy, agree, publish, sweep, over a list of branches.

A plain copy is one branch, a fork several (``run.fork`` adds routing, one read for all
branches and the ``all`` policy). What each phase does to one destination lives in
``run.branch``; how a branch plans in ``run.planners``, how a run copies in
``run.copiers`` (one branch) and ``run.fork`` (several), what it reports in
``run.report``; the copy on Spark in ``spark.job`` and publishing in ``commit``.
"""

from __future__ import annotations

import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import replace
from functools import partial

from distcp import collection, metrics, request_count
from distcp.callbacks import DEFAULT_CALLBACK, Callback
from distcp.commit.orphans import abort_orphans
from distcp.commit.publish import publish_plan
from distcp.configuration import CopyConfiguration
from distcp.events.run import RunEvents
from distcp.fork.agree import agreed
from distcp.fork.branches import Branch, ForkSettings, branches_of, check_branches, settings_of
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
from distcp.run.copiers import copy_branch
from distcp.run.fork import copy_forked, fold, route
from distcp.run.planners import planned
from distcp.run.report import (
    count_requests,
    decisions,
    dry_run_counts,
    per_dataset,
    record_strategies,
)
from distcp.runlog import RunLog
from distcp.spark.job import run_session
from distcp.spark.keptcopy import publish_all_kept
from distcp.spark.listing import LazySession
from distcp.storage import spec_for
from distcp.summary import Summary


def run_copy(cfg: CopyConfiguration, callback: Callback = DEFAULT_CALLBACK) -> Summary:
    """One whole run of ``cfg`` (with ``--fork``, of each of its branches); the metrics
    file (``--metrics-file``) written on progress ticks and at the end."""
    if cfg.fork:
        return run_branches(branches_of(cfg), settings_of(cfg), callback)
    return run_branches((Branch("main", cfg),), None, callback)


def run_branches(branches: tuple[Branch, ...], settings: ForkSettings | None,
                 callback: Callback = DEFAULT_CALLBACK) -> Summary:
    """One run over ``branches``: a fork when ``settings`` are given (even of one)."""
    with metrics.reporting(branches[0].cfg.metrics_file, callback) as report:
        summary = _run(branches, settings, report)
        report.finish(summary)
        return summary


def _run(branches: tuple[Branch, ...], settings: ForkSettings | None, callback: Callback
         ) -> Summary:
    """Lock every branch's destination, then the phases, with the run's Spark session
    (opened by the first phase that needs it) and its START/COMPLETE/FAIL events."""
    if settings is not None:
        check_branches(branches)
    start = time.monotonic()
    lead = branches[0].cfg
    summary = Summary(job_id=new_job_id(), dry_run=lead.dry_run)
    runs = opened(branches, summary, forked=settings is not None)
    log = RunLog(lead.log_file, summary.job_id)
    try:
        with ExitStack() as stack:
            locked(runs, summary.job_id, stack)
            session = LazySession(partial(run_session, lead, summary, callback))
            stack.callback(session.close)
            sink = event_sink(lead, runs[0].root)  # the run's own events: the lead's target
            with RunEvents(sink, summary.job_id, lead.destination, lead.sources,
                           enabled=not lead.dry_run) as events:
                for n, run in enumerate(runs):
                    pub = publishing(run.cfg, summary.job_id, run.root, run.name,
                                     sink if n == 0 else None)
                    run.pub = on_session(replace(pub, log=log), session, run.cfg)
                return events.end(_phases(runs, settings, callback, summary, start, log,
                                          session))
    finally:
        log.close()


def _phases(runs: list[BranchRun], settings: ForkSettings | None, callback: Callback,
            summary: Summary, start: float, log: RunLog, session: LazySession) -> Summary:
    """replay -> plan -> route -> copy -> agree -> publish -> sweep."""
    lead = runs[0].cfg
    dst = spec_for(lead.destination, dict(lead.dst_options))  # resolved once per run
    for run in runs:
        if not lead.dry_run:
            blocked = recover(run.publishing, run.cfg, run.summary)
            run.datasets = [d for d in run.datasets if d.urn not in blocked]
    _plan(runs, callback, summary, log, session)
    if settings is not None:
        unrouted = route(runs, settings)
        if unrouted:
            summary.notes.append(f"{unrouted} file(s) went to no branch (the fork operator "
                                 "chose none for them)")
    _report_plan(runs, summary, start, log)
    if lead.dry_run:
        return _dry_run(runs, summary, start, log)
    for run in runs:
        prepared(run, None if settings is not None else dst, server_side=settings is None)
    read = (copy_forked(runs, settings, callback, summary, session, log)
            if settings is not None else copy_branch(runs[0], session, callback, log))
    if settings is not None and settings.policy == "all":
        for run, rs in zip(runs, agreed([r.name for r in runs], [r.plan for r in runs],
                                        [r.results for r in runs],
                                        [r.publishing for r in runs]), strict=True):
            run.results = rs
    _publish(runs, callback, summary, read)
    _sweep(runs)
    return _finish(runs, settings, summary, start)


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
    copies) and the uploads nothing will complete (stores that stage uploads)."""
    for run in runs:
        if run.publishing.job_id not in jobs_with_commits(run.publishing.store):
            remove_job_folders(run.task)
        run.summary.uploads_aborted += abort_orphans(run.cfg.destination, run.root,
                                                     run.task.dst_options)


def _finish(runs: list[BranchRun], settings: ForkSettings | None, summary: Summary,
            start: float) -> Summary:
    if settings is not None:
        fold(summary, runs)
    summary.duration_s = round(time.monotonic() - start, 3)
    return summary
