"""The only code that builds or stops a SparkSession (driver).

Spark's fixed cost (JVM + session ~3.4 s, stop ~1 s here) dwarfs most copies,
so an active session (notebook, scheduled Spark job) is reused and never
stopped by us; only a session this module started is stopped.
"""

from __future__ import annotations

import contextlib
import decimal  # noqa: F401 - before PySpark's import: see the note below
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from distcp.errors import JavaMissingError, SparkUnavailableError
from distcp.faults import delay_at
from distcp.planning.beside import preloaded
from distcp.spark import cds
from distcp.spark.engine import Engine, EngineUnavailable, idle_timeout
from distcp.spark.interrupts import plain_interrupts
from distcp.spark.jvm import LOCAL_DRIVER_JVM, base_conf, check_java, is_local_master
from distcp.timeline import mark, process_created

# ``decimal`` is imported with this module, not first by PySpark at the session's start:
# a Ctrl-C that lands inside the C module's initialisation (PySpark imports it while the
# run waits for Spark) makes its next import run that again, which prints "mpd_setminalloc:
# ignoring request to set MPD_MINALLOC a second time" on stderr beside the run's one
# line (seen in CI, tests/e2e/test_exit_codes.py). Importing it here costs 3 ms.


def jvm_conf(log_file: str, log_dir: str, master: str) -> dict[str, str]:
    """base_conf with this machine's class-data-sharing archive for a local driver."""
    flags = cds.archive_flags(check_java()) if is_local_master(master) else ""
    return base_conf(log_file, log_dir, master, flags)


@contextmanager
def spark_session(master: str, conf: Mapping[str, str], log_file: str,
                  engine: str = "cold") -> Iterator[Any]:
    """The active SparkSession, a session on the warm engine, or a new one that is
    stopped on exit.

    ``engine`` (local masters only): ``cold`` starts a JVM for this run; ``warm``
    uses the warm engine (``distcp.spark.engine``), starting it if needed; ``auto``
    uses it when it already runs. While a new JVM starts, file descriptor 2 points
    at the log file: the JVM and the Python workers it forks inherit it, so Spark's
    own output never reaches the user's terminal.

    The imports a preload thread runs end first (``planning.beside.preloaded``): PySpark
    imports numpy and pandas in this thread while it starts, and a Ctrl-C landing inside
    the import machinery then left the two threads waiting on each other's import locks
    for ever (seen: a run interrupted while its JVM started hung). Both imports hold the
    interpreter's lock, so running them one after the other costs nothing.
    """
    preloaded()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    if engine != "cold" and is_local_master(master):
        warm = _warm_engine(master, conf, log_file, start=engine == "warm")
        if warm is not None:
            with warm as session:
                yield session
            return
    with _new_session(master, conf, log_file) as spark:
        yield spark


def _builder(master: str, conf: Mapping[str, str], log_file: str) -> tuple[Any, dict[str, str]]:
    """A new session's builder and the settings it carries. A Spark Connect server owns
    its JVM and workers: our JVM-side defaults would only be refused
    (CANNOT_MODIFY_CONFIG), so only the user's settings are sent there."""
    from pyspark.sql import SparkSession

    remote = master.startswith("sc://")
    if not remote:
        check_java()
    log_dir = os.path.dirname(log_file)
    os.makedirs(log_dir, exist_ok=True)
    settings = {**({} if remote else jvm_conf(log_file, log_dir, master)), **conf}
    builder = SparkSession.builder
    builder = builder.remote(master) if remote else builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder, settings


@contextmanager
def _new_session(master: str, conf: Mapping[str, str], log_file: str) -> Iterator[Any]:
    """A session started for this run, stopped (or its JVM ended) on exit.

    One try from the JVM's launch on: a Ctrl-C anywhere from there (in PySpark's start,
    leaving the redirections, before our own handler) still ends the JVM, which PySpark
    starts ignoring SIGINT and which would outlive us holding our stdout."""
    builder, settings = _builder(master, conf, log_file)
    python = None if master.startswith("sc://") else settings["spark.pyspark.python"]
    _quiet_py4j_logger(master)
    spark: Any = None
    jvm: int | None = None
    abandoned = False  # interrupted, or its JVM lost: ended, not stopped
    try:
        with _stderr_to(log_file), _worker_python(python), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            mark("spark session starting")
            spark = _started(builder, settings, master, log_file)
            mark("spark session ready")
        pause = delay_at("spark_started")  # lets a test press Ctrl-C in this gap
        if pause:
            with open(log_file, "a") as log:  # the test waits for this line, not a guess
                log.write(f"pydistcp: pausing {pause:g} s at spark_started\n")
            time.sleep(pause)
        jvm = _jvm_process()  # PySpark drops it on interrupt
        if jvm is not None:
            process_created("driver JVM process created", jvm)
        with plain_interrupts():
            yield spark
    except KeyboardInterrupt:
        abandoned = True
        raise
    except Exception as exc:
        if spark is None:  # did not start: its own error
            raise
        failure = _lost_jvm(exc, log_file)
        if failure is exc:
            raise
        abandoned = True
        raise failure from exc
    finally:
        _wind_down(spark, jvm, abandoned, master, log_file)


def _wind_down(spark: Any, jvm: int | None, abandoned: bool, master: str,
               log_file: str) -> None:
    """Stop what this run started, with Spark's last words going to the log file: an
    abandoned session's JVM is ended (a stop would wait on a JVM that is gone or busy),
    any other stopped; after a clean local run the class-data-sharing archive is kept
    up to date for the next start."""
    with _stderr_to(log_file):
        if abandoned:
            _end_jvm(jvm if jvm is not None else _jvm_process(launching=True))
        elif spark is not None:
            _stop(spark, log_file)
    if spark is not None and is_local_master(master) and not abandoned:
        cds.after_run(check_java(), log_file)


def _started(builder: Any, settings: Mapping[str, str], master: str, log_file: str) -> Any:
    """``builder``'s session; a driver JVM that died on its CDS archive (e.g. a
    truncated file) is started once more without it (the archive is deleted, so the
    next build replaces it)."""
    try:
        return builder.getOrCreate()
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - py4j and Spark raise many types
        options = cds.drop_archive_of(settings.get("spark.driver.extraJavaOptions", ""))
        if options is None:
            raise SparkUnavailableError(f"Spark did not start ({master}): {_cause(exc)}; "
                                        f"details in {log_file}", path=log_file) from None
        try:
            return builder.config("spark.driver.extraJavaOptions", options).getOrCreate()
        except Exception as again:  # noqa: BLE001 - as above
            raise SparkUnavailableError(
                f"Spark did not start ({master}): {_cause(again)}; details in {log_file}",
                path=log_file) from None


def jvm_lost(log_file: str, tail: int = 1 << 20) -> str | None:
    """Why Spark's JVM died, from the end of its log (an ``OutOfMemoryError`` makes
    Spark exit), or None when the log shows no such end."""
    try:
        with open(log_file, "rb") as f:
            f.seek(max(0, os.path.getsize(log_file) - tail))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    found = [line.strip() for line in text.splitlines() if "java.lang.OutOfMemoryError" in line]
    return found[-1] if found else None


def _lost_jvm(exc: Exception, log_file: str) -> Exception:
    """``exc`` as the user should see it: a JVM that ran out of memory is named, with
    the setting that gives it more (py4j's own error would say only "Connection
    refused", which reads like a storage failure)."""
    cause = jvm_lost(log_file)
    if cause is None:
        return exc
    return SparkUnavailableError(
        f"Spark's JVM died during the run ({cause}; details in {log_file}): give it more "
        "memory, e.g. --conf spark.driver.memory=4g (spark.executor.memory on a cluster), "
        "and rerun; nothing unverified was published", path=log_file)


def _stop(spark: Any, log_file: str) -> None:
    _close_accumulator_server(spark)
    try:
        spark.stop()
    except Exception as exc:
        failure = _lost_jvm(exc, log_file)
        if failure is exc:
            raise
        raise failure from exc


def _close_accumulator_server(spark: Any) -> None:
    """Let PySpark's accumulator server close in the background, not in ``stop``.

    ``SparkContext.stop`` stops the JVM's side in ~0.06 s here, then shuts this server
    down, which waits for its handler's poll of the JVM's connection to time out (every
    second): 0.9 s of every local run's end, waited for nothing. pydistcp uses no
    accumulators; the server's thread ends on its own within the second (or with the
    process). A session without the attribute (Spark Connect) stops as it would.
    """
    sc = getattr(spark, "_sc", None)
    server = getattr(sc, "_accumulatorServer", None)
    if server is None or not hasattr(server, "shutdown"):
        return
    sc._accumulatorServer = None  # type: ignore[union-attr]
    threading.Thread(target=server.shutdown, name="pydistcp-accumulators",
                     daemon=True).start()


def tasks_run_here(master: str) -> bool:
    """Whether this run's Spark tasks would run on this machine: a local master, and no
    session of the caller's active on another (an API caller's cluster session is used
    as it is, so its tasks run on its cluster)."""
    if "pyspark.sql" in sys.modules:  # else no session can be active here
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            try:
                master = str(active.conf.get("spark.master", ""))
            except Exception:  # noqa: BLE001 - a session whose conf cannot be read
                return False
    return is_local_master(master)


def opens_cheaply(master: str, conf: Mapping[str, str], engine: str) -> bool:
    """Whether this run's Spark session costs little to open: one is active in this
    process, the master is not local (a cluster's session is opened for the copy in any
    case), or the warm engine serves the run (``engine`` warm, or auto while it runs).

    A JVM of the run's own costs seconds before its first task, which a run planned by
    the driver alone never pays when it has nothing to copy: ``--listing auto`` asks
    this before it lists a tree on Spark."""
    if "pyspark.sql" in sys.modules:  # else no session can be active here
        from pyspark.sql import SparkSession

        if SparkSession.getActiveSession() is not None:
            return True
    return not is_local_master(master) or warm_serves(master, conf, engine)


def warm_serves(master: str, conf: Mapping[str, str], engine: str) -> bool:
    """Whether the warm engine serves this run's Spark session (a local master):
    ``engine`` warm, or auto while an engine of these settings runs and takes it."""
    if engine == "cold" or not is_local_master(master):
        return False
    if engine == "warm":
        return True  # started for this run if it does not run: the user asked for it
    try:
        eng = engine_settings(master, conf)[0]
        return eng.server() is not None and eng.refusal() is None
    except (JavaMissingError, OSError):  # no usable Java: the run itself will say so
        return False


def client_modules(master: str, engine: str) -> tuple[str, ...]:
    """The modules of PySpark's client this run's session imports (Spark Connect's for
    the warm engine and ``sc://``, the classic one else), lightest first: what
    ``distcp.planning.beside`` imports while the run plans, stopping once the plan is
    made."""
    if master.startswith("sc://") or (engine != "cold" and is_local_master(master)):
        return ("numpy", "pyarrow", "pandas", "grpc", "pyspark.sql.connect.session")
    return ("pyspark.sql",)


def engine_settings(master: str, conf: Mapping[str, str]) -> tuple[Engine, dict[str, Any]]:
    """The engine that serves ``master`` with the user's ``conf`` (part of its key: a
    run with other settings gets another engine, never a silently different one)."""
    return Engine.for_settings(master, check_java(), {"driver": LOCAL_DRIVER_JVM, **conf})


def _warm_engine(master: str, conf: Mapping[str, str], log_file: str, start: bool
                 ) -> Any | None:
    """A context manager yielding a session on the warm engine, or None to run cold
    (``auto`` and no engine running, or the engine cannot start: said in one line)."""
    eng, inputs = engine_settings(master, conf)
    refused = eng.refusal()
    if refused and start:  # --engine warm: the user asked for this engine
        eng.check()
    if refused:  # auto: a run of its own, as when no engine runs, and one line why
        print(f"pydistcp: warning: not using the warm engine in {eng.dir}: {refused}; "
              "this run starts a JVM of its own", file=sys.stderr, flush=True)
        return None
    if not start and eng.server() is None:
        return None
    if start:
        try:
            started = start_engine(eng, master, conf, inputs)
        except (EngineUnavailable, OSError, subprocess.SubprocessError) as exc:
            print(f"pydistcp: warning: {exc}; this run starts a JVM of its own instead",
                  file=sys.stderr, flush=True)
            return None
        if started:
            from distcp import resident

            pid = (eng.server() or {}).get("pid")
            print(f"pydistcp: started a warm Spark engine (pid {pid}) that later runs reuse; "
                  f"it stops after {idle_timeout() / 60:.0f} min idle, or now with "
                  "'pydistcp engine stop'", file=sys.stderr, flush=True)
            # and its resident client, which later copies fork from (not waited for)
            resident.start(idle_timeout(), str(eng.log_dir / "resident.log"), wait=False)

    @contextmanager
    def session() -> Iterator[Any]:

        os.makedirs(os.path.dirname(log_file), exist_ok=True)
        with open(log_file, "a") as f:
            f.write(f"this run used the warm engine {eng.dir}; its log: {eng.log_dir}\n")
        with eng.in_use(), eng.session_slot() as slot:
            with _stderr_to(log_file), warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                spark = _attach(eng, slot)
            try:
                yield spark
            finally:
                # The client only: a pooled session stays on the server with its Python
                # workers for the next run; a server that died mid-run has nothing left.
                spark.release_session_on_close = not slot.pooled
                with contextlib.suppress(Exception):
                    spark.stop()

    return session()


def warm_workers(master: str, conf: Mapping[str, str], log_file: str) -> int:
    """Run a job that copies nothing on the warm engine's first free pooled session, one
    task per core: the session's Python worker daemon and its workers start and import
    the copy task now, not in the user's next run (measured on 2 cores: the first copy
    of 5 small files after ``engine start`` took 3.8-4.6 s, later ones 1.4 s). Returns
    the tasks run."""
    from distcp.copying.task import idle_runner
    from distcp.spark.arrow import run_pickled

    with spark_session(master, conf, log_file, engine="warm") as spark:
        tasks = default_parallelism(spark)
        run_pickled(spark, [(n, None) for n in range(tasks)], idle_runner)
    return tasks


def _attach(eng: Engine, slot: Any) -> Any:
    """A client on the slot's server-side session; a session the server no longer has
    (expired, or the engine restarted) is replaced by a new one under the same slot."""
    from pyspark.sql import SparkSession

    for renew in (False, True):
        url = eng.connect_url(slot.session_id(renew))
        spark: Any = SparkSession.builder.remote(url).create()
        _fail_fast(spark)  # before the first request: a dead server must not take minutes
        try:
            spark.conf.get("spark.sql.session.timeZone")  # one round trip: is it there?
            return spark
        except Exception:  # SESSION_CLOSED and the like: take a new id
            spark.release_session_on_close = False
            with contextlib.suppress(Exception):
                spark.stop()
            if renew or not slot.pooled:
                raise
    raise AssertionError("unreachable")


def _fail_fast(spark: Any) -> None:
    """A warm engine that died does not come back: give up after a few seconds of
    retries (Spark Connect's default keeps retrying for 10 minutes), so the run fails
    its files like a lost worker and the next run starts a new engine."""
    try:
        from pyspark.sql.connect.client.retries import DefaultPolicy

        spark.client.set_retry_policies([DefaultPolicy(max_retries=5, max_backoff=2000)])
    except (ImportError, AttributeError):
        pass


def start_engine(eng: Engine, master: str, conf: Mapping[str, str],
                 inputs: Mapping[str, Any], idle_s: float | None = None) -> bool:
    """Start ``eng`` for ``master`` unless it runs (True if this call started it), with
    the JVM settings a cold local run gets, its log in the engine's directory."""
    eng.log_dir.mkdir(parents=True, exist_ok=True)
    server_conf = {**jvm_conf(str(eng.log_dir / "server.log"), str(eng.log_dir), master),
                   **conf}
    with eng.in_use():
        return eng.ensure(master, server_conf, inputs, idle_timeout(idle_s))


def _jvm_process(launching: bool = False) -> int | None:
    """The pid of the JVM PySpark launched as our child, if any (Linux: from /proc;
    PySpark's own handle on it, ``SparkContext._gateway.proc``, was None here).

    ``launching``: also the ``spark-submit`` script that becomes the JVM (it execs it,
    keeping its pid). Interrupted before the exec, the script went on to start a JVM
    that held our stdout and stderr open after we exited (seen in CI: a Ctrl-C test's
    pipes stayed open for 120 s)."""
    me = str(os.getpid())
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if fields[1] != me:
                continue
            with open(f"/proc/{entry}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read()
        except (OSError, IndexError):
            continue
        if name == "java" or (launching and (b"/spark-submit" in command
                                             or b"/spark-class" in command)):
            return int(entry)
    return None


def _end_jvm(pid: int | None) -> None:
    """After Ctrl-C, end the JVM we started instead of asking it through a gateway the
    interrupt may have broken. PySpark starts the JVM ignoring SIGINT, and seen here it
    outlived us by minutes, holding our stdout. Killing it is safe: a run killed at any
    instant is finished by the next one (DESIGN.md, invariant 2)."""
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGKILL)  # SIGTERM runs Spark's hook, which waits on tasks
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _quiet_py4j_logger(master: str) -> None:
    """py4j logs every broken gateway call (on Ctrl-C, tens of lines of tracebacks from its
    callback threads); the same failures reach us as exceptions, so its records stay off
    the terminal for the rest of the process, whenever the JVM breaks (an interrupt while
    the session starts or winds down included). Some it logs through ``logging``'s
    module functions, on the root logger, whose first call also installs a stderr
    handler (``basicConfig``): its module's ``logging`` is pointed at its own logger.
    Not for Spark Connect (``sc://``), which has no gateway."""
    import logging

    logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
    if master.startswith("sc://"):
        return
    from py4j import java_gateway

    if not isinstance(java_gateway.logging, _Py4jLogging):
        java_gateway.logging = _Py4jLogging(logging.getLogger("py4j.java_gateway"))


class _Py4jLogging:
    """``logging`` as ``py4j.java_gateway`` uses it: the module functions that log go to
    its own logger (quiet), anything else to ``logging`` itself."""

    LOGS = frozenset({"debug", "info", "warning", "error", "exception", "critical", "log"})

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    def __getattr__(self, name: str) -> Any:
        import logging

        return getattr(self.logger if name in self.LOGS else logging, name)


def _cause(exc: BaseException) -> str:
    """The first line of PySpark's message, without the Java stack it may carry."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (the warm engine's, an ``sc://``
    master's): what its queries call back (``foreachBatch``) runs in the server's Python
    worker, not in this process."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: Any) -> int:
    """Cores Spark offers; Spark Connect has no SparkContext, so ask the conf there."""
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect's missing SparkContext raises its own
        value = spark.conf.get("spark.default.parallelism", None)
        return int(value) if value else os.cpu_count() or 2


@contextmanager
def _worker_python(python: str | None) -> Iterator[None]:
    """Make Python workers start ``python`` while the SparkContext is built.

    PySpark takes the workers' interpreter from ``PYSPARK_PYTHON`` when the context
    is created (default: whatever ``python3`` is first on PATH), not from the
    ``spark.pyspark.python`` setting, so an unactivated venv or a pipx install would
    run workers without our packages. A ``PYSPARK_PYTHON`` the user exported wins.
    """
    if python is None or "PYSPARK_PYTHON" in os.environ:
        yield
        return
    os.environ["PYSPARK_PYTHON"] = python
    try:
        yield
    finally:
        del os.environ["PYSPARK_PYTHON"]


@contextmanager
def _stderr_to(path: str) -> Iterator[None]:
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)
