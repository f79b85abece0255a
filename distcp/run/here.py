"""Work units copied by this process and its children, not by a Spark job (driver).

On a local master Spark's executors are this machine's cores, and a small plan's copy
takes less time than the job that would run it: a cold run's JVM, session and first
Python worker took 3.8 s before its first file moved, for 5 files of 7 bytes whose copy
took 0.01 s (``benchmarks/timeline.py``); the warm engine's client still imports
PySpark's and connects. So a small plan's work units run here (``run.choice``'s
bounds: 20,000 files when the session would be cold, 1,000 when it opens cheaply),
through the same task code Spark's tasks run (``copying.task.stream_work_unit``): the
same staging, results, request counts and commit log. Only who runs the units changes; planning and
publishing do not know. A small fork's units (``run.fork``, one read for all branches)
and a check's digests (``read_here``) run here by the same rule (``run_units``).

Who runs them: in the ``pydistcp`` command, one forked process per core
(``run.workers``), which take the units one at a time and send each one's results
back; a task's Python holds the GIL, and threads of one process copied 20,000 small
files in 2.6 times two Spark workers' time (benchmarks/RESULTS.md, 2026-11-29). An API
caller's process, whose threads and locks are not ours to fork, runs them in one thread
per core; so does a run with an object store at either end, whose client's threads
and locks a child would inherit, except S3 sources on the lean path and GCS sources,
which a child reads with clients and connections of its own (``choice.forks_here``).

What differs from a Spark job, on purpose:
- **No task retry.** A unit whose code raised fails its files as data, as a failed
  Spark job does (the next run copies them again); so does a unit whose process died.
- **The process's own environment.** The units run with this process's variables:
  ``TaskSpec.env`` exists to carry them to a server's workers, and swapping
  ``os.environ`` under other threads would race.
- **Ctrl-C.** The interrupt ends the run at once, as an interrupted Spark job does,
  with nothing published: the copying processes ignore it and are killed (threads stop
  after the file each is copying, and the command does not wait for them). A run
  killed outright takes its copying processes with it (``PR_SET_PDEATHSIG``) and leaves
  only staged copies, which the next run's recovery finds.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from typing import TypeVar

from distcp import collection
from distcp.callbacks import Callback
from distcp.checking.digests import DigestJob, DigestResult, DigestUnit, digest_runner
from distcp.configuration import CopyConfiguration
from distcp.copying.keptunit import KeptUnit
from distcp.copying.resultfiles import UnitReport
from distcp.copying.task import stream_work_unit
from distcp.copying.taskspec import TaskSpec
from distcp.copying.throttle import per_task
from distcp.errors import one_line
from distcp.model import CopyableFile, TaskResult, WorkUnit
from distcp.planning import beside
from distcp.planning.beside import preload, preloaded
from distcp.planning.plan import DatasetPlan
from distcp.planning.splitting import split_units, whole_results
from distcp.run.choice import copiers_here, cores_here, forks_here
from distcp.run.workers import run_forked
from distcp.spark.check import digest_units, poll_counters
from distcp.spark.job import KEPT_UNITS_FROM, poll_progress
from distcp.spark.keptcopy import KeptCopy, copy_kept_datasets, requests_of
from distcp.spark.pandasprobe import skip_pandas_probe
from distcp.storage import filesystems as fsutil
from distcp.storage.watchdog import bounded_by
from distcp.summary import CopyTally
from distcp.timeline import mark, tasks_here


def copy_here(cfg: CopyConfiguration, spec: TaskSpec, files: list[CopyableFile],
              callback: Callback, publish_now: frozenset[str] = frozenset()
              ) -> tuple[list[TaskResult], CopyTally]:
    """``files`` copied in this process (``copy_on_spark``'s counterpart: big files in
    ranges too, except where their parts would need a join task); their results and
    what the copy reports to the summary."""
    cores = cores_here(cfg)
    units, splits, resumed = split_units(cfg, spec, files, cores, publish_now,
                                         ranges=not spec.dst.capabilities.joins_parts)
    callback.message(f"copying {len(files):,} file(s) by {copiers_here([cfg])}, "
                     "no Spark job")
    callback.set_size(len(files), sum(f.origin.size for f in files))
    t = time.monotonic()
    mark("copying in this process")
    tasks_here()
    spec = replace(spec, env=None, bwlimit=per_task(cfg.bwlimit, min(len(units), cores)))
    with polled(spec, callback) as started:
        results = run_here(units, spec, cores, started, forks_here(cfg)) if units else []
    callback.update(len({r.guid for r in results}), sum(r.bytes_read for r in results))
    mark("copied in this process")
    callback.close()
    return whole_results(results, splits, spec.dst_options), resumed + CopyTally.of_results(
        results, (("copy_s", round(time.monotonic() - t, 3)),))


#: What publishing imports that the copying processes do not need: the manifest's
#: segment is made with ``pyarrow.compute`` (0.03 s to import), imported in a thread while
#: the processes copy, not in the publish, which waits for it.
AFTER_FORK = ("pyarrow.compute",)


def _after_fork() -> Callable[[], None]:
    """What to import once the copying processes are forked (``AFTER_FORK``; a process
    forked while a thread imports could inherit the import's lock held).

    Publishing's first array from Python objects (the manifest's segment, a kept
    unit's results file) has pyarrow probe for pandas, which it imports to ask (0.2-0.3 s
    of CPU, more than a small copy takes). The command answers "absent" at once, as a
    task does (a run here opens no session, whose client would import pandas anyway),
    before it forks its copying processes, which inherit the answer: each of them had
    imported pandas for its first results file, 0.3 s of CPU and twice the page faults
    of its copy of 10,000 small files (benchmarks/RESULTS.md, 2026-12-01, night). An
    API caller's process, whose own code may hand pyarrow pandas objects, imports it
    while the processes copy."""
    if beside.forks():
        skip_pandas_probe()
        return partial(preload, AFTER_FORK)
    return partial(preload, ("pandas", *AFTER_FORK))


@contextmanager
def polled(spec: TaskSpec, callback: Callback) -> Iterator[Callable[[], None]]:
    """The tasks' progress files summed into ``callback`` while the block runs, as on
    Spark; the block gets what starts the poller and the imports publishing needs
    (``_after_fork``), to call once the copying processes are forked, never before."""
    after_fork = _after_fork()
    stop = threading.Event()
    poller = threading.Thread(target=poll_progress, args=(spec, callback, stop), daemon=True)

    def started() -> None:
        poller.start()
        after_fork()

    try:
        yield started
    finally:
        stop.set()
        if poller.is_alive():
            poller.join()


def copy_kept_here(cfg: CopyConfiguration, spec: TaskSpec, kept: tuple[DatasetPlan, ...],
                   callback: Callback) -> tuple[list[KeptCopy], CopyTally]:
    """The kept datasets (``spark.keptcopy``: files to copy in copy-rows files, results
    in results files) copied by this process's forked copying processes, one per core,
    instead of a Spark job: the same units and copy tasks (``copying.keptunit``), so
    the same reports, results files and publish (``copy_kept``'s counterpart). Taken
    where ``choice.kept_here`` says: between local trees on a local master."""
    cores = cores_here(cfg)
    files = sum(d.files_kept for d in kept)
    callback.message(f"copying {files:,} file(s) in {cores} processes of this one, "
                     "no Spark job")
    callback.set_size(files, sum(d.bytes_to_copy for d in kept))
    t = time.monotonic()
    mark("copying in this process")
    tasks_here()
    spec = replace(spec, env=None)
    attempt = f"here{os.getpid()}"

    def run(_spark: None, items: list[tuple[int, KeptUnit]],
            runner: Callable[[str], Callable[[list[KeptUnit]], Iterator[Iterator[UnitReport]]]]
            ) -> list[UnitReport]:
        task = runner(attempt)  # the spec copy_kept_datasets gave it (its bandwidth share)

        def one(unit: KeptUnit) -> list[UnitReport]:
            return [report for each in task([unit]) for report in each]

        preloaded()
        with polled(spec, callback) as started, collection.paused():
            # a unit that raised, or whose process died, reports nothing: its files fail
            return run_forked([u for _, u in items], cores, one, lambda _u, _exc: [], started)

    copies = copy_kept_datasets(None, cfg, spec, kept, KEPT_UNITS_FROM, cores, run)
    reports = [r for c in copies for r in c.reports]
    callback.update(sum(c.files_copied + c.files_failed for c in copies),
                    sum(r.bytes_read for r in reports))
    mark("copied in this process")
    callback.close()
    return copies, CopyTally(bytes_read=sum(r.bytes_read for r in reports),
                             bytes_server_side=sum(r.bytes_server_side for r in reports),
                             requests=tuple(requests_of(copies).items()),
                             phases=(("copy_s", round(time.monotonic() - t, 3)),))


def run_here(units: list[WorkUnit], spec: TaskSpec, cores: int,
             started: Callable[[], None] = lambda: None, fork: bool = True
             ) -> list[TaskResult]:
    """Each unit in one of ``cores`` forked processes or threads (``run_units``); the
    results of all, unit by unit. A unit whose code raised fails its files
    (``failed_unit``). ``started`` runs once the units are under way (the progress
    poller's start)."""
    attempt = f"here{os.getpid()}"

    def one(unit: WorkUnit, stop: threading.Event) -> list[TaskResult]:
        results: list[TaskResult] = []
        with bounded_by(spec.request_timeout):
            for result in stream_work_unit(unit, spec, attempt):
                results.append(result)
                if stop.is_set():
                    break
        return results

    return run_units(units, cores, one, failed_unit, started, fork)


def read_here(cfg: CopyConfiguration, jobs: list[DigestJob], progress: str,
              callback: Callback) -> list[DigestResult]:
    """A check's (or ``--checksum``'s) digests read in this process (``read_digests``'
    counterpart, taken where ``choice.reads_here`` says): the same digest tasks and
    progress documents, in forked processes between local trees, else threads."""
    cores = cores_here(cfg)
    units = digest_units(cfg, jobs, progress, cores, None)
    callback.message(f"reading {len(jobs):,} file(s) by {copiers_here([cfg])}, no Spark job")
    callback.set_size(len(jobs), sum(j.size for j in jobs))
    attempt = f"here{os.getpid()}"

    def one(unit: DigestUnit, _stop: threading.Event) -> list[DigestResult]:
        task = digest_runner(cfg.buffer_size, attempt)  # its own buffer: one per thread
        return [r for each in task([unit]) for r in each]

    def failed(unit: DigestUnit, exc: BaseException) -> list[DigestResult]:
        reason = one_line(exc)
        return [DigestResult(j.key, j.side, error=f"cannot read {fsutil.display(j.url)}: "
                                                  f"{reason}") for j in unit.jobs]

    stop = threading.Event()
    poller = threading.Thread(target=poll_counters, args=(progress, cfg, callback, stop),
                              daemon=True)
    try:
        results = run_units(units, cores, one, failed, poller.start, forks_here(cfg))
    finally:
        stop.set()
        if poller.is_alive():
            poller.join()
    callback.update(len(results), sum(r.size for r in results))
    return results


U = TypeVar("U")
R = TypeVar("R")


def run_units(units: list[U], cores: int, one: Callable[[U, threading.Event], list[R]],
              failed: Callable[[U, BaseException], list[R]], started: Callable[[], None],
              fork: bool) -> list[R]:
    """Each unit run by ``one`` in one of ``cores`` forked processes (``run.workers``),
    or threads where this process may not fork (an API caller's; ``fork`` false: an
    object store's client in the run, ``choice.forks_here``); the results of all, unit
    by unit.
    ``failed`` gives a unit's results failed by what it raised; ``started`` runs once
    the units are under way, after any fork."""
    if fork and beside.forks():
        preloaded()
        never = threading.Event()
        with collection.paused():
            return run_forked(units, cores, lambda u: one(u, never), failed, started)
    started()
    return run_in_threads(units, cores, one, failed)


def run_in_threads(units: list[U], threads: int, one: Callable[[U, threading.Event], list[R]],
                   failed: Callable[[U, BaseException], list[R]]) -> list[R]:
    """Each unit in one of ``threads`` threads, ``one`` told by its event to stop after
    the file it is on. Daemon threads, not a ``ThreadPoolExecutor``, whose threads the
    interpreter's exit waits for: after Ctrl-C the command ends at once, not after each
    thread's file."""
    stop = threading.Event()
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for n in range(len(units)):
        todo.put(n)
    out: list[list[R]] = [[] for _ in units]

    def work() -> None:
        while not stop.is_set():
            try:
                n = todo.get_nowait()
            except queue.Empty:
                return
            try:
                out[n] = one(units[n], stop)
            except Exception as exc:  # noqa: BLE001 - any failure of a unit is its files'
                out[n] = failed(units[n], exc)

    workers = [threading.Thread(target=work, name=f"pydistcp-copy-{n}", daemon=True)
               for n in range(max(1, min(threads, len(units))))]
    with collection.paused():
        for w in workers:
            w.start()
        try:
            for w in workers:
                w.join()
        except KeyboardInterrupt:
            stop.set()  # each thread stops after its file; the command does not wait
            raise
    return [r for results in out for r in results]


def failed_unit(unit: WorkUnit, exc: BaseException) -> list[TaskResult]:
    """Every file of ``unit`` failed by what its copy raised (the next run copies it)."""
    reason = one_line(exc)
    return [TaskResult(guid=f.guid, unit_id=unit.unit_id, attempt="", origin=f.origin.url,
                       destination=f.destination, dataset_urn=f.dataset_urn,
                       file_set=f.file_set, status="failed", error_type=type(exc).__name__,
                       message=f"{fsutil.display(f.origin.url)}: copy failed: {reason}")
            for f in unit.files]
