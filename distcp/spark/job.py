"""Plan, run the WorkUnits on Spark, collect TaskResults, commit (driver).

The driver holds metadata only: work units travel as pickled rows of a
DataFrame and come back as pickled TaskResults; no file byte passes through
here. Executors run ``distcp.copying.task.unit_runner`` through ``distcp.spark.arrow``
(``mapInArrow``, not RDDs), so the same job runs on Spark Connect and on clusters
without RDD access.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import replace
from functools import partial
from typing import Any

from distcp.callbacks import DEFAULT_CALLBACK, Callback
from distcp.configuration import CopyConfiguration
from distcp.copying.join import Join, joiner
from distcp.copying.progress import JOURNAL
from distcp.copying.task import unit_runner
from distcp.copying.taskspec import TaskSpec
from distcp.copying.throttle import per_task
from distcp.errors import one_line
from distcp.model import CopyableFile, TaskResult, WorkUnit
from distcp.planning.plan import DatasetPlan
from distcp.planning.splitting import SplitFile, split_units, whole_results
from distcp.spark.arrow import RunnerFactory, run_pickled
from distcp.spark.keptcopy import (
    KeptCopy,
    copy_kept_datasets,
    requests_of,
)
from distcp.spark.logfiles import run_log_file
from distcp.spark.session import (
    default_parallelism,
    spark_session,
    warm_serves,
)
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.summary import CopyTally
from distcp.timeline import mark


def copy_on_spark(cfg: CopyConfiguration, spec: TaskSpec, files: list[CopyableFile],
                  sessions: Sessions, callback: Callback,
                  publish_now: frozenset[str] = frozenset()
                  ) -> tuple[list[TaskResult], CopyTally]:
    """``files`` copied, whole or (big ones) in ranges joined after; their results and
    what the copy reports to the summary."""
    t = time.monotonic()
    with sessions() as spark:
        started = round(time.monotonic() - t, 3)
        cores = cfg.parallelism or default_parallelism(spark)
        units, splits, resumed = split_units(cfg, spec, files, cores, publish_now)
        callback.set_size(len(files), sum(f.origin.size for f in files))
        t = time.monotonic()
        spec = replace(spec, bwlimit=per_task(cfg.bwlimit, min(len(units), cores)))
        mark("copy job submitted")
        results = run_units(spark, units, spec, callback) if units else []
        mark("copy job done")
        collected = len(results)
        phases = [("spark_start_s", started), ("copy_s", round(time.monotonic() - t, 3))]
        callback.close()
        assembled = whole_results(results, splits, spec.dst_options)
        if spec.dst.capabilities.joins_parts and splits:
            t = time.monotonic()
            callback.message(f"joining the ranges of {len(splits)} split files")
            assembled = _join_on_spark(spark, assembled, splits, spec)
            phases.append(("join_s", round(time.monotonic() - t, 3)))
    return assembled, resumed + CopyTally.of_results(results, phases, collected)


class Sessions:
    """Opens the run's Spark session (the active one when listing already opened it).

    The run's Spark log is named once, when a session first starts, and announced then;
    ``log_file`` is what the summary reports ("" when Spark never started)."""

    def __init__(self, cfg: CopyConfiguration, job_id: str, callback: Callback) -> None:
        self.cfg, self.job_id, self.callback = cfg, job_id, callback
        self.log_file = ""

    def __call__(self) -> AbstractContextManager[Any]:
        master, conf, engine = self.cfg.master, dict(self.cfg.spark_conf), self.cfg.engine
        if not self.log_file:
            self.log_file = run_log_file(self.cfg, f"spark-{self.job_id}.log")
            how = ("using the warm engine" if warm_serves(master, conf, engine)
                   else "starting Spark")  # the message a user reads: no JVM starts then
            self.callback.message(f"{how} ({master}); its log: {self.log_file}")
        return spark_session(master, conf, self.log_file, engine)


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
            partial(joiner, dict(spec.dst_options), spec.buffer_size, spec.verify,
                    spec.env))}
    except Exception as exc:  # noqa: BLE001 - Spark errors arrive as many types
        reason = one_line(exc)
        done = {j.result.guid: replace(
            j.result, status="failed", staging="", records="", error_type="SparkJobError",
            message=f"{fsutil.display(j.result.origin)}: join failed: {reason}; the next "
                    "run joins its ranges again") for j in jobs}
    return [done.get(r.guid, r) if r.guid in splits else r for r in results]


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
    twice a second while the job runs; raises what Spark raised."""
    stop = threading.Event()
    poller = threading.Thread(target=poll_progress, args=(spec, callback, stop), daemon=True)
    poller.start()
    try:
        return run_pickled(spark, items, runner)
    finally:
        stop.set()
        poller.join()


#: The first unit id of datasets whose files to copy stayed on the executors: apart
#: from the collected path's units in staging folder and progress file names.
KEPT_UNITS_FROM = 1_000_000


def copy_kept(cfg: CopyConfiguration, spec: TaskSpec, kept: tuple[DatasetPlan, ...],
              sessions: Sessions, callback: Callback) -> tuple[list[KeptCopy], CopyTally]:
    """Copy the datasets whose files stayed on the executors (``spark.keptcopy``)."""
    t = time.monotonic()
    with sessions() as spark:
        started = round(time.monotonic() - t, 3)
        cores = cfg.parallelism or default_parallelism(spark)
        files = sum(d.files_kept for d in kept)
        callback.set_size(files, sum(d.bytes_to_copy for d in kept))
        t = time.monotonic()
        copies = copy_kept_datasets(spark, cfg, spec, kept, KEPT_UNITS_FROM, cores,
                                    partial(run_polled, spec=spec, callback=callback))
        copied = round(time.monotonic() - t, 3)
        reports = [r for c in copies for r in c.reports]
        callback.update(sum(c.files_copied + c.files_failed for c in copies),
                        sum(r.bytes_read for r in reports))
        callback.close()
    return copies, CopyTally(bytes_read=sum(r.bytes_read for r in reports),
                             bytes_server_side=sum(r.bytes_server_side for r in reports),
                             requests=tuple(requests_of(copies).items()),
                             phases=(("spark_start_s", started), ("copy_s", copied)))


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
    root = spec.progress_root
    storage = storage_for(root, spec.dst_options)
    while not stop.wait(0.5):
        per_unit: dict[str, tuple[int, int]] = {}
        try:
            for name in (n for n in storage.names(root) if not JOURNAL.search(n)):
                data = json.loads(storage.read_bytes(fsutil.join(root, name), "progress"))
                unit = name.split("-", 1)[0]
                per_unit[unit] = max(per_unit.get(unit, (0, 0)), (data["files"], data["bytes"]))
        except (OSError, ValueError, KeyError):
            continue  # a file being rewritten, or none yet
        callback.update(sum(f for f, _ in per_unit.values()), sum(b for _, b in per_unit.values()))
