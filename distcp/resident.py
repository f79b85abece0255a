"""The resident client: pydistcp imported once, each ``pydistcp copy`` run in a fork (driver).

Every run of the command starts an interpreter and imports the CLI, the pipeline and
what they use before its first file: 0.2 s of one core, more than a copy of a few small
files takes on the warm engine. ``pydistcp engine start`` therefore also starts this
process, which imports those modules once and then waits on a Unix socket in the user's
cache folder. ``pydistcp copy`` first asks it (``forwarded``, with nothing but the
standard library imported): the resident forks, and the fork becomes the run. Measured
on 2026-12-03 (benchmarks/RESULTS.md), medians of 7 rounds: 5 files of 7 bytes 0.13 s
against 0.46 s, 20,000 files of 1-64 KiB 1.74 s against 2.28 s.

**The fork is the run, exactly as the command would run it.** It gets the command's
standard streams, working folder (as a descriptor: a folder renamed since still works),
environment, umask and arguments, so it reads and writes, resolves relative paths,
finds credentials and prints as the command would; its exit status, or the signal that
ended it, becomes the command's own. Ctrl-C, SIGTERM, SIGHUP and SIGQUIT sent to the
command are passed on to it (held while the run is handed over, so none is lost or
raised in the command between the two); Ctrl-Z stops the run's process group with the
command, and continuing the command continues it. A command that is killed takes its
run with it: the resident sees the command's end of the socket close and kills the
fork's process group (its copying processes die with it: ``planning.beside.die_with``).

**Nothing else changes.** Only ``copy`` is handed over, and only when:
- the resident runs the same interpreter and environment (prefix, executable, module
  path, ``PYTHON*`` variables) and the same pydistcp code (names, sizes and mtimes of
  its sources: ``installed.code_hash``, asked afresh for each run; a resident whose code
  changed refuses the run and exits);
- the command was started without interpreter options (``-X``, ``-W``, dev mode), which
  a fork of the resident would not have;
- neither ``--engine cold`` nor ``PYDISTCP_ENGINE=cold`` asks for nothing warm, and
  ``PYDISTCP_RESIDENT`` is not ``0``;
- the socket is the user's own, in a folder only the user may write, and the process
  at its other end runs as the same user (``SO_PEERCRED``).
Otherwise, or when the resident cannot be reached, the command runs itself, as before.

The resident imports only modules that start no thread (a fork keeps only the thread
that forked; a lock another thread held would stay locked in it), and checks that it
has one thread before it serves: pyarrow with its jemalloc's background thread turned
off (``THREADLESS``), not the Spark client, which each run imports as it would (its
gRPC starts threads). It stops with ``engine stop``, or
once no run has come for its idle time (the engine's). A resident told to stop while
runs are under way first ends its socket, then waits for them.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import stat
import struct
import sys
from collections.abc import Callable, Iterator
from contextlib import suppress
from typing import Any, NoReturn

from distcp.usercache import user_cache

#: ``0``: never hand a run to the resident client.
ENV = "PYDISTCP_RESIDENT"
#: The commands handed over (the others are rare, or long enough not to notice).
COMMANDS = frozenset({"copy"})
#: Seconds to connect and to get the resident's answer before the command runs itself
#: (and the fork's wait for the command's "go").
ANSWER_S = 10.0
#: A request's header: the length of its JSON.
_HEADER = struct.Struct(">I")
#: The longest socket path ``bind`` and ``connect`` take (Linux: 108 bytes with the NUL).
_ADDRESS_MAX = 100
#: What the command sends once it has its run's pid: the fork may begin.
_GO = b"g"
#: Descriptors a request carries: stdin, stdout, stderr, the working folder.
_FDS = 4
#: Signals the command passes on to its run.
PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: Held from the run's "go" until the command passes them on (``_awaited``).
HELD = frozenset({*PASSED_ON, signal.SIGTSTP})
#: What the resident imports before it forks (none starts a thread; ``serve`` checks).
PRELOAD = ("distcp.cli", "distcp.run.pipeline", "distcp.run.here",
           "distcp.run.branch", "distcp.run.check", "distcp.commit.log",
           "distcp.commit.kept_steps", "distcp.commit.publish", "distcp.commit.orphans",
           "distcp.commit.collisions", "distcp.copying.task", "distcp.copying.keptunit",
           "distcp.planning.listing", "distcp.summary", "distcp.checking.report",
           "pyarrow", "pyarrow.parquet", "pyarrow.compute", "pyarrow.acero")
#: The resident's own environment, so that pyarrow and numpy start no thread at their
#: import: jemalloc's background thread (pyarrow's default pool is mimalloc; its bundled
#: jemalloc purges without one), OpenBLAS's threads (``entry.one_blas_thread``).
THREADLESS = {"JE_ARROW_MALLOC_CONF": "background_thread:false", "OPENBLAS_NUM_THREADS": "1"}


#: Which allocator pyarrow's default memory pool uses, read when pyarrow loads.
ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


def system_arrow_pool() -> None:
    """Have pyarrow allocate through the C library's malloc, unless the user chose.

    Its default, mimalloc, takes huge pages from the kernel (15-16 in a publish of data
    set B), and on this project's machine that publish spent 17 to 105 ms in the kernel
    from run to run with the same page faults: 0.09 s or 0.15 s, two modes. Through
    malloc, no huge page: 0.082 s (0.081-0.092) and 0.083 s (0.076-0.095) by the
    medians of 9 runs against 0.112 s (0.083-0.157) and 0.096 s (0.080-0.189) in turn,
    the plan 0.116 s against 0.126 s (benchmarks/RESULTS.md, 2026-12-04). Like
    ``entry.one_blas_thread``, the variable reaches the processes this one starts (the
    resident client, the warm engine's Python workers, a cold run's copying processes)."""
    os.environ.setdefault(ARROW_POOL_ENV, "system")


def socket_path() -> str:
    """The resident's socket for this ``identity()`` (one resident per environment): a
    second tree of pydistcp on the module path (a ``PYTHONPATH`` of another checkout)
    gets a resident of its own, where one shared socket would have its runs refused."""
    key = hashlib.sha1(json.dumps(identity()).encode())
    return user_cache("resident", f"{key.hexdigest()[:16]}.sock")


def identity() -> dict[str, Any]:
    """What a run and the resident must share: interpreter, module path, ``PYTHON*``
    variables (the module path's first entry is the script's or ``-m``'s folder)."""
    return {"prefix": sys.prefix, "executable": os.path.realpath(sys.executable),
            "path": sys.path[1:],
            "python_env": sorted((k, v) for k, v in os.environ.items() if k.startswith("PYTHON"))}


# -- the command's side ------------------------------------------------------------

def forwarded(argv: list[str]) -> int | None:
    """The exit status of ``pydistcp ARGV`` run by the resident client, or None when
    the command must run it itself (module docstring). A run the resident took is
    never run again here: from then on this process only waits for it."""
    if not _may_hand_over(argv):
        return None
    conn = _connected()
    if conn is None:
        return None
    answers = _answers(conn)  # one reader for the connection's life: lines may come together
    try:
        pid = _handed(conn, argv, answers)
    except (OSError, ValueError):
        pid = None
    except KeyboardInterrupt:  # before "go": no fork runs
        conn.close()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)
        print("pydistcp: error: interrupted before the run began; nothing was copied",
              file=sys.stderr)
        return 130
    if pid is None:
        conn.close()  # a fork made meanwhile sees it closed before "go", and never runs
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)  # held if "go" failed to go
        return None
    return _awaited(answers, pid)


def _may_hand_over(argv: list[str]) -> bool:
    if not argv or argv[0] not in COMMANDS or os.environ.get(ENV) == "0":
        return False
    if os.environ.get("PYDISTCP_ENGINE") == "cold" or _says_cold(argv):
        return False
    flags = sys.flags
    return not (sys._xoptions or sys.warnoptions or flags.dev_mode or flags.isolated
                or flags.no_site or flags.ignore_environment or flags.optimize
                or flags.verbose or flags.inspect or flags.interactive)


def _says_cold(argv: list[str]) -> bool:
    return any(a == "--engine=cold" or (a == "--engine" and argv[i + 1:i + 2] == ["cold"])
               for i, a in enumerate(argv))


def _connected() -> socket.socket | None:
    """A connection to the user's own resident, or None."""
    path = socket_path()
    try:
        if not _private(os.path.dirname(path)):
            return None
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(ANSWER_S)
        _connect(conn, path)
        if _peer_uid(conn) != os.geteuid():
            raise PermissionError("the resident runs as another user")
    except OSError:
        conn.close()
        return None
    return conn


def _connect(conn: socket.socket, path: str) -> None:
    """Connect to the socket at ``path``, through its open folder where the path is
    longer than a socket address holds (108 bytes: a deep ``XDG_CACHE_HOME``)."""
    if len(os.fsencode(path)) < _ADDRESS_MAX:
        conn.connect(path)
        return
    folder = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        conn.connect(f"/proc/self/fd/{folder}/{os.path.basename(path)}")
    finally:
        os.close(folder)


def _private(folder: str) -> bool:
    """The folder is the user's and nobody else may write in it."""
    st = os.lstat(folder)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() \
        and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def _handed(conn: socket.socket, argv: list[str], answers: Iterator[dict[str, Any]]
            ) -> int | None:
    """Send the run; the pid of its process, or None when the resident refused it. The
    fork waits for the command's "go" (``_GO``), sent once the command knows its pid: a
    command that gave up waiting (``ANSWER_S``) and runs itself never has a twin."""
    streams = [(s.encoding, s.errors) if s is not None else None
               for s in (sys.stdin, sys.stdout, sys.stderr)]
    if None in streams:
        return None
    request = json.dumps({"argv": argv, "arg0": sys.argv[0], "env": dict(os.environ),
                          "umask": _umask(), "streams": streams,
                          "identity": identity()}).encode("utf-8", "surrogateescape")
    cwd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        socket.send_fds(conn, [_HEADER.pack(len(request))], [0, 1, 2, cwd])
    finally:
        os.close(cwd)
    conn.sendall(request)
    answer = next(answers, None)
    if answer is None or not isinstance(answer.get("pid"), int):
        return None
    # from "go" on the run is the command's: a signal that comes before ``_awaited``
    # passes it on waits (a Ctrl-C up to here raises before "go", and nothing runs)
    signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    _go(conn)
    conn.settimeout(None)  # the run takes as long as it takes
    return int(answer["pid"])


def _go(conn: socket.socket) -> None:
    """Send "go". A Python function: entering it runs the handler of a signal that came
    just before the mask above (a KeyboardInterrupt then raises before "go")."""
    conn.sendall(_GO)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _awaited(answers: Iterator[dict[str, Any]], pid: int) -> int:
    """Wait for the run's end, passing signals on; its status. Ctrl-Z stops the run's
    process group with the command, and ``fg`` or ``bg`` continues both, as for a run
    of the command's own (the run's group is not the terminal's, so the terminal's
    stop reaches the command alone)."""
    def pass_on(signum: int, _frame: Any) -> None:
        with suppress(OSError):  # already gone: its status is on its way
            os.kill(pid, signum)

    def stop(_signum: int, _frame: Any) -> None:
        with suppress(OSError):
            os.killpg(pid, signal.SIGSTOP)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # stopped here until continued
        signal.signal(signal.SIGTSTP, stop)
        with suppress(OSError):
            os.killpg(pid, signal.SIGCONT)

    for signum in PASSED_ON:
        signal.signal(signum, pass_on)
    signal.signal(signal.SIGTSTP, stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)  # what came meanwhile, passed on
    try:
        end = next(answers, None)
    except (OSError, ValueError):  # the resident died, or said nonsense
        end = None
    if end is not None and isinstance(end.get("status"), int):
        return int(end["status"])
    if end is not None and isinstance(end.get("signal"), int):
        ended = int(end["signal"])
        signal.signal(ended, signal.SIG_DFL)
        os.kill(os.getpid(), ended)  # ended as the run ended
        return 128 + ended
    print(f"pydistcp: error: the resident client ended before the run (pid {pid}) "
          "said how it ended", file=sys.stderr)
    return 70


def _answers(conn: socket.socket) -> Iterator[dict[str, Any]]:
    """The resident's answers, one JSON document a line."""
    pending = b""
    while True:
        line, newline, rest = pending.partition(b"\n")
        if newline:
            pending = rest
            answer = json.loads(line)
            if isinstance(answer, dict):
                yield answer
            continue
        data = conn.recv(4096)
        if not data:
            return
        pending += data


# -- the resident's side -----------------------------------------------------------

def serve(idle_s: float, run: Callable[[], None]) -> int:
    """Listen on ``socket_path()`` until stopped or idle; each run in a fork, which
    calls ``run`` (``entry.run_here``: the command's own way) once it is the command's.
    Started as ``python -m distcp.entry SECONDS`` (``start``)."""
    import importlib
    import select
    import time

    from distcp import installed

    os.environ.update(THREADLESS)  # read when pyarrow's and numpy's libraries load
    system_arrow_pool()  # the command's allocator, chosen before pyarrow loads here
    for name in PRELOAD:
        importlib.import_module(name)
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    if threads != 1:
        print(f"resident: {threads} threads after its imports: it may not fork", flush=True)
        return 1
    code, own = installed.code_hash(), json.loads(json.dumps(identity()))  # as sent
    path = socket_path()
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    if not _private(os.path.dirname(path)):
        print(f"resident: {os.path.dirname(path)} may be written by others", flush=True)
        return 1
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    os.chdir(os.path.dirname(path))  # bound by its name: a deep folder's path is too long
    tmp = f"{path}.{os.getpid()}"
    listener.bind(os.path.basename(tmp))
    os.chmod(tmp, 0o600)
    listener.listen(16)
    os.replace(tmp, path)  # one resident answers at a time: the newest
    bound = os.stat(path).st_ino
    _write_pid(path)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    stopping: list[int] = []
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    runs: dict[int, socket.socket] = {}  # a run's pid: its command's connection
    last = time.monotonic()
    print(f"resident: pid {os.getpid()} listening", flush=True)
    while True:
        if stopping or not _still_ours(path, bound) or \
                (not runs and time.monotonic() - last > idle_s):
            if listener.fileno() >= 0:
                listener.close()
                _unlink_own(path, bound)
            if not runs:
                return 0
        waits: list[Any] = [wake_r, *runs.values()] + ([listener] if listener.fileno() >= 0 else [])
        ready, _, _ = select.select(waits, [], [], 1.0)
        if wake_r in ready:
            with suppress(OSError):
                while os.read(wake_r, 512):
                    pass
        for pid, status in _ended():
            last = time.monotonic()
            conn_of = runs.pop(pid, None)
            if conn_of is not None:
                _answer(conn_of, {"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status)
                        else {"status": os.waitstatus_to_exitcode(status)})
                conn_of.close()
        for pid, conn_of in list(runs.items()):
            if conn_of in ready and not _peek(conn_of):  # the command is gone
                with suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
        if listener.fileno() >= 0 and listener in ready:
            last = time.monotonic()
            stale = _accepted(listener, runs, code, own, (wake_r, wake_w), run)
            if stale:
                stopping.append(1)


def _accepted(listener: socket.socket, runs: dict[int, socket.socket], code: str,
              own: dict[str, Any], wakeup: tuple[int, int], run: Callable[[], None]
              ) -> bool:
    """Take one run: fork it, or refuse it; True when this resident's code is stale."""
    from distcp import installed

    conn, _ = listener.accept()
    fds: list[int] = []
    try:
        conn.settimeout(ANSWER_S)
        if _peer_uid(conn) != os.geteuid():
            raise PermissionError("another user")
        head, fds, _, _ = socket.recv_fds(conn, _HEADER.size, _FDS)
        if not head:  # a connection that only asked whether one answers (``pid_of``)
            conn.close()
            return False
        if len(head) != _HEADER.size or len(fds) != _FDS:
            raise ValueError("a request without its descriptors")
        size = _HEADER.unpack(head)[0]
        body = b""
        while len(body) < size:
            chunk = conn.recv(size - len(body))
            if not chunk:
                raise ValueError("a request cut short")
            body += chunk
        request = json.loads(body.decode("utf-8", "surrogateescape"))
        stale = installed.code_hash() != code
        if stale or request.get("identity") != own:
            _answer(conn, {"refused": "stale" if stale else "another environment"})
            conn.close()
            return stale
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # nothing of the resident's output reaches the run's streams
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child ends in os._exit
            _run_child(request, fds, conn, [listener, *runs.values()], wakeup, run)
        with suppress(OSError):
            os.setpgid(pid, pid)  # as the child does: its group exists before a kill
        conn.settimeout(None)
        _answer(conn, {"pid": pid})
        runs[pid] = conn
        return False
    except (OSError, ValueError) as exc:
        print(f"resident: a request refused: {exc}", flush=True)
        conn.close()
        return False
    finally:
        for fd in fds:
            with suppress(OSError):
                os.close(fd)


def _run_child(request: dict[str, Any], fds: list[int], conn: socket.socket,
               sockets: list[socket.socket], wakeup: tuple[int, int],
               run: Callable[[], None]) -> NoReturn:
    """In the fork: once the command says "go" (``_handed``), become its run (module
    docstring), then run it. Nothing of the resident's stays open in it: its sockets,
    its wake-up pipe, the command's connection."""
    try:
        os.setpgid(0, 0)
        signal.set_wakeup_fd(-1)
        for fd in wakeup:
            os.close(fd)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(signum, signal.SIG_DFL)
        for s in sockets:
            s.close()
        conn.settimeout(ANSWER_S)
        try:
            go = conn.recv(len(_GO))
        except OSError:
            go = b""
        conn.close()
        if go != _GO:  # the command gave up waiting and runs itself
            os._exit(0)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        stdin, stdout, stderr, cwd = fds
        for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
        os.fchdir(cwd)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.umask(int(request["umask"]))
        sys.argv = [str(request["arg0"]), *request["argv"]]
        _streams(request["streams"])
        from distcp import timeline

        timeline.reread()
        run()  # ends the process itself (``entry.end_process``)
    finally:
        os._exit(70)


def _streams(streams: list[list[str]]) -> None:
    """The standard streams over the command's descriptors, buffered as Python's own
    (stdout by lines on a terminal, stderr always by lines), in the command's encodings."""
    (in_enc, in_err), (out_enc, out_err), (err_enc, err_err) = streams
    opened = {"stdin": open(0, encoding=in_enc, errors=in_err, closefd=False),  # noqa: SIM115
              "stdout": open(1, "w", encoding=out_enc, errors=out_err,  # noqa: SIM115
                             closefd=False, buffering=1 if os.isatty(1) else -1),
              "stderr": open(2, "w", encoding=err_enc, errors=err_err,  # noqa: SIM115
                             closefd=False, buffering=1)}
    for name, stream in opened.items():
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _ended() -> Iterator[tuple[int, int]]:
    """(pid, wait status) of each fork that ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, status


def _peek(conn: socket.socket) -> bool:
    """False once the command closed its end (it ended, or was killed)."""
    try:
        return bool(conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return True
    except OSError:
        return False


def _answer(conn: socket.socket, answer: dict[str, Any]) -> None:
    with suppress(OSError):
        conn.sendall(json.dumps(answer).encode() + b"\n")


def _still_ours(path: str, bound: int) -> bool:
    """Our socket is still the one at ``path`` (``engine stop`` removes it; a newer
    resident replaces it)."""
    try:
        return os.stat(path).st_ino == bound
    except OSError:
        return False


def _unlink_own(path: str, bound: int) -> None:
    if _still_ours(path, bound):
        with suppress(OSError):
            os.unlink(path)


def _write_pid(path: str) -> None:
    with open(f"{path}.pid", "w") as f:
        f.write(str(os.getpid()))


# -- started and stopped with the engine -------------------------------------------

def start(idle_s: float, log: str, wait: bool = True) -> int | None:
    """Start the resident (detached, its own session) unless one answers; its pid once
    it answers (``wait``; else None at once: a run that started the engine goes on)."""
    import subprocess
    import time

    from distcp.copying.taskenv import SERVER_DROPS, carried

    running = pid_of()
    if running is not None:
        return running
    # as the engine's server: without what runs read (credentials among it), which
    # each fork gets from its command, and without the secrets
    env = {k: v for k, v in os.environ.items()
           if k == "HOME" or not (carried(k) or k in SERVER_DROPS)}
    with open(log, "ab") as out:
        subprocess.Popen([sys.executable, "-m", "distcp.entry", str(idle_s)],
                         stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                         start_new_session=True, env=env, close_fds=True)
    if not wait:
        return None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pid = pid_of()
        if pid is not None:
            return pid
        time.sleep(0.05)
    return None


def pid_of() -> int | None:
    """The pid of the resident that answers on the socket, or None."""
    path = socket_path()
    conn = _connected()
    if conn is None:
        return None
    conn.close()
    try:
        with open(f"{path}.pid") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def stop() -> bool:
    """Stop the resident (runs under way finish first); True if one answered."""
    import time

    pid = pid_of()
    if pid is None:
        return False
    with suppress(OSError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists(socket_path()):
        time.sleep(0.05)
    return True

