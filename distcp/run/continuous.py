"""A continuous copy: the lock, a catch-up run, then the streaming query (driver).

The order, once: take the destination's lock for the whole copy; list the sources (what
the stream's source then knows); copy whatever the destination lacks (an ordinary run
of the pipeline: it also finishes the commits a crash left); then start a Structured
Streaming query reading ``spark.arrivals``, each micro-batch a run of the pipeline over
its new files (``run.batch``), in the same session and under the same lock. After each
batch the status document and the metrics file say how far behind the destination is.

Where the batches run: Spark calls the query's sink (``Batches``) in this process on a
classic session, and in the warm engine's Python worker on Spark Connect. The conductor
follows them the same way in both (``Follower``: the status document they write), and
stops them the same way (``stop.json``, then the query once no batch runs).

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
import shutil
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
from distcp.copying.taskenv import applied_environment, task_environment
from distcp.errors import PlanningError
from distcp.planning.arrivals import Arrival, Arrivals, Waiting, read_waiting
from distcp.planning.listing import find_datasets, state_root
from distcp.run.batch import Failures, added, run_batch
from distcp.run.branch import new_job_id
from distcp.run.pipeline import Within, run_copy
from distcp.spark.arrivals import arrivals_source, source_name
from distcp.spark.job import Sessions
from distcp.spark.session import is_connect
from distcp.state.layout import StateLayout
from distcp.state.lock import DestinationLock
from distcp.state.store import read_json_or_none
from distcp.storage import storage_for
from distcp.storage.atomic import write_atomic
from distcp.storage.filesystems import os_path
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
    #: The state root (where a batch run in the warm engine's worker reports).
    root: str = ""
    #: The batch that runs now (None: none).
    running: int | None = None
    #: The batch refused after a stop was asked (None: none): the conductor knows its
    #: query's error for a clean stop from this, not from the error's text, which Spark
    #: Connect may shorten.
    refused: int | None = None
    #: The last batches' lines (``KEPT_LINES``), for a conductor that follows them.
    lines: list[dict[str, Any]] = field(default_factory=list)

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
                "waiting_bytes": self.waiting.bytes, "running": self.running,
                "refused": self.refused, "last_end": self.last_end, "lines": self.lines}


def run_continuous(cfg: CopyConfiguration, callback: Callback) -> Summary:
    """Run ``cfg`` continuously until stopped (or idle, ``--until-idle``); the summary
    of everything it published."""
    job_id = new_job_id()
    root = state_root(cfg, find_datasets(cfg))
    layout = StateLayout(root)
    options = dict(cfg.dst_options)
    preflight.check_run(cfg)
    preflight.check_local_destination(root, cfg.destination, options)
    progress = Progress(time.time(), job_id, cfg.interval, Summary(job_id=job_id),
                        root=root)
    # on the warm engine (a running one under --engine auto) the query runs there, its
    # batches in the engine's Python worker
    sessions = Sessions(cfg, job_id, callback)
    with DestinationLock(root, options, job_id, command="copy --continuous"), \
            ExitStack() as stack:
        with _jvm_ignoring_sigterm():
            spark = stack.enter_context(sessions())
        stop = stack.enter_context(_signals(callback))
        storage_for(layout.continuous_stop, options).remove_file(layout.continuous_stop)
        _report(cfg, layout, progress)  # "catching up": status tells from the start
        known = frozenset(a.fingerprint for a in Arrivals(cfg, state_url=root).listed())
        callback.message("catching up: copying what the destination lacks")
        caught_up = run_copy(cfg, callback, Within(spark))
        added(progress.summary, caught_up)
        progress.failures.settle(caught_up)
        progress.failures.into(progress.summary)
        progress.state, progress.last_end = "running", time.time()
        _report(cfg, layout, progress)
        progress = _stream(cfg, spark, layout, progress, callback, known, stop)
        progress.state = "stopped"
        _report(cfg, layout, progress)
    progress.summary.duration_s = round(time.time() - progress.started, 3)
    progress.summary.log_file = sessions.log_file
    progress.summary.notes.append(f"continuous: {progress.batches} batch(es) after the "
                                  "catch-up")
    return progress.summary


def _stream(cfg: CopyConfiguration, spark: Any, layout: StateLayout, progress: Progress,
            callback: Callback, known: frozenset[int], stop: threading.Event) -> Progress:
    """The query, until a stop is asked or (``--until-idle``) nothing is left to do; the
    progress its batches made (read back from the state folder, where they wrote it)."""
    remote = is_connect(spark)
    # the worker also gets this process's folder: the run's relative paths are ours
    sink = Batches(cfg, layout.root, progress, Client.here(),
                   task_environment() if remote else None, None if remote else callback,
                   os.getcwd() if remote else None)
    name = source_name(progress.job_id)
    checkpoint = checkpoint_of(layout, cfg)
    if cleared_unstarted(checkpoint):
        callback.message("the last query was killed before its first batch; "
                         "its checkpoint starts anew")
    spark.dataSource.register(arrivals_source(cfg, known, layout.continuous_waiting,
                                              layout.root, name, sink.client, sink.cwd))
    query = (spark.readStream.format(name).load().writeStream.foreachBatch(sink)
             .trigger(processingTime=f"{cfg.interval} seconds")
             .option("checkpointLocation", checkpoint)
             .queryName(f"pydistcp-{progress.job_id}").start())
    follower = Follower(layout, dict(cfg.dst_options), callback if remote else None,
                        follow_every(layout, cfg))
    failure: Exception | None = None
    try:
        while query.isActive:
            seen = follower.poll()
            if stop.is_set() or (cfg.until_idle and _idle(cfg, layout, seen)):
                break
            query.awaitTermination(FOLLOW_EVERY)
    except Exception as exc:  # noqa: BLE001 - a failed query raises here, any type
        failure = exc
    finally:
        _stop_between_batches(query, layout, dict(cfg.dst_options), progress.job_id)
    status = follower.poll(fresh=True)
    error = failure or query.exception()
    if not stopped_cleanly(error, status):
        read = read_waiting(layout.continuous_waiting, dict(cfg.dst_options))
        if read.error and read.storage_error:  # one line and exit 3, as any run's
            raise OSError(f"{read.error}; the copy stopped")
        if read.error:
            raise PlanningError(f"{read.error}; the copy stopped")
        raise RuntimeError(f"the continuous copy's query failed: {error}")
    return follower.progress(progress)


def stopped_cleanly(error: BaseException | None, status: dict[str, Any]) -> bool:
    """Whether the query ended as asked: without an error, or with the one a batch
    refused after the stop raised (``Batches``), known from the status document it wrote
    (``refused``) or, failing that, from the error's text (``Stopped``), which Spark
    Connect may shorten."""
    return error is None or status.get("refused") is not None or "Stopped" in str(error)


#: Seconds between two looks of the conductor at its query (and, in a local state root,
#: at the batches' status).
FOLLOW_EVERY = 0.2


def follow_every(layout: StateLayout, cfg: CopyConfiguration) -> float:
    """How often the status document is read: each look in a local state root; in an
    object store's, every half interval (at least 1 s), not five requests a second."""
    local = storage_for(layout.root, dict(cfg.dst_options)).capabilities.local_paths
    return FOLLOW_EVERY if local else max(1.0, cfg.interval / 2)


@dataclass(frozen=True)
class Client:
    """The process that conducts the query: its batches and its source stop once it is
    gone (a warm engine's query outlives a client killed outright)."""

    host: str
    pid: int

    @classmethod
    def here(cls) -> Client:
        return cls(socket.gethostname(), os.getpid())

    def gone(self) -> bool:
        """Whether the client ended (known on its own host only)."""
        if self.host != socket.gethostname() or self.pid == os.getpid():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


@dataclass
class Batches:
    """The query's sink: each micro-batch one run of the pipeline (``run.batch``), then
    the status document, the summary so far and the metrics.

    It runs where Spark calls ``foreachBatch``: in this process on a classic session
    (``callback`` shows each batch's progress), in the warm engine's Python worker on a
    Spark Connect one, pickled there with the client's task variables (``env``: the
    worker has the server's environment); the client follows the status document
    (``Follower``). Either way a batch first says it runs, then looks for a stop (the
    conductor's ``stop.json``, or its client gone): a batch started after a stop was
    asked is refused and left to the next start, and the conductor stops the query only
    once no batch runs."""

    cfg: CopyConfiguration
    root: str
    progress: Progress
    client: Client
    env: dict[str, str] | None = field(default=None, repr=False)
    callback: Callback | None = None
    #: The client's folder, for a worker (of this query alone) to resolve paths from.
    cwd: str | None = None

    def __call__(self, df: Any, batch_id: int) -> None:
        if self.cwd:
            os.chdir(self.cwd)
        layout, progress = StateLayout(self.root), self.progress
        progress.running = batch_id
        _report(self.cfg, layout, progress)
        try:
            if _stop_asked(layout, dict(self.cfg.dst_options), progress.job_id) \
                    or self.client.gone():
                progress.refused = batch_id
                raise Stopped(f"batch {batch_id} left to the next start")
            with applied_environment(self.env):
                _batch(self.cfg, df.sparkSession, progress, self.callback or Callback(),
                       [Arrival.of_row(*row) for row in df.collect()], batch_id)
        finally:
            progress.running = None
            _report(self.cfg, layout, progress)

    def __getstate__(self) -> dict[str, Any]:
        """A terminal's callback stays here (the worker has none)."""
        return {**self.__dict__, "callback": None}


class Follower:
    """The conductor's view of its batches: the status document they write, read on
    each look; with ``callback`` (batches run elsewhere, in the warm engine), each new
    batch's line shown from it."""

    def __init__(self, layout: StateLayout, options: dict[str, Any],
                 callback: Callback | None, every: float = 0.0) -> None:
        self.layout, self.options, self.callback = layout, options, callback
        self.doc: dict[str, Any] = {}
        self.shown = -1
        self.every, self.read_at = every, float("-inf")

    def poll(self, fresh: bool = False) -> dict[str, Any]:
        """The status document as it is now (the last one read if none can be, or if
        the last read is less than ``every`` seconds old and not ``fresh``)."""
        now = time.monotonic()
        if not fresh and now - self.read_at < self.every:
            return self.doc
        self.read_at = now
        doc = read_json_or_none(self.layout.continuous_status, self.options,
                                "the continuous copy's status")
        if doc is None:
            return self.doc
        self.doc = doc
        for line in self.doc.get("lines", ()):
            if line["id"] > self.shown:
                self.shown = line["id"]
                if self.callback is not None:
                    self.callback.message(line["text"])
        return self.doc

    def progress(self, mine: Progress) -> Progress:
        """``mine`` (the catch-up's) with what the batches did, as they wrote it."""
        doc = self.doc
        if not doc.get("batches"):
            return mine
        written = read_json_or_none(self.layout.continuous_summary, self.options,
                                    "the continuous copy's summary")
        if written is None:
            return mine
        summary = Summary.from_dict(written)
        mine.summary, mine.batches = summary, int(doc["batches"])
        mine.last_batch, mine.last_end = doc.get("last_batch", {}), float(doc["last_end"])
        mine.lines = list(doc.get("lines", ()))
        mine.waiting = read_waiting(self.layout.continuous_waiting, self.options)
        return mine


def _stop_between_batches(query: Any, layout: StateLayout, options: dict[str, Any],
                          job_id: str) -> None:
    """Ask the batches to stop (``stop.json``), wait until none runs, stop the query.
    A batch that starts meanwhile sees the request after saying it runs: refused."""
    write_atomic(layout.continuous_stop, json.dumps({"job_id": job_id}).encode(), options,
                 durable=False)
    follower = Follower(layout, options, None)
    while query.isActive and follower.poll().get("running") is not None:
        try:
            query.awaitTermination(FOLLOW_EVERY)
        except Exception:  # noqa: BLE001 - it ended failing (a batch refused): the
            break  # conductor judges query.exception() next (stopped_cleanly)
    query.stop()


def _stop_asked(layout: StateLayout, options: dict[str, Any], job_id: str) -> bool:
    doc = read_json_or_none(layout.continuous_stop, options, "the continuous stop")
    return doc is not None and bool(doc.get("job_id") == job_id)


def _batch(cfg: CopyConfiguration, spark: Any, progress: Progress, callback: Callback,
           arrivals: list[Arrival], batch_id: int) -> None:
    """One batch run, then its line (kept for the status document)."""
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
                           "oldest_age_seconds": round(end - oldest, 3), "ended": end,
                           "pid": os.getpid()}
    progress.waiting = read_waiting(StateLayout(progress.root).continuous_waiting,
                                    dict(cfg.dst_options))
    text = (f"batch {batch_id}: {done.files_copied} file(s) "
            f"({human_bytes(done.bytes_copied)}) published, {done.files_failed} "
            f"failed, in {end - t:.1f} s; waiting {progress.waiting.files}, "
            f"lag {progress.lag(end):.1f} s")
    progress.lines = [*progress.lines[-(KEPT_LINES - 1):], {"id": batch_id, "text": text}]
    callback.message(text)


#: The batch lines the status document keeps (the conductor shows those it has not).
KEPT_LINES = 20


def _idle(cfg: CopyConfiguration, layout: StateLayout, status: dict[str, Any]) -> bool:
    """A listing after the last batch offered nothing, left nothing and found nothing
    still being written, and no batch runs."""
    if status.get("running") is not None:
        return False
    seen = read_waiting(layout.continuous_waiting, dict(cfg.dst_options))
    return (seen.at > float(status.get("last_end", 0.0)) and not seen.offered
            and not seen.files and not seen.unsettled and not seen.error)


def _report(cfg: CopyConfiguration, layout: StateLayout, progress: Progress) -> None:
    """The status document (``pydistcp status``), the summary so far and, with
    ``--metrics-file``, the metrics with the lag gauges."""
    options = dict(cfg.dst_options)
    write_atomic(layout.continuous_summary, progress.summary.to_json().encode(), options,
                 durable=False)
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


def cleared_unstarted(checkpoint: str) -> bool:
    """Remove a checkpoint whose query left files but never logged a batch's offsets;
    whether it did. A copy killed while Spark wrote batch 0's offsets leaves the
    temporary file of that write, and Spark then refuses the folder at every later start
    ("should be empty on batch 0"). Without a batch there is nothing to resume, and the
    catch-up at each start copies what the destination lacks. The path is the run's own
    (the state root's or the user cache's), never one taken from the data."""
    folder = os_path(checkpoint)
    left = {log: _names(os.path.join(folder, log)) for log in ("offsets", "commits", "state")}
    if any(name.isdigit() for name in left["offsets"]) or not any(left.values()):
        return False
    shutil.rmtree(folder)
    return True


def _names(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except FileNotFoundError:
        return []


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
