"""DRIVER: the order of a plain run: lock, replay, plan, copy, publish, sweep.

``run_copy`` is one whole run (a fork goes to ``distcp.run.fork``); the phases it calls
live in ``distcp.run.branch`` (one destination's setup), ``distcp.run.choice`` (which
way to plan and copy), ``distcp.spark.job`` (the copy on Spark) and ``distcp.commit``
(publishing).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from distcp import collection, metrics, preflight, request_count
from distcp.callbacks import DEFAULT_CALLBACK, Callback
from distcp.commit.orphans import abort_orphans
from distcp.commit.publish import publish_plan
from distcp.configuration import CopyConfiguration
from distcp.events.run import RunEvents
from distcp.events.sinks import EventSink
from distcp.model import TaskResult
from distcp.planning import visibility
from distcp.planning.beside import plan_beside, refused_session
from distcp.planning.listing import FirstPlanner, Planned, find_datasets, plan_all, state_root
from distcp.planning.strategy import NOTHING, Strategy
from distcp.planning.treeplans import DriverPairs, kept_walked
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
from distcp.run.choice import (
    BESIDE,
    PAIRED_HERE,
    collects_because,
    copy_strategies,
    every_decision,
    plans_beside,
    session_cheap,
)
from distcp.run.report import (
    count_requests,
    decisions,
    dry_run_summary,
    per_dataset,
    record_strategies,
)
from distcp.runlog import RunLog
from distcp.spark.job import copy_kept, copy_on_spark, run_session
from distcp.spark.listedcopy import (
    ListedCopy,
    publish_all_listed,
    split_listed,
)
from distcp.spark.listing import LazySession, Lister
from distcp.spark.planning import JoinPlanner
from distcp.spark.session import (
    client_modules,
)
from distcp.state.layout import StateLayout
from distcp.state.lock import DestinationLock
from distcp.state.store import StateStore
from distcp.storage import spec_for
from distcp.summary import Summary


def run_copy(cfg: CopyConfiguration, callback: Callback = DEFAULT_CALLBACK) -> Summary:
    """One whole run: finish earlier runs' work, plan, copy on Spark, publish, summarise;
    the metrics file (``--metrics-file``) written on progress ticks and at the end."""
    with metrics.reporting(cfg.metrics_file, callback) as report:
        summary = _run_copy(cfg, report)
        report.finish(summary)
        return summary


def _run_copy(cfg: CopyConfiguration, callback: Callback) -> Summary:
    if cfg.fork:  # several destinations from one read: distcp.fork
        from distcp.fork.branches import branches_of, settings_of
        from distcp.run.fork import run_fork

        return run_fork(branches_of(cfg), settings_of(cfg), callback)
    start = time.monotonic()
    summary = Summary(job_id=new_job_id(), dry_run=cfg.dry_run)
    preflight.check_run(cfg)
    datasets = find_datasets(cfg)
    root = state_root(cfg, datasets)
    if not cfg.dry_run:
        preflight.check_local_destination(root, cfg.destination, cfg.dst_options)
    log = RunLog(cfg.log_file, summary.job_id)
    try:
        if cfg.dry_run:
            return _run_locked(cfg, callback, summary, datasets, root, start, log)
        with DestinationLock(root, dict(cfg.dst_options), summary.job_id):
            return _run_locked(cfg, callback, summary, datasets, root, start, log)
    finally:
        log.close()


def _run_locked(cfg: CopyConfiguration, callback: Callback, summary: Summary,
                datasets: list[Any], root: str, start: float, log: RunLog) -> Summary:
    """The run once it holds the destination (a dry run changes nothing: no lock).

    A Spark session that listing opened (``--listing``) stays open for the copy."""
    session = LazySession(partial(run_session, cfg, summary, callback))
    sink = event_sink(cfg, root)
    try:
        with RunEvents(sink, summary.job_id, cfg.destination, cfg.sources,
                       enabled=not cfg.dry_run) as events:
            return events.end(_run_planned(cfg, callback, summary, datasets, root, start, log,
                                           session, sink))
    finally:
        session.close()


def _run_planned(cfg: CopyConfiguration, callback: Callback, summary: Summary,
                 datasets: list[Any], root: str, start: float, log: RunLog,
                 session: LazySession, sink: EventSink) -> Summary:
    pub = on_session(replace(publishing(cfg, summary.job_id, root, sink=sink), log=log),
                     session, cfg)
    dst = spec_for(cfg.destination, dict(cfg.dst_options))  # resolved once per run
    if not cfg.dry_run:
        blocked = recover(pub, cfg, summary)
        datasets = [d for d in datasets if d.urn not in blocked]
    collects = collects_because(cfg, pub.recovery)
    copies_to = StateLayout(root).kept_plan(summary.job_id) if collects is None else ""

    def planned_with(spark: Callable[[], Any]) -> Planned:
        lister = Lister(cfg.listing, spark, cheap=lambda: session.started or session_cheap(
            cfg)) if cfg.listing != "driver" else None
        pairs = DriverPairs(every_decision(cfg), copies_to,
                            lister.reason if lister is not None else lambda fs, root: PAIRED_HERE)
        with collection.paused():
            return plan_all(cfg, callback.message, datasets,
                            StateStore(root, dict(cfg.dst_options)), lister,
                            FirstPlanner(JoinPlanner(lister, every_decision(cfg), copies_to),
                                         pairs) if lister else pairs)

    planned = None
    if plans_beside(cfg) and not session.started:
        planned = plan_beside(partial(planned_with, refused_session),
                              client_modules(cfg.master, cfg.engine))
        if planned is not None:
            planned = replace(planned, strategies=tuple(
                (urn, s.besides(BESIDE)) for urn, s in planned.strategies))
    if planned is None:
        planned = planned_with(session)
    summary.strategy["plan"] = record_strategies(log, "plan", planned.strategies)
    plan = kept_walked(planned.plan, datasets, cfg, copies_to)
    summary.destination_listings = planned.destination_listings
    summary.plan_rows_collected = planned.rows_collected
    summary.add_skipped(planned.skipped)
    log.not_copied(planned.skipped)
    log.plan(plan)
    summary.phases["plan_s"] = round(time.monotonic() - start, 3)
    summary.datasets = len(plan.datasets)
    summary.files_skipped = sum(d.files_skipped for d in plan.datasets)
    if cfg.dry_run or cfg.log_level in ("info", "debug"):
        summary.plan = decisions(plan)  # -v: every decision, as a dry run shows them
    if cfg.dry_run:
        summary.strategy["copy"] = record_strategies(log, "copy", (
            ("", Strategy(NOTHING, "--dry-run: nothing is copied")),))
        return dry_run_summary(summary, plan, start)
    spec = task_spec(cfg, summary.job_id, root, dst)
    kept, rest = split_listed(plan)  # kept: files to copy that stayed on the executors
    check_destination(cfg, spec, rest.files_to_copy)
    prepare_state_dirs(root, spec)
    recovered, files = split_recovered(rest.files_to_copy, pub.recovery)
    summary.add(pub.recovery.refusals())
    results: list[TaskResult] = [r for rs in recovered for r in rs]
    copies: list[ListedCopy] = []
    if files or kept:
        prepare_staging(spec, cfg)
    if files:
        now = visibility.per_file(rest.files_to_copy, cfg.visibility)
        if pub.catalog is not None:
            session()  # the copy's session stays open for the registrations at publish
        results += copy_on_spark(cfg, spec, files, callback, summary, now)
    if kept:
        copies = copy_kept(cfg, spec, kept, callback, summary)
    summary.strategy["copy"] = record_strategies(log, "copy", tuple(
        ("", s) for s in copy_strategies(len(files), sum(d.files_listed for d in kept),
                                         collects)))
    if rest.files_to_copy or kept:
        callback.message("publishing")
    t = time.monotonic()
    with request_count.counting() as published, collection.paused():
        summary.add(publish_plan(rest, results, pub))
        summary.add(publish_all_listed(copies, pub))
    count_requests(summary, published.items(),
                   len(files) + sum(d.files_listed for d in kept))
    summary.phases["publish_s"] = round(time.monotonic() - t, 3)
    summary.per_dataset = per_dataset(plan, results, pub,
                                      Counter({c.dataset.urn: c.files_failed for c in copies}))
    if summary.job_id not in jobs_with_commits(pub.store):
        remove_job_folders(spec)  # else the pending commit still needs its staged copies
    # uploads of lost attempts and of failed files (stores that stage uploads)
    summary.uploads_aborted += abort_orphans(cfg.destination, root, spec.dst_options)
    summary.duration_s = round(time.monotonic() - start, 3)
    return summary
