"""Work units copied in this process, where a Spark job's start would cost more (driver).

On a local master Spark's executors are this machine's cores, and a small plan's copy
takes less time than the job that would run it: a cold run's JVM, session and first
Python worker took 3.8 s before its first file moved, for 5 files of 7 bytes whose copy
took 0.01 s (``benchmarks/timeline.py``); the warm engine's client still imports
PySpark's and connects. So a small plan's work units run here, in one thread per core,
through the same task code Spark's tasks run (``copying.task.stream_work_unit``): the
same staging, results, request counts and commit log. Only who runs the units changes;
planning and publishing do not know.

What differs from a Spark job, on purpose:
- **No task retry.** A unit whose code raised fails its files as data, as a failed
  Spark job does (the next run copies them again).
- **The process's own environment.** The units run with this process's variables:
  ``TaskSpec.env`` exists to carry them to a server's workers, and swapping
  ``os.environ`` under other threads would race.
- **Ctrl-C.** The interrupt stops each thread after the file it is copying; the run
  then ends as an interrupted Spark job does, with nothing published.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import replace

from distcp import collection, request_count
from distcp.callbacks import Callback
from distcp.configuration import CopyConfiguration
from distcp.copying.task import stream_work_unit
from distcp.copying.taskspec import TaskSpec
from distcp.model import CopyableFile, TaskResult, WorkUnit
from distcp.planning import visibility
from distcp.planning.packing import units_of
from distcp.spark.jvm import is_local_master
from distcp.storage import filesystems as fsutil
from distcp.storage.watchdog import bounded_by
from distcp.summary import CopyTally
from distcp.timeline import mark


def cores_here(cfg: CopyConfiguration) -> int:
    """Threads for the units: ``--cores``, else the local master's (``local[N]``; ``*``
    and anything else: this machine's)."""
    if cfg.parallelism:
        return cfg.parallelism
    master = cfg.master
    if master == "local":
        return 1
    inside = master[len("local["):-1] if is_local_master(master) else ""
    return int(inside) if inside.isdigit() and int(inside) > 0 else os.cpu_count() or 2


def copy_here(cfg: CopyConfiguration, spec: TaskSpec, files: list[CopyableFile],
              callback: Callback, publish_now: frozenset[str] = frozenset()
              ) -> tuple[list[TaskResult], CopyTally]:
    """``files`` copied in this process (``copy_on_spark``'s counterpart, without
    ranges); their results and what the copy reports to the summary."""
    cores = cores_here(cfg)
    units = visibility.mark(units_of(files, cfg.tasks or cores, cfg.tasks, cfg.file_cost),
                            publish_now)
    callback.set_size(len(files), sum(f.origin.size for f in files))
    t = time.monotonic()
    mark("copying in this process")
    results = run_here(units, replace(spec, env=None), callback, cores) if units else []
    mark("copied in this process")
    callback.close()
    return results, CopyTally(
        results_collected=len(results), bytes_read=sum(r.bytes_read for r in results),
        bytes_server_side=sum(r.bytes_server_side for r in results if r.ok),
        requests=tuple(request_count.total(r.requests for r in results).items()),
        phases=(("copy_s", round(time.monotonic() - t, 3)),))


def run_here(units: list[WorkUnit], spec: TaskSpec, callback: Callback, threads: int
             ) -> list[TaskResult]:
    """Each unit in a thread of a pool of ``threads``; the results of all, unit by unit.
    A unit whose code raised fails its files (``failed_unit``)."""
    stop = threading.Event()
    attempt = f"here{os.getpid()}"
    done: list[tuple[int, int]] = []

    def one(unit: WorkUnit) -> list[TaskResult]:
        out: list[TaskResult] = []
        with bounded_by(spec.request_timeout):
            for result in stream_work_unit(unit, spec, attempt):
                out.append(result)
                if stop.is_set():
                    break
        done.append((len({r.guid for r in out}), sum(r.bytes_read for r in out)))
        callback.update(sum(n for n, _ in done), sum(b for _, b in done))
        return out

    with collection.paused(), ThreadPoolExecutor(max(1, threads), "pydistcp-copy") as pool:
        futures = [pool.submit(one, unit) for unit in units]
        try:
            wait(futures)
        except KeyboardInterrupt:
            stop.set()
            for f in futures:
                f.cancel()
            raise
    return [r for unit, f in zip(units, futures, strict=True) for r in _results(unit, f)]


def _results(unit: WorkUnit, future: Future[list[TaskResult]]) -> list[TaskResult]:
    exc = future.exception()
    return failed_unit(unit, exc) if exc is not None else future.result()


def failed_unit(unit: WorkUnit, exc: BaseException) -> list[TaskResult]:
    """Every file of ``unit`` failed by what its copy raised (the next run copies it)."""
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    return [TaskResult(guid=f.guid, unit_id=unit.unit_id, attempt="", origin=f.origin.url,
                       destination=f.destination, dataset_urn=f.dataset_urn,
                       file_set=f.file_set, status="failed", error_type=type(exc).__name__,
                       message=f"{fsutil.display(f.origin.url)}: copy failed: {reason}")
            for f in unit.files]
