"""DRIVER: plan, run the WorkUnits on Spark, collect TaskResults, commit.

The driver holds metadata only: work units travel as pickled rows of a
DataFrame and come back as pickled TaskResults; no file byte passes through
here. Executors run ``distcp.copying.task.unit_runner`` through ``distcp.spark.arrow``
(``mapInArrow``, not RDDs), so the same job runs on Spark Connect and on clusters
without RDD access.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import replace
from functools import partial
from typing import Any

from distcp import collection, metrics, preflight, request_count
from distcp.callbacks import DEFAULT_CALLBACK, Callback
from distcp.checks import check_list
from distcp.commit.lock import DestinationLock
from distcp.commit.log import CommitStepStore
from distcp.commit.orphans import abort_orphans
from distcp.commit.publish import Publishing, publish_plan
from distcp.commit.recovery import RecoveryArea
from distcp.commit.replay import replay_pending, sweep_dead_jobs
from distcp.commit.state import StateStore
from distcp.commit.steps import CommitContext
from distcp.configuration import CopyConfiguration
from distcp.copying.join import Join, joiner
from distcp.copying.progress import JOURNAL
from distcp.copying.task import unit_runner
from distcp.copying.taskenv import task_environment
from distcp.copying.taskspec import TaskSpec
from distcp.copying.throttle import per_task
from distcp.errors import DestinationNotWritableError, PlanningError
from distcp.events.run import RunEvents, import_ahead
from distcp.events.sinks import EventSink
from distcp.model import CopyableFile, TaskResult, WorkUnit
from distcp.planning import visibility
from distcp.planning.beside import plan_beside, refused_session
from distcp.planning.listing import FirstPlanner, Planned, find_datasets, plan_all, state_root
from distcp.planning.packing import pack, per_core, unit_count
from distcp.planning.plan import DatasetPlan, Plan
from distcp.planning.splitting import (
    SplitFile,
    SplitStore,
    assemble_ranges,
    idle_core_split,
    resumed_results,
    units_for,
)
from distcp.planning.treeplans import DriverPairs, kept_walked
from distcp.publishers.catalog import CatalogTarget
from distcp.runlog import RunLog
from distcp.spark.arrow import RunnerFactory, run_pickled
from distcp.spark.listedcopy import (
    ListedCopy,
    copy_listed,
    publish_all_listed,
    requests_of,
    split_listed,
)
from distcp.spark.listing import LazySession, Lister
from distcp.spark.planning import JoinPlanner
from distcp.spark.publish import fan_out_with
from distcp.spark.session import (
    client_modules,
    default_parallelism,
    opens_cheaply,
    spark_session,
)
from distcp.state.bounds import Bounds, protected_roots, source_roots
from distcp.storage import StorageSpec, s3, spec_for, storage_for
from distcp.storage import filesystems as fsutil
from distcp.summary import Summary


def new_job_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)


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
        from distcp.fork.run import run_fork

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
    copies_to = (fsutil.join(root, "staging", summary.job_id, "plan")
                 if keeps_copies(cfg, pub.recovery) else "")

    def planned_with(spark: Callable[[], Any]) -> Planned:
        lister = Lister(cfg.listing, spark, cheap=lambda: session.started or session_cheap(
            cfg)) if cfg.listing != "driver" else None
        pairs = DriverPairs(every_decision(cfg), copies_to)
        with collection.paused():
            return plan_all(cfg, callback.message, datasets,
                            StateStore(root, dict(cfg.dst_options)), lister,
                            FirstPlanner(JoinPlanner(lister, every_decision(cfg), copies_to),
                                         pairs) if lister else pairs)

    planned = None
    if plans_beside(cfg) and not session.started:
        planned = plan_beside(partial(planned_with, refused_session),
                              client_modules(cfg.master, cfg.engine))
    if planned is None:
        planned = planned_with(session)
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
        return _dry_run(summary, plan, start)
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
        results += _copy_on_spark(cfg, spec, files, callback, summary, now)
    if kept:
        copies = _copy_kept(cfg, spec, kept, callback, summary)
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


def session_cheap(cfg: CopyConfiguration) -> bool:
    """``opens_cheaply`` for this run's master, settings and engine."""
    return opens_cheaply(cfg.master, dict(cfg.spark_conf), cfg.engine)


def plans_beside(cfg: CopyConfiguration) -> bool:
    """Whether the run plans in a forked child while it imports PySpark's client
    (``distcp.planning.beside``): its session opens cheaply, planning does not need it
    (``--listing spark`` does), and both ends are local trees. An object store's listing
    may move to Spark after the driver walked ``KEYS_FROM`` keys to tell, a walk the child
    could not hand back: the run would walk them twice."""
    local = all(storage_for(url, dict(cfg.src_options)).capabilities.local_paths
                for url in cfg.sources) and storage_for(
        cfg.destination, dict(cfg.dst_options)).capabilities.local_paths
    return not cfg.dry_run and cfg.listing != "spark" and local and session_cheap(cfg)


def keeps_copies(cfg: CopyConfiguration, recovery: RecoveryArea) -> bool:
    """Whether planning (on Spark, or on the driver past ``treeplans.HELD`` files) keeps
    a plain copy's files to copy on the executors (``distcp.spark.listedcopy``). Not when
    every decision is shown or logged, nor for what still needs each file on the driver:
    ``move``, the catalog, split files, ``--visibility file``, ``--commit-policy full``,
    quality checks and copies an earlier run kept for recovery. Staged uploads (object
    stores) keep their parts in the results files, which ``PublishListed`` completes."""
    return not (every_decision(cfg) or cfg.move or cfg.catalog_table or cfg.split_size
                or cfg.visibility != "file-set" or cfg.commit_policy == "full" or cfg.check
                or recovery.guids())


def every_decision(cfg: CopyConfiguration) -> bool:
    """Whether the run shows or logs every decision (``--dry-run``, ``-v``,
    ``--log-file``), skipped files' included; else those are only counted."""
    return cfg.dry_run or cfg.log_level in ("info", "debug") or cfg.log_file is not None


def per_dataset(plan: Plan, results: list[TaskResult], pub: Publishing,
                kept_failed: Counter[str] | None = None) -> dict[str, dict[str, Any]]:
    """What this run did to each dataset: published (from the run records its commits
    wrote, so only what was published counts), skipped, failed (``kept_failed``: of
    datasets whose results stayed on the executors), and a stream dataset's
    watermarks."""
    store = StateStore(pub.ctx.state_root, pub.ctx.dst_options, pub.ctx.state_cache)
    failed = Counter(r.dataset_urn for r in results if not r.ok) + (kept_failed or Counter())
    out: dict[str, dict[str, Any]] = {}
    for d in plan.datasets:
        state = store.load(d.urn)
        runs = [r for r in state.runs if r.get("job_id") == pub.job_id]
        counts: dict[str, Any] = {
            "files_transferred": sum(r.get("files", 0) for r in runs),
            "bytes_transferred": sum(r.get("bytes", 0) for r in runs),
            "files_skipped": d.files_skipped, "errors": failed[d.urn]}
        marks = {"low": state.low_watermark, "expected_high": state.expected_high_watermark,
                 "actual_high": state.actual_high_watermark}
        if any(v is not None for v in marks.values()):
            counts["watermarks"] = marks
        out[d.urn] = counts
    return out


def recover(pub: Publishing, cfg: CopyConfiguration, summary: Summary) -> set[str]:
    """Replay pending commits, keep orphaned verified copies, expire old ones.

    Returns the URNs whose commits could not be finished: they are not copied now.
    """
    blocked, replayed = replay_pending(pub.store, pub.ctx, cfg.max_replays)
    summary.add(replayed)
    sweep_dead_jobs(pub.ctx.state_root, pub.ctx.dst_options, pub.job_id, pub.recovery,
                    jobs_with_commits(pub.store))
    summary.recovery_expired = pub.recovery.expire(cfg.recovery_retention)
    summary.uploads_aborted += abort_orphans(cfg.destination, pub.ctx.state_root,
                                             pub.ctx.dst_options)
    return blocked


def check_destination(cfg: CopyConfiguration, spec: TaskSpec,
                       files: list[CopyableFile]) -> None:
    """Refuse, before any copy, what the destination cannot take (S3: bad keys)."""
    storage = spec.dst.open()
    for f in files:
        problem = storage.name_problem(f.destination)
        if problem:
            raise PlanningError(f"cannot copy {fsutil.display(f.origin.url)} to "
                                f"{f.destination}: {problem}; rename it at the source or "
                                "exclude it (--exclude)", path=f.destination)


#: Folders of the state root that commit steps write single documents into.
STATE_FOLDERS = ("commits", "commits/aside", "datasets", "events")


def prepare_state_dirs(root: str, spec: TaskSpec) -> None:
    """Create the state root's folders on filesystems that need a folder before a
    file goes into it (FTP, SFTP...); object stores and local writes need none."""
    storage = spec.dst.open()
    for name in STATE_FOLDERS:
        try:
            storage.prepare_folder(fsutil.join(root, name))
        except OSError as exc:
            raise PlanningError(f"cannot write to the state directory {fsutil.display(root)}: "
                                f"{exc}", path=root) from exc


def jobs_with_commits(store: CommitStepStore) -> set[str]:
    """Jobs whose staged copies a pending or set-aside commit still refers to."""
    return {p.job_id for p in store.pending() + store.pending(aside=True)}


def publishing(cfg: CopyConfiguration, job_id: str, root: str, branch: str = "main",
               sink: EventSink | None = None) -> Publishing:
    """``sink``: the run's event sink, shared with its START/COMPLETE events (one
    endpoint found dead is not tried again)."""
    options = dict(cfg.dst_options)
    ctx = CommitContext(dst_options=options, state_root=root,
                        src_options=dict(cfg.src_options),
                        events=sink or event_sink(cfg, root),
                        bounds=Bounds(cfg.destination, root, source_roots(cfg.sources)))
    catalog = (CatalogTarget(cfg.catalog_table, cfg.catalog_partitions or "")
               if cfg.catalog_table else None)
    return Publishing(job_id=job_id, started=time.time(), ctx=ctx,
                      store=CommitStepStore(root, options), recovery=RecoveryArea(root, options),
                      policy=cfg.commit_policy,  # type: ignore[arg-type]
                      catalog=catalog, move=cfg.move, compare=cfg.compare,
                      delete_empty_src_dirs=cfg.delete_empty_src_dirs,
                      destination=cfg.destination, branch=branch)


def on_session(pub: Publishing, session: LazySession, cfg: CopyConfiguration) -> Publishing:
    """``pub`` with the run's Spark session: catalog steps open it lazily, per-file
    steps go to the executors as ``--publishing`` says (``distcp.spark.publish``)."""
    return replace(pub, ctx=replace(pub.ctx, spark=session, fan_out=fan_out_with(
        session, cfg.publishing, cfg.master)))


def event_sink(cfg: CopyConfiguration, root: str) -> EventSink:
    return EventSink(cfg.events, root, dict(cfg.dst_options), cfg.events_timeout)


def split_recovered(files: list[CopyableFile], recovery: RecoveryArea
                     ) -> tuple[list[list[TaskResult]], list[CopyableFile]]:
    """Files whose verified copy an earlier run kept, and the files still to copy."""
    kept = recovery.guids()
    recovered: list[list[TaskResult]] = []
    todo: list[CopyableFile] = []
    for f in files:
        results = recovery.take(f) if kept and f.guid in kept else None  # a sha1 a file
        if results:
            recovered.append(results)
        else:
            todo.append(f)
    return recovered, todo


def count_requests(summary: Summary, publish: request_count.Counts, files: int) -> None:
    """Add the publish step's requests to the tasks' and divide by the files copied."""
    totals = request_count.total([tuple(summary.requests.items()), publish])
    summary.requests = {k: n for k, n in sorted(totals.items()) if n}
    summary.requests_per_file = request_count.per_file(summary.requests, files)


def _copy_on_spark(cfg: CopyConfiguration, spec: TaskSpec, files: list[CopyableFile],
                   callback: Callback, summary: Summary,
                   publish_now: frozenset[str] = frozenset()) -> list[TaskResult]:
    t = time.monotonic()
    with run_session(cfg, summary, callback) as spark:
        summary.phases["spark_start_s"] = round(time.monotonic() - t, 3)
        cores = cfg.parallelism or default_parallelism(spark)
        splits = _prepare_splits(cfg, spec, files, summary, cores)
        whole = [f for f in files if f.guid not in splits] if splits else files
        cost = sum(f.origin.size for f in whole) + len(whole) * cfg.file_cost
        units = pack(whole, unit_count(len(whole), cfg.tasks or cores,
                                       per_core(cfg.tasks, cost, cores)), cfg.file_cost)
        units = visibility.mark(units, publish_now)
        for sf in splits.values():
            units += units_for(sf, len(units))
        callback.set_size(len(files), sum(f.origin.size for f in files))
        t = time.monotonic()
        spec = replace(spec, bwlimit=per_task(cfg.bwlimit, min(len(units), cores)))
        results = run_units(spark, units, spec, callback) if units else []
        summary.results_collected += len(results)
        summary.phases["copy_s"] = round(time.monotonic() - t, 3)
        callback.close()
        results += [r for sf in splits.values() for r in resumed_results(sf)]
        summary.bytes_read += sum(r.bytes_read for r in results)
        summary.bytes_server_side += sum(r.bytes_server_side for r in results if r.ok)
        summary.requests = request_count.total(r.requests for r in results)
        assembled = assemble_ranges(results, splits, spec.dst_options)
        if spec.dst.capabilities.joins_parts and splits:
            t = time.monotonic()
            callback.message(f"joining the ranges of {len(splits)} split files")
            assembled = _join_on_spark(spark, assembled, splits, spec)
            summary.phases["join_s"] = round(time.monotonic() - t, 3)
    return assembled


def run_session(cfg: CopyConfiguration, summary: Summary, callback: Callback
             ) -> AbstractContextManager[Any]:
    """The run's Spark session (the active one when listing already opened it)."""
    log_file = os.path.join(_log_dir(cfg), f"spark-{summary.job_id}.log")
    if not summary.log_file:
        summary.log_file = log_file
        callback.message(f"starting Spark ({cfg.master}); its log: {log_file}")
    return spark_session(cfg.master, dict(cfg.spark_conf), log_file, cfg.engine)


def _join_on_spark(spark: Any, results: list[TaskResult], splits: dict[str, SplitFile],
                   spec: TaskSpec) -> list[TaskResult]:
    """One join task per split file whose ranges all arrived (``distcp.copying.join``), in
    parallel; a failed join fails its file, never the run."""
    jobs = [Join(r, splits[r.guid].records, splits[r.guid].count, splits[r.guid].file.origin.size)
            for r in results if r.ok and r.guid in splits]
    if not jobs:
        return results
    try:
        done = {r.guid: r for r in run_pickled(
            spark, list(enumerate(jobs)),
            partial(joiner, dict(spec.dst_options), spec.buffer_size, spec.verify))}
    except Exception as exc:  # noqa: BLE001 - Spark errors arrive as many types
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        done = {j.result.guid: replace(
            j.result, status="failed", staging="", records="", error_type="SparkJobError",
            message=f"{fsutil.display(j.result.origin)}: join failed: {reason}; the next "
                    "run joins its ranges again") for j in jobs}
    return [done.get(r.guid, r) if r.guid in splits else r for r in results]


def _prepare_splits(cfg: CopyConfiguration, spec: TaskSpec, files: list[CopyableFile],
                    summary: Summary, cores: int) -> dict[str, SplitFile]:
    """The split files of this run, with the ranges earlier runs already sent
    (``--split-size 0``: none)."""
    wanted = cfg.split_size if cfg.split_size is not None else _idle_split(
        cfg, spec, files, cores)
    if not wanted:
        return {}
    store = SplitStore(spec.progress_root.rsplit("/progress/", 1)[0], spec.dst_options,
                       spec.dst.open())
    splits = {f.guid: store.prepare(f, wanted) for f in files
              if f.origin.size > wanted and not f.converters}
    if not cfg.split_size and splits:
        summary.notes.append(f"{len(splits)} big file(s) copied in ranges of about "
                             f"{wanted >> 20} MiB over the idle cores (--split-size unset)")
    # the idle cores' ranges are approximate anyway: only a size the user gave is noted
    adjusted = {sf.range_size for sf in splits.values()} - {wanted} if cfg.split_size else set()
    for size in sorted(adjusted):
        summary.notes.append(f"split ranges of {size} bytes instead of --split-size "
                             f"{cfg.split_size}: ranges are whole MiB (the digest block) and, "
                             "on S3, parts of 5 MiB or more, at most 10,000 per file")
    summary.ranges_resumed = sum(len(sf.done) for sf in splits.values())
    summary.bytes_resumed = sum(sf.bytes_resumed for sf in splits.values())
    return splits


def _idle_split(cfg: CopyConfiguration, spec: TaskSpec, files: list[CopyableFile],
                cores: int) -> int | None:
    """``--split-size`` unset: ranges for the idle cores (``idle_core_split``) where the
    ranges are parts of one upload that completing joins for free (object stores), and
    nothing needs a file whole in one task (``--check``, ``--visibility file``). Not on a
    local disk: a whole file moves through the kernel at ~1.6 GB/s here, and ranges add
    the joined file's re-read at publish (warm engine, 2 cores, medians of 3: one 2 GiB
    file 3.00 s split against 3.26 s whole, the skew set 3.45 s against 3.09 s)."""
    if cfg.check or cfg.visibility != "file-set" or not spec.dst.capabilities.multipart:
        return None
    return idle_core_split([f.origin.size for f in files if not f.converters],
                           cfg.tasks or cores)


def run_units(spark: Any, units: list[WorkUnit], spec: TaskSpec,
              callback: Callback = DEFAULT_CALLBACK) -> list[TaskResult]:
    """One Spark job, one task per WorkUnit; a failed job fails its files as data."""
    try:
        results: list[TaskResult] = run_polled(
            spark, [(u.unit_id, u) for u in units], partial(unit_runner, spec), spec, callback)
    except Exception as exc:  # noqa: BLE001 - Spark errors arrive as many types
        return _job_failed(units, exc)
    callback.update(len({r.guid for r in results}), sum(r.bytes_read for r in results))
    return results


def run_polled(spark: Any, items: list[tuple[int, Any]], runner: RunnerFactory,
               spec: TaskSpec, callback: Callback) -> list[Any]:
    """``run_pickled`` with the tasks' progress files summed into ``callback`` about
    twice a second while the job runs; raises what Spark raised. The session is up by
    now, so this thread mostly waits from here: the events' client is imported meanwhile."""
    stop = threading.Event()
    poller = threading.Thread(target=poll_progress, args=(spec, callback, stop), daemon=True)
    poller.start()
    import_ahead()
    try:
        return run_pickled(spark, items, runner)
    finally:
        stop.set()
        poller.join()


#: The first unit id of datasets whose files to copy stayed on the executors: apart
#: from the collected path's units in staging folder and progress file names.
KEPT_UNITS_FROM = 1_000_000


def _copy_kept(cfg: CopyConfiguration, spec: TaskSpec, kept: tuple[DatasetPlan, ...],
               callback: Callback, summary: Summary) -> list[ListedCopy]:
    """Copy the datasets whose files stayed on the executors (``spark.listedcopy``)."""
    t = time.monotonic()
    with run_session(cfg, summary, callback) as spark:
        summary.phases.setdefault("spark_start_s", round(time.monotonic() - t, 3))
        cores = cfg.parallelism or default_parallelism(spark)
        files = sum(d.files_listed for d in kept)
        callback.set_size(files, sum(d.bytes_to_copy for d in kept))
        t = time.monotonic()
        copies = copy_listed(spark, cfg, spec, kept, KEPT_UNITS_FROM, cores,
                             partial(run_polled, spec=spec, callback=callback))
        summary.phases["copy_s"] = round(summary.phases.get("copy_s", 0.0)
                                          + time.monotonic() - t, 3)
        reports = [r for c in copies for r in c.reports]
        callback.update(sum(c.files_copied + c.files_failed for c in copies),
                        sum(r.bytes_read for r in reports))
        callback.close()
    summary.bytes_read += sum(r.bytes_read for r in reports)
    summary.bytes_server_side += sum(r.bytes_server_side for r in reports)
    summary.requests = request_count.total([tuple(summary.requests.items()),
                                            tuple(requests_of(copies).items())])
    return copies


def _job_failed(units: Iterable[WorkUnit], exc: BaseException) -> list[TaskResult]:
    text = str(exc).strip().splitlines()
    reason = next((line for line in text if "Error" in line or "Exception" in line),
                  text[0] if text else type(exc).__name__)[:300]
    return [TaskResult(guid=f.guid, unit_id=u.unit_id, attempt="", origin=f.origin.url,
                       destination=f.destination, dataset_urn=f.dataset_urn,
                       file_set=f.file_set, status="failed", error_type="SparkJobError",
                       message=f"{fsutil.display(f.origin.url)}: Spark job failed: {reason}")
            for u in units for f in u.files]


def poll_progress(spec: TaskSpec, callback: Callback, stop: threading.Event) -> None:
    """Sum the tasks' progress files about twice a second until the job ends."""
    fs, root = fsutil.filesystem(spec.progress_root, spec.dst_options)
    while not stop.wait(0.5):
        per_unit: dict[str, tuple[int, int]] = {}
        try:
            paths = fs.ls(root, detail=False)
            for path in (p for p in paths if not JOURNAL.search(p)):
                data = json.loads(fs.cat_file(path))
                unit = path.rsplit("/", 1)[-1].split("-", 1)[0]
                per_unit[unit] = max(per_unit.get(unit, (0, 0)), (data["files"], data["bytes"]))
        except (OSError, ValueError, KeyError):
            continue  # a file being rewritten, or none yet
        callback.update(sum(f for f, _ in per_unit.values()), sum(b for _, b in per_unit.values()))


def task_spec(cfg: CopyConfiguration, job_id: str, root: str,
               dst: StorageSpec | None = None) -> TaskSpec:
    dst = dst or spec_for(cfg.destination, dict(cfg.dst_options))
    return TaskSpec(
        job_id=job_id,
        staging_root=fsutil.join(root, "staging", job_id),
        progress_root=fsutil.join(root, "progress", job_id),
        buffer_size=cfg.buffer_size,
        verify=cfg.verify,
        src_options=dict(cfg.src_options),
        dst_options=dict(cfg.dst_options),
        converter_options=cfg.converter_options,
        dst=dst,
        server_side=_server_side(cfg, dst),
        part_size=max(cfg.buffer_size, s3.MIN_PART),
        env=task_environment(),
        s3_timeout=s3.watchdog_seconds(),
        checks=check_list(cfg.check),
        chmod=cfg.chmod_rules,
        protected=protected_roots(cfg.destination, root),
    )


def _server_side(cfg: CopyConfiguration, dst: StorageSpec) -> bool:
    """S3 -> S3 with the same options (one endpoint, one account) and no converter."""
    if cfg.converters or not dst.capabilities.server_side_copy:
        return False
    return dict(cfg.src_options) == dict(cfg.dst_options)


def prepare_staging(spec: TaskSpec, cfg: CopyConfiguration) -> None:
    """Fail fast, with one clear line, when the destination cannot take any write."""
    for url in (spec.staging_root, spec.progress_root):
        fs, path = fsutil.filesystem(url, spec.dst_options)
        try:
            fs.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise DestinationNotWritableError(
                f"cannot write to destination {fsutil.display(cfg.destination)}: "
                f"{exc.strerror or exc}", path=cfg.destination) from exc


def remove_job_folders(spec: TaskSpec) -> None:
    """Remove this job's staging and progress directories.

    The state directory itself stays: removing it would change the mtime of the
    destination root after its attributes were set.
    """
    for url in (spec.staging_root, spec.progress_root):
        fs, path = fsutil.filesystem(url, spec.dst_options)
        try:
            if fs.exists(path):
                fs.rm(path, recursive=True)
        except OSError:
            pass  # leftovers of a failed cleanup are swept by the next run


def decisions(plan: Any) -> list[dict[str, str]]:
    rows = []
    for d in plan.datasets:
        for a in d.copy:
            rows.append({"action": "copy", "path": a.file.destination, "reason": a.reason})
        for a in d.skip:
            rows.append({"action": "skip", "path": a.file.destination, "reason": a.reason})
        for url in d.delete:
            rows.append({"action": "delete", "path": url, "reason": "not in source"})
    return rows


def _dry_run(summary: Summary, plan: Any, start: float) -> Summary:
    summary.files_copied = len(plan.files_to_copy)
    summary.links_copied = sum(1 for f in plan.files_to_copy if f.origin.link_target is not None)
    summary.bytes_copied = plan.bytes_to_copy
    summary.files_deleted = sum(len(d.delete) for d in plan.datasets)
    summary.duration_s = round(time.monotonic() - start, 3)
    return summary


def _log_dir(cfg: CopyConfiguration) -> str:
    if cfg.log_dir:
        return cfg.log_dir
    base = os.environ.get("PYDISTCP_LOG_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pydistcp", "logs")
    return base
