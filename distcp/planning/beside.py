"""A run's planning in a forked child while the run imports its Spark client (driver).

On the warm engine a run's two serial costs before its first task are its planning
(B, 20,000 files: ~0.3 s, listing and writing copy rows) and the import of PySpark's
Spark Connect client (~0.37 s: pandas alone ~0.2 s, imported at the top of PySpark's
session module). Both are Python holding the GIL, so a thread runs them one after the
other (measured: no gain); two processes run them at once on two cores. The child
forked here plans (its copy-rows files land where the run's staging is) and sends the
``Planned`` back pickled; meanwhile this process imports the client's modules one at a
time, stopping as soon as the plan arrives. It starts only once the child has found a
file to copy (``copies_ahead``): a run with nothing to copy (a no-op rerun) leaves both
cores to its walks, which the imports would otherwise share them with (three processes
on two cores), and waits for no import it did not need.

Only the ``pydistcp`` command forks (``enable``, called by ``distcp.entry``): the API's
caller's process (a notebook's kernel, a test runner) has threads of its own whose locks
a child could inherit held. In the command, the only other thread then is the
destination lock's heartbeat, which the child neither has nor needs. The child ignores
Ctrl-C (the parent ends it), dies with the parent (Linux: ``PR_SET_PDEATHSIG``) and
leaves with ``os._exit``: nothing of the parent's runs twice. A plan or an error that
cannot travel back, a child that dies, or a planner that needs the Spark session (a tree
big enough to list on Spark) makes the run plan here, as it did before: planning writes
only its own copy-rows files, which planning again rewrites.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import select
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, TypeVar, cast

from distcp.faults import crash_point, delay_at

T = TypeVar("T")

_enabled = False


def enable() -> None:
    """Let this process fork for planning and for copying a small plan here
    (``run.workers``): the ``pydistcp`` command's own process."""
    global _enabled
    _enabled = True


def forks() -> bool:
    """Whether this process may fork children of its own (``enable``; POSIX)."""
    return _enabled and hasattr(os, "fork")


class NeedsSession(BaseException):
    """Raised in the child by a planner that would open the run's Spark session (a
    BaseException: no ``except Exception`` on the way turns it into a planning error)."""


def refused_session() -> None:
    """The child's stand-in for the run's session: planning on Spark happens here."""
    raise NeedsSession


#: ``preload``'s threads not yet joined.
_importing: list[threading.Thread] = []


def preload(modules: tuple[str, ...]) -> None:
    """Import ``modules`` in a daemon thread, while this one locks, lists and copies
    (mostly system calls, which let it run). Never before ``plan_beside`` forks: a
    child must not inherit an import lock a thread holds (``shared`` and
    ``run.workers`` wait for ``preloaded`` before they fork)."""
    if all(m in sys.modules for m in modules):
        return
    thread = threading.Thread(target=_import_all, args=(modules,), name="pydistcp-preload",
                              daemon=True)
    _importing.append(thread)
    thread.start()


def preloaded() -> None:
    """Wait for ``preload``'s imports: a process forked while a thread imports could
    inherit the import's lock held, and wait for it forever (a walk's child forked while
    pyarrow.parquet was being imported hung on its first copy-rows file)."""
    while _importing:
        _importing.pop().join()


def _import_all(modules: tuple[str, ...]) -> None:
    for name in modules:
        with contextlib.suppress(ImportError):  # imported again, and reported, where it is used
            importlib.import_module(name)


#: What this process does the first time its plan decides to copy a file
#: (``copies_ahead``): a planning child tells its parent; the command planning in its own
#: process starts importing what publishing needs (``when_copying``). None: nothing.
_ahead: Callable[[], None] | None = None


def when_copying(action: Callable[[], None] | None) -> None:
    """Do ``action`` once, the first time this process's plan copies a file (None: do
    nothing). A process forked from this one starts with nothing to do."""
    global _ahead
    _ahead = action


def copies_ahead() -> None:
    """Called by a planner as it decides that a file is to be copied: the action set by
    ``when_copying``, once (a no-op rerun never gets here: its walks keep both cores,
    and it imports nothing it does not use)."""
    global _ahead
    if _ahead is not None:
        action, _ahead = _ahead, None
        action()


def _tell(fd: int) -> None:
    with contextlib.suppress(OSError):  # a parent gone: the child dies with it
        os.write(fd, b"!")


def plan_beside(plan: Callable[[], T], meanwhile: Sequence[str]) -> T | None:
    """``plan()``'s value, made in a forked child while this process imports
    ``meanwhile`` (module names, in order) once the child has found a file to copy; its
    exception is raised here. None when the plan is to be made here instead: no fork
    (not enabled, not POSIX, the modules are imported already), or the child could not
    give its plan (see the module docstring).
    """
    if not _enabled or not hasattr(os, "fork") or all(m in sys.modules for m in meanwhile):
        return None
    ahead, told = os.pipe()

    def planned() -> T:
        os.close(ahead)
        when_copying(partial(_tell, told))
        return plan()

    try:
        pid, r = _forked(planned)
    except BaseException as exc:
        os.close(ahead)
        if isinstance(exc, OSError):
            return None  # no fork: planned here
        raise
    finally:
        os.close(told)
    try:
        _import_until_ready(r, meanwhile, ahead)
        data = _read_all(r)
        os.waitpid(pid, 0)
        pid = 0
    finally:
        os.close(r)
        os.close(ahead)
        if pid:  # interrupted: the child's plan is not wanted
            _end(pid)
    return cast(T | None, _outcome(data))


@contextlib.contextmanager
def shared(work: Callable[[], T]) -> Iterator[Callable[[], T | None]]:
    """``work()`` started in a forked child, on the other core, while this process does
    its own share: the block gets a callable that waits for the child's value; None
    when no child could make it (not allowed here, no fork, the child died or its value
    cannot travel): the caller then does ``work`` itself. The child's exception is
    raised. Leaving the block early (an error, Ctrl-C) kills a child still at work.

    Only the command's main thread forks for this: a batch of a continuous copy runs in
    a thread of Spark's callback server, whose locks a child would inherit."""
    if not forks() or threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    preloaded()  # no import lock of another thread's inherited held
    try:
        pid, r = _forked(work)
    except OSError:
        yield lambda: None
        return

    def wait() -> T | None:
        nonlocal pid
        data = _read_all(r)  # before the child is reaped: a big value fills the pipe
        os.waitpid(pid, 0)
        pid = 0
        return cast(T | None, _outcome(data))

    try:
        yield wait
    finally:
        os.close(r)
        if pid:  # not waited for: its value is not wanted
            _end(pid)


def _forked(work: Callable[[], Any]) -> tuple[int, int]:
    """A child forked to run ``work``, and the read end of the pipe its value comes back
    on. Buffered output is flushed first, or the child would print it again. OSError:
    no fork, nothing left open."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    parent = os.getpid()
    r, w = os.pipe()
    pid = 0
    try:
        with interrupts_held():
            pid = fork()
            if pid == 0:  # pragma: no cover - the child ends in os._exit (tested end to end)
                os.close(r)
                _child(work, w, parent)
    except BaseException:  # no fork, or Ctrl-C held until the fork was done
        os.close(r)
        os.close(w)
        if pid:
            _end(pid)
        raise
    os.close(w)
    return pid, r


def _end(pid: int) -> None:
    """Kill and reap a child whose value is not wanted."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _outcome(data: bytes) -> Any:
    """The child's pickled value (None: it gave none); its exception raised here."""
    try:
        kind, value = pickle.loads(data)
    except Exception:  # noqa: BLE001 - nothing (the child died) or a value that cannot load
        return None
    if kind == "error":
        raise value
    return value if kind == "plan" else None


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C held back in the block and taken as it ends: fork in it, and keep the
    child's pid before a Ctrl-C meanwhile is raised. An interrupt raised inside the fork
    would come out of Python's at-fork handlers, printed as a traceback under the run's
    one line, in either process. The handler is swapped, not the signal mask: the C
    handler may run in any thread. A child never leaves the block (it ends in
    ``os._exit``) and ignores Ctrl-C from its first line on: its parent kills it."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is None:  # not ours to swap
        yield
        return
    came: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: came.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if came:
        signal.raise_signal(signal.SIGINT)


def fork() -> int:
    """``os.fork()`` (in ``interrupts_held``), quiet about the threads beside it."""
    with warnings.catch_warnings():  # 3.12+ warns of a fork beside threads: see above
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def _child(plan: Callable[[], object], w: int, parent: int) -> None:
    """Plan, write the pickled outcome to ``w`` and leave without the parent's exit."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        die_with(parent)
        when_copying(None)  # the parent's, not this child's
        pause = delay_at("planning_beside")  # lets a test interrupt the child's planning
        if pause:
            time.sleep(pause)
        try:
            outcome: tuple[str, object] = ("plan", plan())
            crash_point("planned_beside")  # a child that dies: the parent plans itself
        except NeedsSession:
            outcome = ("here", None)
        except BaseException as exc:  # noqa: BLE001 - travels to the parent, raised there
            # where it happened, for a traceback shown in the parent (a bug's, not a
            # refusal's: those are one line, notes unprinted)
            exc.add_note(f"raised in the planning child:\n{traceback.format_exc()}")
            outcome = ("error", exc)
        try:  # one that cannot load in the parent (an error whose class cannot rebuild
            # it) is planned there too
            data = pickle.dumps(outcome, pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001
            data = pickle.dumps(("here", None))
        with os.fdopen(w, "wb") as out:
            out.write(data)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    finally:
        os._exit(0)


def die_with(parent: int) -> None:
    """End this child when the parent ends (Linux), or now if it already has."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


def _import_until_ready(r: int, modules: Sequence[str], ahead: int) -> None:
    """Once the child says its plan copies something (``ahead``), import ``modules`` one
    at a time until its answer starts arriving (``r``); nothing if the answer comes
    first (a child that dies closes both)."""
    if r in select.select([r, ahead], [], [])[0]:
        return
    for name in modules:
        if select.select([r], [], [], 0)[0]:
            return
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the session's own start reports a missing client
            return


def _read_all(r: int) -> bytes:
    chunks = []
    while chunk := os.read(r, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)
