"""Class-data sharing (AppCDS) for the local driver JVM: a cheaper cold start (driver).

A dynamic archive of the classes Spark loads (``-XX:ArchiveClassesAtExit``) halved the
session start here (8-11 s -> 3-5 s), but writing it adds ~20 s to the run that records
it, so it is recorded once, off the user's path (a detached, niced builder, or ahead of
time with ``python -m distcp.spark.cds build``). An archive only fits the JDK build,
classpath and JVM flags it was recorded with, so its file name is a hash of them: a new
JDK or pyspark simply misses and records a new one. Every failure here only means a
slower start, never a failed run: the JVM is given ``-Xshare:auto``, which ignores an
archive it cannot map, and a rejection in the Spark log deletes the file.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress

from distcp.spark.jvm import LOCAL_DRIVER_JVM, base_conf, check_java, java_version
from distcp.usercache import user_cache

log = logging.getLogger(__name__)

_LOCK = "build.lock"

#: First bytes of a JDK dynamic archive (0xf00baba8, little-endian).
_MAGIC = (0xF00BABA8).to_bytes(4, "little")

#: The JVM writes its warnings (e.g. "Unable to use shared archive") to stdout, which the
#: driver JVM shares with the user's terminal: send them to stderr, i.e. the Spark log.
_LOG_TO_STDERR = "-Xlog:disable -Xlog:all=warning:stderr"

#: Lines the JVM writes (to the Spark log we point fd 2 at) when it refuses an archive.
REJECTED = ("Unable to use shared archive", "shared class paths mismatch",
            "An error has occurred while processing the shared archive")


def enabled() -> bool:
    """``PYDISTCP_CDS=0`` turns every part of this module off."""
    return os.environ.get("PYDISTCP_CDS", "1").strip() not in ("0", "false", "no", "off")


def cds_dir() -> str:
    """``$PYDISTCP_CDS_DIR``, else ``$XDG_CACHE_HOME`` (or ``~/.cache``)/pydistcp/cds."""
    if os.environ.get("PYDISTCP_CDS_DIR"):
        return os.environ["PYDISTCP_CDS_DIR"]
    return user_cache("cds")


def archive_key(java_real: str, java_version: str, pyspark_version: str,
                jars: Iterable[tuple[str, int]], flags: str) -> str:
    """Pure: the hash naming an archive; any input that changes a recorded archive's
    validity (JDK build, classpath, JVM flags) changes it."""
    h = hashlib.sha256()
    for part in (java_real, java_version, pyspark_version, flags):
        h.update(part.encode() + b"\0")
    for name, size in sorted(jars):
        h.update(f"{name}:{size}\0".encode())
    return h.hexdigest()[:20]


@functools.lru_cache(maxsize=8)
def _jars() -> tuple[str, list[tuple[str, int]]]:
    import pyspark

    jars_dir = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    jars = [(e.name, e.stat().st_size) for e in os.scandir(jars_dir) if e.name.endswith(".jar")]
    return pyspark.__version__, jars


def _driver_flags() -> str:
    return LOCAL_DRIVER_JVM


def archive_path(java: str) -> str:
    """Where the archive for this JDK, pyspark and driver flags lives (may not exist)."""
    real = os.path.realpath(java)
    version, jars = _jars()
    key = archive_key(real, java_version(real), version, jars, _driver_flags())
    return os.path.join(cds_dir(), f"{key}.jsa")


def archive_flags(java: str) -> str:
    """The driver JVM flags that use the archive, or "" when there is none (or CDS is off).

    ``-Xshare:auto`` makes a JVM that cannot map the archive start without it.
    """
    if not enabled():
        return ""
    try:
        path = archive_path(java)
    except Exception as exc:  # noqa: BLE001 - a cache must never fail a run
        log.debug("no CDS archive: %s", exc)
        return ""
    return _flags(path) if _looks_valid(path) else ""


def _flags(path: str) -> str:
    """The JVM's crash report (``hs_err_pid<N>.log``, a damaged archive can cause one)
    goes next to the archive, not into the user's working directory."""
    crash = os.path.join(os.path.dirname(path), "hs_err_pid%p.log")
    return f"-XX:SharedArchiveFile={path} -Xshare:auto {_LOG_TO_STDERR} -XX:ErrorFile={crash}"


def _looks_valid(path: str) -> bool:
    """False for a missing archive, and deletes one without the dynamic-archive magic or
    of another size than the builder recorded in ``<key>.jsa.size``: a JVM given a file
    without the magic says nothing and also drops the JDK's own base archive (slower
    than none), and one given a truncated archive dies of SIGBUS (JDK 17.0.15)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
        with open(f"{path}.size") as f:
            size = int(f.read().strip() or -1)
    except FileNotFoundError:
        if not os.path.exists(path):
            return False
        head, size = b"", -1
    except (OSError, ValueError):
        head, size = b"", -1
    if head == _MAGIC and size == os.path.getsize(path):
        return True
    log.info("not a complete CDS archive, deleted: %s", path)
    _delete(path)
    return False


def _delete(path: str) -> None:
    for p in (path, f"{path}.size"):
        with suppress(OSError):
            os.unlink(p)


def drop_archive_of(java_options: str) -> str | None:
    """After a driver JVM failed to start: delete the archive ``java_options`` used, if
    any, and return the options without our flags (start once more with those); None
    when no archive of ours was in them."""
    flags = [f for f in java_options.split() if f.startswith("-XX:SharedArchiveFile=")]
    if not flags or not os.path.isfile(flags[0].split("=", 1)[1]):
        return None
    path = flags[0].split("=", 1)[1]
    log.info("driver JVM failed with CDS archive %s: deleted, starting without it", path)
    _delete(path)
    ours = _flags(path)
    return " ".join(java_options.replace(ours, "").split())


@contextmanager
def _lock(directory: str, owner: bool = False) -> Iterator[bool]:
    """Yields True when this process holds the builders' lock (non-blocking); an
    ``owner`` writes its pid into the lock file (``status`` shows it, tests stop it)."""
    os.makedirs(directory, exist_ok=True)
    fd = os.open(os.path.join(directory, _LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        if owner:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        yield True
    finally:
        os.close(fd)


def _busy(directory: str) -> bool:
    with _lock(directory) as free:
        return not free


def builder_pid(directory: str) -> int | None:
    """The pid of the builder working in ``directory`` now, if any."""
    if not _busy(directory):
        return None
    try:
        with open(os.path.join(directory, _LOCK)) as f:
            return int(f.read().strip() or 0) or None
    except (OSError, ValueError):
        return None


def build_archive(java: str, timeout: float = 600) -> str | None:
    """Record the archive (synchronously) unless it exists; its path, or None with the
    reason logged.

    A representative Spark job (session + one ``mapInArrow``) runs in a child Python
    process whose driver JVM writes ``<key>.jsa.<pid>.tmp`` at exit; the file is then
    renamed into place, so readers only ever see a complete archive. One builder at a
    time: another one holding the lock makes this return None at once.
    """
    try:
        return _build(java, timeout)
    except _NotBuilt as exc:
        log.info("no CDS archive built: %s", exc)
        return None


class _NotBuilt(Exception):
    """Why build_archive left the archive absent."""


def _build(java: str, timeout: float) -> str:
    if not enabled():
        raise _NotBuilt("PYDISTCP_CDS=0")
    path = archive_path(java)
    if os.path.isfile(path):
        return path
    with _lock(os.path.dirname(path), owner=True) as held:
        if not held:
            raise _NotBuilt("another process is building it")
        if os.path.isfile(path):
            return path
        tmp = f"{path}.{os.getpid()}.tmp"
        cmd = [sys.executable, "-m", "distcp.spark.cds", "record", tmp]
        try:
            out = subprocess.run(cmd, env={**os.environ, "PYDISTCP_CDS": "0"}, check=False,
                                 capture_output=True, text=True, timeout=timeout,
                                 stdin=subprocess.DEVNULL)
            if out.returncode != 0 or not os.path.isfile(tmp) or os.path.getsize(tmp) < 1 << 20:
                tail = (out.stderr.strip().splitlines() or ["no output"])[-1][:300]
                raise _NotBuilt(f"recording job failed (exit {out.returncode}): {tail}")
            with open(f"{path}.size", "w") as f:
                f.write(str(os.path.getsize(tmp)))
            os.replace(tmp, path)
        except (OSError, subprocess.SubprocessError) as exc:
            raise _NotBuilt(f"recording job failed: {exc}") from None
        finally:
            with suppress(OSError):
                os.unlink(tmp)
        return path


def start_background_build(java: str) -> bool:
    """Start a detached, niced builder when no archive exists and none is being built;
    True when one was started. Its output goes to ``build.log`` in the CDS dir. The
    first builder a CDS dir ever gets (no ``build.log`` yet) is announced in one line:
    it costs a core for about a minute and its archive takes about 150 MiB."""
    if not enabled():
        return False
    try:
        path = archive_path(java)
        if os.path.isfile(path):
            return False
        directory = os.path.dirname(path)
        if _busy(directory):
            return False
        build_log = os.path.join(directory, "build.log")
        first = not os.path.exists(build_log)
        with open(build_log, "ab") as out:
            subprocess.Popen([sys.executable, "-m", "distcp.spark.cds", "build", "--java", java,
                              "--nice"], stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
        if first:
            sys.stderr.write(announcement(directory) + "\n")
        return True
    except Exception as exc:  # noqa: BLE001 - a cache must never fail a run
        log.debug("no CDS builder started: %s", exc)
        return False


def announcement(directory: str) -> str:
    """The one line that says a first background build started, and how to avoid it."""
    return (f"pydistcp: building a start-up archive of Spark's classes in the background, "
            f"once (about 150 MiB in {directory}), so that later cold runs start faster; "
            "PYDISTCP_CDS=0 turns it off")


def drop_if_rejected(java: str, log_file: str) -> bool:
    """Delete the archive when the JVM wrote (in ``log_file``) that it refused it, so the
    next build replaces it; True when it did."""
    flags = archive_flags(java)
    if not flags:
        return False
    try:
        with open(log_file, errors="replace") as f:
            text = f.read(1 << 20)
    except OSError:
        return False
    if not any(marker in text for marker in REJECTED):
        return False
    path = flags.split()[0].split("=", 1)[1]
    _delete(path)
    log.info("CDS archive rejected by the JVM, deleted: %s", path)
    return True


def after_run(java: str, log_file: str) -> None:
    """After a local run: drop an archive its JVM refused, and start a builder when
    there is no archive, so that the next run starts faster. Never raises."""
    try:
        drop_if_rejected(java, log_file)
        start_background_build(java)
    except Exception as exc:  # noqa: BLE001 - a cache must never fail a run
        log.debug("CDS after run: %s", exc)


def _record(tmp: str) -> None:
    """Child of build_archive: one session and one mapInArrow job, then wait for the
    driver JVM to exit, which is when it writes the archive."""
    from pyspark.sql import SparkSession

    with tempfile.TemporaryDirectory(prefix="pydistcp-cds-") as log_dir:  # left behind
        # by each build before: the session's own logs, of no use once the JVM ended
        conf = base_conf(os.path.join(log_dir, "record.log"), log_dir, "local[1]")
        conf["spark.driver.extraJavaOptions"] += f" -XX:ArchiveClassesAtExit={tmp}"
        builder = SparkSession.builder.master("local[1]")
        for key, value in conf.items():
            builder = builder.config(key, value)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = builder.getOrCreate()
        df = spark.createDataFrame([(i, b"x" * i) for i in range(8)], "n long, b binary")
        df.mapInArrow(lambda batches: batches, df.schema).collect()
        proc = spark.sparkContext._gateway.proc  # type: ignore[union-attr]
        spark.stop()
        proc.stdin.close()  # the JVM exits on EOF of its stdin, then dumps the archive
        proc.wait(timeout=600)


def _main(argv: list[str]) -> int:
    """``python -m distcp.spark.cds build|status|clear``: the archive by hand."""
    if len(argv) == 2 and argv[0] == "record":
        _record(argv[1])
        return 0
    if not argv or argv[0] not in ("build", "status", "clear"):
        print("usage: python -m distcp.spark.cds build|status|clear", file=sys.stderr)
        return 2
    if "--nice" in argv:  # the background builder: leave the cores to the runs
        os.nice(10)
    java = argv[argv.index("--java") + 1] if "--java" in argv else check_java()
    path = archive_path(java)
    if argv[0] == "build":
        t = time.monotonic()
        existed = os.path.isfile(path)
        built = build_archive(java)
        if built is None:
            print(f"CDS archive not built: see the reason above; {path} absent")
            return 1
        what = "exists" if existed else f"built in {time.monotonic() - t:.1f} s"
        print(f"CDS archive {what}: {built} ({os.path.getsize(built) >> 20} MiB)")
    elif argv[0] == "status":
        state = "on" if enabled() else "off (PYDISTCP_CDS=0)"
        size = f"{os.path.getsize(path) >> 20} MiB" if os.path.isfile(path) else "absent"
        pid = builder_pid(os.path.dirname(path))
        building = f"; being built by pid {pid}" if pid else ""
        print(f"CDS {state}; archive {path}: {size}{building}")
    else:
        removed = [e.path for e in os.scandir(os.path.dirname(path))
                   if e.name.endswith(".jsa")] if os.path.isdir(os.path.dirname(path)) else []
        for p in removed:
            _delete(p)
        print(f"CDS archives removed: {len(removed)} from {os.path.dirname(path)}")
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(_main(sys.argv[1:]))
