"""The warm engine: one persistent local Spark Connect server that later runs reuse (driver).

A cold run pays Spark's fixed cost (a JVM, a session, the first job's warm-up; its
figures: benchmarks/RESULTS.md) for every copy. PySpark 4.3 ships the mechanism to avoid it
(``pyspark.sql.connect.local_server``): a long-lived local Spark Connect server,
started through ``sbin/start-connect-server.sh`` and recorded in a discovery file
(host, port, auth token, pid), to which later processes connect in under a second.
This module only adds what a tool on a user's machine needs around it:

- **Not silently reused across versions or settings.** Each engine lives in a
  directory named by a fingerprint of what its workers and JVM run (pydistcp's
  code, pyspark, the Python interpreter, the Java runtime, the JVM settings and the
  master), so a run never lands on a server started by another version.
- **Detached.** The server is launched from its own session (``setsid``), so a
  killed or interrupted run (its process group) never takes the engine down.
- **Stops itself.** A small watcher next to it stops the server once no run has
  used it for the idle time (default 30 min). Runs hold a shared ``flock`` on the
  engine's ``users.lock`` while they use it; the watcher stops the server only when
  it can take that lock exclusively, so a long run is never cut off.
- **One engine per identity.** Its tasks read and write with the rights of whoever
  started it, so an engine serves one identity (effective uid, gid and supplementary
  groups), which is part of its key; before using one, a client checks who its server
  runs as and that its directory and token file are its own and writable by nobody
  else (``Engine.refusal``): a shared ``PYDISTCP_ENGINE_DIR`` must not let one user
  plant a discovery file that sends another user's runs to their server.
- **The environment travels with the job.** The server's Python workers have the
  server's environment, not the client's: ``distcp.copying.taskenv`` captures what tasks
  read from the environment (AWS credentials, S3 bounds, crash points) so the job
  carries it, and the server is started without those variables.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.util
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from distcp import installed
from distcp.copying.taskenv import SERVER_DROPS, carried
from distcp.errors import EngineRefusedError
from distcp.spark.daemon import PRELOAD_ENV
from distcp.spark.jvm import java_version
from distcp.usercache import user_cache

ENGINE_ENV = "PYDISTCP_ENGINE"
DIR_ENV = "PYDISTCP_ENGINE_DIR"
IDLE_ENV = "PYDISTCP_ENGINE_IDLE"
DEFAULT_IDLE_S = 30 * 60.0
ENGINES = ("auto", "warm", "cold")
#: Carried variables the server itself needs (Java and Spark find their caches by it);
#: tasks still get the caller's (``distcp.copying.taskenv``).
SERVER_NEEDS = ("HOME",)
#: How often the watcher looks at the engine.
WATCH_INTERVAL_S = 5.0

def base_dir() -> Path:
    root = os.environ.get(DIR_ENV)
    if root:
        return Path(root)
    return Path(user_cache("engine"))


def idle_timeout(value: str | float | None = None) -> float:
    from distcp.quantities import parse_duration

    raw = value if value is not None else os.environ.get(IDLE_ENV)
    return parse_duration(raw) if raw not in (None, "") else DEFAULT_IDLE_S


@functools.cache
def _code_hash() -> str:
    """``installed.code_hash``: an edited checkout gets a new engine (reused Python
    workers would keep running the old code). Once per process: a run asks for its
    engine's key more than once."""
    return installed.code_hash()


@functools.cache
def pyspark_version() -> str:
    """PySpark's version, read from its ``version.py`` without importing the package:
    every run asks for its engine's key, and the import (0.1 s) is wasted on a run that
    opens no session, such as a no-op rerun."""
    spec = importlib.util.find_spec("pyspark")
    for folder in (spec.submodule_search_locations or ()) if spec is not None else ():
        try:
            text = Path(folder, "version.py").read_text()
        except OSError:
            continue
        found = re.search(r"""__version__(?:\s*:\s*str)?\s*=\s*['"]([^'"]+)['"]""", text)
        if found:
            return found.group(1)
    from pyspark.version import __version__

    return __version__


def fingerprint_inputs(master: str, java: str, jvm_conf: Mapping[str, str]) -> dict[str, Any]:
    from distcp import __version__

    try:
        version = java_version(java).splitlines()
    except (OSError, subprocess.SubprocessError):
        version = []
    return {"pydistcp": __version__, "code": _code_hash(), "pyspark": pyspark_version(),
            "python": interpreter(), "java": os.path.realpath(java),
            "java_version": version[:2], "master": master, "conf": dict(sorted(jvm_conf.items())),
            "identity": identity()}


def identity() -> dict[str, Any]:
    """Who this process acts as: what decides the files its tasks may read and write."""
    return {"uid": os.geteuid(), "gid": os.getegid(), "groups": sorted(set(os.getgroups()))}


def interpreter() -> list[str]:
    """This Python as the engine's key sees it: its environment and the real binary.

    ``.venv/bin/python`` and ``.venv/bin/python3`` (the ``pydistcp`` script's shebang)
    are one interpreter and must share an engine (``python -m distcp`` started a second
    one); two environments built on one binary differ by their prefix."""
    return [sys.prefix, os.path.realpath(sys.executable)]


def fingerprint(inputs: Mapping[str, Any]) -> str:
    return hashlib.sha1(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class EngineInfo:
    """What ``pydistcp engine status`` shows about one engine."""

    key: str
    directory: str
    running: bool
    pid: int | None
    url: str | None
    started: float | None
    idle_timeout_s: float | None
    last_used: float | None
    master: str | None
    current: bool = False


class Engine:
    """One engine directory: discovery file, locks, logs and the watcher."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.discovery = directory / "connect-local.json"
        self.meta_path = directory / "meta.json"
        self.users = directory / "users.lock"
        self.last_used = directory / "last-used"
        self.log_dir = directory / "logs"

    @classmethod
    def for_settings(cls, master: str, java: str, jvm_conf: Mapping[str, str]
                     ) -> tuple[Engine, dict[str, Any]]:
        inputs = fingerprint_inputs(master, java, jvm_conf)
        return cls(base_dir() / fingerprint(inputs)), inputs

    # -- state ------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.meta_path.read_text()))
        except (OSError, ValueError):
            return {}

    def refusal(self) -> str | None:
        """Why this caller must not use this engine (None: it may).

        A directory, or a discovery file holding the token, that is a link, owned by
        another uid or writable by others may have been planted; a server running as
        another identity would copy with that identity's rights."""
        me = os.geteuid()
        try:
            parent = self.dir.parent.stat().st_mode
        except OSError:
            parent = 0
        if parent & stat.S_IWOTH and not parent & stat.S_ISVTX:
            return (f"{self.dir.parent} is writable by everyone without the sticky bit "
                    "(chmod +t), so anyone could replace the engine's directory")
        for path in (self.dir, self.discovery, self.meta_path):
            why = _foreign(path, me)
            if why:
                return why
        recorded = self.meta().get("inputs", {}).get("identity")
        if recorded is not None and recorded != identity():
            return f"it was started by another identity ({_who(recorded)}; you are {_who(identity())})"
        try:
            pid = int(json.loads(self.discovery.read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        running_as = process_identity(pid)
        if running_as is not None and running_as != identity():
            return f"its server (pid {pid}) runs as {_who(running_as)}; you are {_who(identity())}"
        return None

    def check(self) -> None:
        """Raise EngineRefusedError unless this caller may use this engine."""
        why = self.refusal()
        if why:
            raise EngineRefusedError(f"refusing the warm engine in {self.dir}: {why}; "
                                     "an engine serves only the user who started it")

    def server(self) -> dict[str, Any] | None:
        """The discovery record, if its server process is alive."""
        try:
            data = json.loads(self.discovery.read_text())
            pid = int(data["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return data if _alive(pid) else None

    def info(self, current: bool = False) -> EngineInfo:
        server, meta = self.server(), self.meta()
        try:
            used: float | None = self.last_used.stat().st_mtime
        except OSError:
            used = None
        return EngineInfo(self.dir.name, str(self.dir), server is not None,
                          server["pid"] if server else None,
                          f"sc://{server['host']}:{server['port']}" if server else None,
                          meta.get("started"), meta.get("idle_timeout_s"), used,
                          meta.get("inputs", {}).get("master"), current)

    # -- start, use, stop -------------------------------------------------------------
    def ensure(self, master: str, conf: Mapping[str, str], inputs: Mapping[str, Any],
               idle_s: float, log: TextIO | None = None) -> bool:
        """Start the server unless it runs; True when this call started it."""
        self.check()
        if self.server() is not None:
            return False
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.dir, 0o700)
        self.log_dir.mkdir(exist_ok=True, mode=0o700)
        env = {k: v for k, v in os.environ.items()
               if k in SERVER_NEEDS or not (carried(k) or k in SERVER_DROPS)}
        env["SPARK_LOCAL_CONNECT_DISCOVERY"] = str(self.discovery)
        env["PYSPARK_PYTHON"] = env.get("PYSPARK_PYTHON") or sys.executable
        env[PRELOAD_ENV] = "1"  # its workers are forked long after the daemon started
        env.pop("SPARK_CONNECT_AUTHENTICATE_TOKEN", None)
        request = json.dumps({"master": master, "conf": dict(conf)})
        # Its own session: a run killed with its process group never takes the server.
        proc = subprocess.run([sys.executable, "-m", "distcp.spark.engine", "launch"],
                              input=request, capture_output=True, text=True, env=env,
                              start_new_session=True, timeout=300, check=False)
        if proc.returncode != 0:
            reason = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise EngineUnavailable(f"the warm engine did not start: {reason} "
                                    f"(logs: {self.log_dir})")
        server = self.server()
        started = server is not None and proc.stdout.strip() == "started"
        if started:
            self.meta_path.write_text(json.dumps({
                "started": time.time(), "idle_timeout_s": idle_s, "inputs": dict(inputs)}))
            self.touch()
            subprocess.Popen([sys.executable, "-m", "distcp.spark.engine", "watch",
                              str(self.dir)], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL,
                             stderr=open(self.log_dir / "watcher.log", "ab"),  # noqa: SIM115
                             start_new_session=True, env=env)
        return started

    def touch(self) -> None:
        self.last_used.touch()

    @contextmanager
    def in_use(self) -> Iterator[None]:
        """Hold the engine for a run: the watcher does not stop it meanwhile."""
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.users, "a") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH)
            self.touch()
            try:
                yield
            finally:
                self.touch()

    def stop(self) -> bool:
        """Stop the server (and so the watcher); True if one was running."""
        from pyspark.sql.connect.local_server import Discovery, LocalConnectServer

        if not self.discovery.exists():
            return False
        server = self.server()
        with Discovery(str(self.discovery)) as discovery:
            stopped = bool(LocalConnectServer(discovery).stop())
        if server is not None:
            # PySpark only sends SIGTERM; "stop" means gone when we return, so that a
            # following start or a test's check never meets the old JVM still exiting.
            _await_exit(int(server["pid"]), grace=_STOP_GRACE)
        with suppress(OSError):
            self.meta_path.unlink()
        return stopped

    def connect_url(self, session_id: str | None = None) -> str:
        """The server's URL, with its token in this process's environment (never argv);
        with ``session_id``, the URL attaches to that server-side session."""
        server = self.server()
        if server is None:
            raise EngineUnavailable("the warm engine stopped while connecting")
        self.check()  # again right before its token is used
        os.environ["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = server["token"]
        url = f"sc://{server['host']}:{server['port']}"
        return f"{url}/;session_id={session_id}" if session_id else url

    @contextmanager
    def session_slot(self) -> Iterator[SessionSlot]:
        """A server-side session this run has to itself, kept for the next run.

        Each Spark Connect session gets its own Python worker daemon on the server
        (PythonWorkerFactory is keyed by the session's artifact UUID), so a new session
        per run paid the daemon's start and its workers' imports, about 2-3 s, in every
        run's first job. Runs reattach to a pooled session instead: slot N is held with
        an exclusive lock for the whole run (concurrent runs take other slots, so no two
        share a session's settings), and its session id is kept in ``sessions/N.id``.
        """
        root = self.dir / "sessions"
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        for n in range(SESSION_SLOTS):
            lock = open(root / f"{n}.lock", "a")  # noqa: SIM115 - held for the run
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.close()
                continue
            try:
                yield SessionSlot(root / f"{n}.id")
            finally:
                lock.close()
            return
        yield SessionSlot(None)  # every slot busy: a session of its own, released after


SESSION_SLOTS = 8


class SessionSlot:
    """A pooled session id (its file), or none: a throwaway session."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    @property
    def pooled(self) -> bool:
        return self.path is not None

    def session_id(self, renew: bool = False) -> str | None:
        """The kept id, or a new one (first use, or the server forgot the old one)."""
        if self.path is None:
            return None
        if not renew:
            try:
                return str(uuid.UUID(self.path.read_text().strip(), version=4))
            except (OSError, ValueError):
                pass
        new = str(uuid.uuid4())
        self.path.write_text(new)
        return new


class EngineUnavailable(RuntimeError):
    """The warm engine could not be started or reached (the run falls back to cold)."""


_STOP_GRACE = 30.0


def _await_exit(pid: int, grace: float) -> None:
    """Wait for a signalled server to exit; SIGKILL it after ``grace`` seconds."""
    for signum, wait in ((None, grace), (signal.SIGKILL, 10.0)):
        if signum is not None:
            with suppress(OSError):
                os.kill(pid, signum)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _alive(pid):
                return
            time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    try:  # a zombie or a reused pid is not our server
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        return b"SparkConnectServer" in cmdline
    except OSError:
        return True


def all_engines() -> list[Engine]:
    """This caller's engines in the engine directory (another user's are not ours to
    show or stop)."""
    root = base_dir()
    if not root.is_dir():
        return []
    me = os.geteuid()
    return [Engine(p) for p in sorted(root.iterdir())
            if p.is_dir() and not p.is_symlink() and p.stat().st_uid == me]


def _foreign(path: Path, uid: int) -> str | None:
    """Why ``path`` cannot be trusted as this uid's own (None: missing, or it can)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if st.st_uid != uid:
        return f"{path} is owned by uid {st.st_uid}, not by you (uid {uid})"
    if st.st_mode & 0o022:
        return f"{path} is writable by others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def process_identity(pid: int) -> dict[str, Any] | None:
    """The effective uid, gid and groups process ``pid`` runs with (Linux: from /proc;
    None where that cannot be read)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    fields = {k: v.split() for k, _, v in (line.partition(":") for line in lines)}
    try:
        return {"uid": int(fields["Uid"][1]), "gid": int(fields["Gid"][1]),
                "groups": sorted({int(g) for g in fields.get("Groups", [])})}
    except (KeyError, IndexError, ValueError):
        return None


def _who(ident: Mapping[str, Any]) -> str:
    return f"uid {ident.get('uid')}, gid {ident.get('gid')}, groups {ident.get('groups')}"


# -- the detached helpers: launch (in its own session) and watch ----------------------
def _launch() -> int:
    """Start the server through PySpark's own launcher; print 'started' or 'running'."""
    from pyspark.sql.connect.local_server import Discovery, LocalConnectServer

    request = json.loads(sys.stdin.read())
    with Discovery() as discovery:
        server = LocalConnectServer(discovery)
        if server.is_reusable():
            print("running")
            return 0
        server.reuse_or_start(request["master"], request["conf"])
    print("started")
    return 0


def _watch(directory: str) -> int:
    """Stop the server once nobody used it for its idle time, and nobody uses it now."""
    engine = Engine(Path(directory))
    while True:
        time.sleep(WATCH_INTERVAL_S)
        if engine.server() is None:
            return 0
        idle_s = float(engine.meta().get("idle_timeout_s") or DEFAULT_IDLE_S)
        try:
            idle_for = time.time() - engine.last_used.stat().st_mtime
        except OSError:
            idle_for = idle_s
        if idle_for < idle_s:
            continue
        with open(engine.users, "a") as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a run holds it
            engine.stop()
            print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} stopped after "
                  f"{idle_for:.0f} s idle", file=sys.stderr, flush=True)
            return 0


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "launch":
        sys.exit(_launch())
    if command == "watch" and len(sys.argv) == 3:
        sys.exit(_watch(sys.argv[2]))
    print("usage: python -m distcp.spark.engine launch|watch DIR (internal)", file=sys.stderr)
    sys.exit(2)
