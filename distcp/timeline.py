"""Where a run's seconds go, across its processes: marks in a timeline file (driver and executor).

A cold run's fixed cost is spread over several processes (the client, the driver JVM
it launches, PySpark's worker daemon and the Python workers it forks), so no one
process can time it. With ``PYDISTCP_TIMELINE=FILE`` each of them appends one line
per mark to FILE: the wall-clock time, the process id and the mark's name, written
with one ``write`` of a whole line to a file opened for appending, so lines of
concurrent processes never interleave. The client's own start is read from the
kernel (``/proc/self/stat``), since the interpreter and its imports come before any
code of ours runs. ``benchmarks/timeline.py`` turns the file into a table.

Unset (every ordinary run), a mark is one test of a module-level string: nothing is
opened, nothing is written. The variable is inherited by a cold run's JVM and its
Python workers; a warm engine's workers do not see it (their marks are missing).
"""

from __future__ import annotations

import os
import time

ENV = "PYDISTCP_TIMELINE"

#: The file named by the environment when this module was imported ("" : off).
_path = os.environ.get(ENV, "")
_once: set[str] = set()


def reread() -> None:
    """Read the variable again: a run forked by the resident client (``distcp.resident``)
    has the command's environment, not the one this module was imported in."""
    global _path
    _path = os.environ.get(ENV, "")
    _once.clear()


def mark(name: str, at: float | None = None) -> None:
    """Append ``name`` at ``at`` (wall-clock seconds; now by default) to the timeline."""
    if not _path:
        return
    line = f"{time.time() if at is None else at:.4f} {os.getpid()} {name}\n".encode()
    try:
        fd = os.open(_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError:
        pass  # a measurement must never fail a run


def mark_once(name: str) -> None:
    """``mark`` the first time this process reaches ``name`` (a worker's first task)."""
    if _path and name not in _once:
        _once.add(name)
        mark(name)


def process_started(pid: int | str = "self") -> float | None:
    """When process ``pid`` (this one by default) was created, in wall-clock seconds,
    from the kernel; None where ``/proc`` does not say (the mark is then missing, never
    guessed)."""
    try:
        with open(f"/proc/{pid}/stat") as f:  # field 22: start time, in ticks since boot
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:  # seconds since boot, to 0.01 s (btime: 1 s)
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))


def client_started() -> None:
    """Mark the client's creation (before the interpreter's start and imports), then the
    moment its imports are done and the command begins."""
    if not _path:
        return
    started = process_started()
    if started is not None:
        mark("client process created", started)
    mark("client imports done")


def process_created(name: str, pid: int) -> None:
    """Mark when another process (the driver JVM) was created."""
    started = process_started(pid) if _path else None
    if started is not None:
        mark(name, started)


def tasks_here() -> None:
    """This process runs the copy tasks itself (``run.here``): no worker's marks, whose
    names would time this process's start as a worker's."""
    _once.update(("task", "worker's first file done"))


def worker_task() -> None:
    """Mark a Python worker's creation and its first task (its imports lie between)."""
    if _path and "task" not in _once:
        _once.add("task")
        started = process_started()
        if started is not None:
            mark("worker process created", started)
        mark("worker's first task starts")
