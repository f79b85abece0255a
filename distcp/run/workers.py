"""Work units copied in forked worker processes, one per core (driver).

A task's Python holds the GIL for most of a small file's copy (opening, hashing,
results, journal): threads of one process copied data set B (20,000 files of
1-64 KiB) in 3.28 s where two Spark workers took 1.27 s (benchmarks/RESULTS.md,
2026-11-29). Forked children run the same task code on every core without Spark's
start: each child takes the next unit's index from a pipe, runs it and writes its
results back pickled, unit by unit; the parent reads them as they come.

Only the ``pydistcp`` command forks (``planning.beside.forks``): an API caller's
process has threads of its own whose locks a child could inherit held. The command
forks before its progress poller starts and after the publish modules' import thread
has ended (``planning.beside.preloaded``); the only other thread then is the destination
lock's heartbeat, as when planning forks. PySpark's client may be imported (a run
planning beside imports it), which starts no thread; no session is open.

A child ignores Ctrl-C (the parent kills it), dies with the parent (Linux:
``PR_SET_PDEATHSIG``) and leaves by ``os._exit``, with nothing of the parent's run
twice. A unit whose code raised fails its files in the child; a child that dies
(killed, out of memory) fails the files of the unit it had taken, and the others
take the rest of the units.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from distcp.planning.beside import die_with, fork, interrupts_held
from distcp.timeline import mark

U = TypeVar("U")
R = TypeVar("R")

#: A unit's index on the queue pipe: writes and reads of 4 bytes are atomic.
_INDEX = 4
#: A result frame's header: the pickled payload's length.
_LENGTH = 8
#: Seconds the parent waits on its children's pipes at most before looking at signals.
_WAKE_S = 0.2

def run_forked(units: list[U], workers: int, one: Callable[[U], list[R]],
               failed: Callable[[U, BaseException], list[R]],
               started: Callable[[], None]) -> list[R]:
    """Each unit run by ``one`` in one of ``workers`` forked children; the results of
    all, unit by unit (a copy's work units' TaskResults, or a kept copy's chunks'
    UnitReports). ``failed`` gives a unit's files failed by an exception (a unit
    that raised, or its child's death); ``started`` runs once the children exist (the
    progress poller's start: no thread of ours is forked)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    fds: set[int] = set()  # this process's pipe ends still open
    pids: list[int] = []
    parent = os.getpid()
    came, previous = _remembered_interrupts()
    try:
        queue_r, queue_w = _pipe(fds)
        os.set_blocking(queue_w, False)
        todo = _feed(queue_w, b"".join(n.to_bytes(_INDEX, "big") for n in range(len(units))))
        readers = []
        for _ in range(max(1, min(workers, len(units)))):
            r, w = _pipe(fds)
            with interrupts_held():  # the pid kept before a Ctrl-C meanwhile is raised
                pid = fork()
                if pid == 0:  # pragma: no cover - the child ends in os._exit
                    for fd in fds - {queue_r, w}:
                        os.close(fd)
                    _child(units, queue_r, w, one, failed, parent)
                pids.append(pid)
            _close(w, fds)
            readers.append(r)
        _close(queue_r, fds)
        started()
        out = _collect(readers, queue_w, todo, fds, came)
        deaths = _reap(pids)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        for fd in list(fds):
            _close(fd, fds)
        _kill(pids)  # interrupted: the children's copies are not wanted
    return [r for n, unit in enumerate(units)
            for r in (out[n] if n in out else failed(unit, ChildProcessError(deaths)))]


def _pipe(fds: set[int]) -> tuple[int, int]:
    r, w = os.pipe()
    fds.update((r, w))
    return r, w


def _close(fd: int, fds: set[int]) -> None:
    """Close ``fd`` once: a number closed twice may be another file's by then."""
    if fd in fds:
        fds.discard(fd)
        os.close(fd)


def _feed(queue_w: int, todo: bytes) -> bytes:
    """Write what the queue pipe takes of ``todo`` now; what is left."""
    try:
        done = os.write(queue_w, todo) if todo else 0
    except BlockingIOError:
        done = 0
    return todo[done:]


def _remembered_interrupts() -> tuple[threading.Event, Any]:
    """Ctrl-C remembered as well as raised while the children copy (and the handler it
    replaced, None where it is not ours to replace). A KeyboardInterrupt raised where
    Python only prints it (a finalizer, a callback of the collector) was lost, and the
    parent then waited on children paused for minutes: 1 run in 8 of the test that
    pauses them (2026-11-30). ``_collect`` raises it again from the flag."""
    came = threading.Event()

    def on_interrupt(signum: int, frame: Any) -> None:
        came.set()
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is None:
        return came, None
    return came, signal.signal(signal.SIGINT, on_interrupt)


def _collect(readers: list[int], queue_w: int, todo: bytes, fds: set[int],
             came: threading.Event) -> dict[int, list[Any]]:
    """Every child's results, read as they come, by unit index; the rest of the queue
    fed meanwhile and its pipe closed once fed (the children then read its end)."""
    out: dict[int, list[Any]] = {}
    pending = {r: bytearray() for r in readers}
    while pending:
        if came.is_set():
            raise KeyboardInterrupt
        if not todo:
            _close(queue_w, fds)
        writable = [queue_w] if todo else []
        # woken now and then: a Ctrl-C the kernel gave another thread (the progress
        # poller, the lock's heartbeat) interrupts no select here, and Python raises it
        # only once this thread runs again (a paused copy otherwise held it for 60 s)
        readable, ready, _ = select.select(list(pending), writable, [], _WAKE_S)
        if ready:
            todo = _feed(queue_w, todo)
        for r in readable:
            chunk = os.read(r, 1 << 20)
            if not chunk:
                del pending[r]
                _close(r, fds)
                continue
            pending[r] += chunk
            _frames(pending[r], out)
    return out


def _frames(data: bytearray, out: dict[int, list[Any]]) -> None:
    """Load the whole frames at the start of ``data`` into ``out``, and drop them."""
    while len(data) >= _LENGTH:
        size = int.from_bytes(data[:_LENGTH], "big")
        if len(data) < _LENGTH + size:
            return
        with memoryview(data) as view:  # released before the frame is dropped
            n, results = pickle.loads(view[_LENGTH:_LENGTH + size])
        out[n] = results
        del data[:_LENGTH + size]


def _reap(pids: list[int]) -> str:
    """Wait for every child; how those that did not end well ended (for the files of
    the unit each had taken)."""
    ended = []
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code < 0:
            ended.append(f"copying process {pid} killed by signal {-code}")
        elif code:
            ended.append(f"copying process {pid} exited with status {code}")
    pids.clear()
    return "; ".join(ended) or "copying process ended before its results"


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _child(units: list[U], queue_r: int, w: int, one: Callable[[U], list[R]],
           failed: Callable[[U, BaseException], list[R]], parent: int) -> None:
    """Run the queue's units until it is empty, each one's results written to ``w``."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        die_with(parent)  # or leave now, if the parent died before this line
        with os.fdopen(w, "wb", buffering=1 << 16) as results:
            while len(index := os.read(queue_r, _INDEX)) == _INDEX:
                n = int.from_bytes(index, "big")
                try:
                    done = one(units[n])
                except Exception as exc:  # noqa: BLE001 - any failure of a unit is its files'
                    done = failed(units[n], exc)
                data = pickle.dumps((n, done), pickle.HIGHEST_PROTOCOL)
                results.write(len(data).to_bytes(_LENGTH, "big"))
                results.write(data)
                results.flush()
        mark("copying process ended")  # the processes' ends apart: the copy's tail
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(0)
    finally:
        os._exit(70)  # EX_SOFTWARE: what failed above is the parent's to report
