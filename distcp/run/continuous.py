"""A continuous copy: the lock, a catch-up run, then the streaming query (driver).

The order, once: take the destination's lock for the whole copy; list the sources (what
the stream's source then knows); copy whatever the destination lacks (an ordinary run
of the pipeline: it also finishes the commits a crash left); then start a Structured
Streaming query reading ``spark.arrivals``, each micro-batch a run of the pipeline over
its new files (``run.batch``), in the same session and under the same lock. After each batch the status document and the
metrics file say how far behind the destination is.

Stopping: SIGTERM or Ctrl-C lets the batch that runs finish, then stops the query;
a batch Spark starts after that is refused and left to the next start (its files are
not published, so nothing is lost). A second Ctrl-C ends the process at once, as in
any run: its staged copies wait for the next start. ``--until-idle`` stops once a
listing offered nothing and left nothing waiting.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from distcp import metrics, preflight
from distcp.callbacks import Callback, human_bytes
from distcp.configuration import CopyConfiguration
from distcp.planning.arrivals import Arrival, Arrivals, Waiting, read_waiting
from distcp.planning.listing import find_datasets, state_root
from distcp.run.batch import Failures, added, run_batch
from distcp.run.branch import new_job_id
from distcp.run.pipeline import Within, run_copy
from distcp.spark.arrivals import NAME, arrivals_source
from distcp.spark.job import Sessions
from distcp.state.layout import StateLayout
from distcp.state.lock import DestinationLock
from distcp.storage import storage_for
from distcp.storage.atomic import write_atomic
from distcp.summary import Summary


class Stopped(Exception):
    """A batch Spark started after a stop was asked: not run, left to the next start."""


@dataclass
class Progress:
    """What the query has done so far: the figures of its status and metrics."""

    started: float
    job_id: str
    interval: float
    summary: Summary
    state: str = "catching up"
    batches: int = 0
    last_batch: dict[str, Any] = field(default_factory=dict)
    last_end: float = 0.0
    waiting: Waiting = field(default_factory=Waiting)
    failures: Failures = field(default_factory=Failures)

    def lag(self, now: float) -> float:
        """The age of the oldest source file not yet published (0: none known)."""
        return round(now - self.waiting.oldest, 3) if self.waiting.oldest is not None else 0.0

    def document(self) -> dict[str, Any]:
        now = time.time()
        s = self.summary
        return {"job_id": self.job_id, "pid": os.getpid(), "host": socket.gethostname(),
                "state": self.state, "started": self.started, "updated": now,
                "interval": self.interval, "batches": self.batches,
                "files_copied": s.files_copied, "bytes_copied": s.bytes_copied,
                "files_failed": s.files_failed, "last_batch": self.last_batch,
                "lag_seconds": self.lag(now), "waiting_files": self.waiting.files,
                "waiting_bytes": self.waiting.bytes}


def run_continuous(cfg: CopyConfiguration, callback: Callback) -> Summary:
    """Run ``cfg`` continuously until stopped (or idle, ``--until-idle``); the summary
    of everything it published."""
    job_id = new_job_id()
    root = state_root(cfg, find_datasets(cfg))
    layout = StateLayout(root)
    options = dict(cfg.dst_options)
    preflight.check_run(cfg)
    preflight.check_local_destination(root, cfg.destination, options)
    progress = Progress(time.time(), job_id, cfg.interval, Summary(job_id=job_id))
    # its own session, never the warm engine's (a Spark Connect server would run each
    # batch in its own Python worker): --engine auto means cold here
    sessions = Sessions(cfg.with_(engine="cold"), job_id, callback)
    with DestinationLock(root, options, job_id, command="copy --continuous"), \
            ExitStack() as stack:
        with _jvm_ignoring_sigterm():
            spark = stack.enter_context(sessions())
        stop = stack.enter_context(_signals(callback))
        _report(cfg, layout, progress)  # "catching up": status tells from the start
        known = frozenset(a.fingerprint for a in Arrivals(cfg, state_url=root).listed())
        callback.message("catching up: copying what the destination lacks")
        caught_up = run_copy(cfg, callback, Within(spark))
        added(progress.summary, caught_up)
        progress.failures.settle(caught_up)
        progress.failures.into(progress.summary)
        progress.state, progress.last_end = "running", time.time()
        _report(cfg, layout, progress)
        _stream(cfg, spark, layout, progress, callback, known, stop)
        progress.state = "stopped"
        _report(cfg, layout, progress)
    progress.failures.into(progress.summary)
    progress.summary.duration_s = round(time.time() - progress.started, 3)
    progress.summary.log_file = sessions.log_file
    progress.summary.notes.append(f"continuous: {progress.batches} batch(es) after the "
                                  "catch-up")
    return progress.summary


def _stream(cfg: CopyConfiguration, spark: Any, layout: StateLayout, progress: Progress,
            callback: Callback, known: frozenset[int], stop: threading.Event) -> None:
    """The query, until a stop is asked or (``--until-idle``) nothing is left to do."""
    running = threading.Lock()
    stopping = threading.Event()

    def on_batch(df: Any, batch_id: int) -> None:
        with running:
            if stopping.is_set():
                raise Stopped(f"batch {batch_id} left to the next start")
            _batch(cfg, spark, layout, progress, callback,
                   [Arrival.of_row(*row) for row in df.collect()], batch_id)

    spark.dataSource.register(arrivals_source(cfg, known, layout.continuous_waiting, layout.root))
    query = (spark.readStream.format(NAME).load().writeStream.foreachBatch(on_batch)
             .trigger(processingTime=f"{cfg.interval} seconds")
             .option("checkpointLocation", checkpoint_of(layout, cfg))
             .queryName(f"pydistcp-{progress.job_id}").start())
    try:
        while query.isActive:
            if stop.is_set() or (cfg.until_idle and _idle(cfg, layout, progress, running)):
                break
            query.awaitTermination(0.2)
    finally:
        with running:  # the batch that runs finishes first
            stopping.set()
        query.stop()
    error = query.exception()
    if error is not None and "Stopped" not in str(error):
        raise RuntimeError(f"the continuous copy's query failed: {error}")


def _batch(cfg: CopyConfiguration, spark: Any, layout: StateLayout, progress: Progress,
           callback: Callback, arrivals: list[Arrival], batch_id: int) -> None:
    """One batch run, then its line, the status document and the metrics."""
    t = time.time()
    done = run_batch(cfg, arrivals, spark, callback)
    added(progress.summary, done)
    progress.failures.settle(done, arrivals)
    progress.failures.into(progress.summary)
    progress.batches += 1
    progress.last_end = end = time.time()
    oldest = min((a.status.mtime for a in arrivals), default=end)
    progress.last_batch = {"id": batch_id, "files": len(arrivals),
                           "files_copied": done.files_copied, "bytes_copied": done.bytes_copied,
                           "files_failed": done.files_failed, "seconds": round(end - t, 3),
                           "oldest_age_seconds": round(end - oldest, 3), "ended": end}
    _report(cfg, layout, progress)
    callback.message(f"batch {batch_id}: {done.files_copied} file(s) "
                     f"({human_bytes(done.bytes_copied)}) published, {done.files_failed} "
                     f"failed, in {end - t:.1f} s; waiting {progress.waiting.files}, "
                     f"lag {progress.lag(end):.1f} s")


def _idle(cfg: CopyConfiguration, layout: StateLayout, progress: Progress,
          running: threading.Lock) -> bool:
    """A listing after the last batch offered nothing, left nothing and found nothing
    still being written, and no batch runs."""
    if running.locked():
        return False
    seen = read_waiting(layout.continuous_waiting, dict(cfg.dst_options))
    return (seen.at > progress.last_end and not seen.offered and not seen.files
            and not seen.unsettled)


def _report(cfg: CopyConfiguration, layout: StateLayout, progress: Progress) -> None:
    """The status document (``pydistcp status``) and, with ``--metrics-file``, the
    metrics with the lag gauges."""
    options = dict(cfg.dst_options)
    progress.waiting = read_waiting(layout.continuous_waiting, options)
    write_atomic(layout.continuous_status, json.dumps(progress.document()).encode(), options,
                 durable=False)
    if cfg.metrics_file:
        now = time.time()
        metrics.write_metrics_file(cfg.metrics_file, metrics.RunMetrics(
            progress.started, now, summary=progress.summary, success=progress.summary.ok,
            extra={"continuous": {"running": progress.state != "stopped",
                                  "batches": progress.batches, "lag": progress.lag(now),
                                  "waiting_files": progress.waiting.files,
                                  "waiting_bytes": progress.waiting.bytes}}))


def checkpoint_of(layout: StateLayout, cfg: CopyConfiguration) -> str:
    """The query's checkpoint: in a local state root, else in the user's cache (Spark
    writes it through Hadoop, which the stores here are not reached through). Losing it
    loses nothing: the catch-up at each start copies what the destination lacks."""
    options = dict(cfg.dst_options)
    if storage_for(layout.root, options).capabilities.local_paths:
        return layout.continuous_checkpoint
    key = hashlib.sha256(layout.root.encode()).hexdigest()[:16]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(cache, "pydistcp", "continuous", key, "checkpoint")


@contextmanager
def _jvm_ignoring_sigterm() -> Iterator[None]:
    """The JVM started with SIGTERM ignored, which it keeps (a JVM installs no handler
    for a signal ignored at its start, as PySpark has it ignore SIGINT): a SIGTERM sent
    to the whole process group (``systemctl stop``, ``timeout``) must not end the JVM
    under the batch it asks to finish. The JVM still ends with this process: it exits
    when its parent's pipe closes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _signals(callback: Callback) -> Iterator[threading.Event]:
    """SIGTERM and the first Ctrl-C ask for a stop after the current batch; a second
    Ctrl-C interrupts at once (exit 130, as any run)."""
    stop = threading.Event()

    def asked(signum: int, frame: FrameType | None) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()
        callback.message("stopping after the current batch (Ctrl-C again: stop at once)")

    previous = {s: signal.signal(s, asked) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
