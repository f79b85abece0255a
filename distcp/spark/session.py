"""The only code that builds or stops a SparkSession.

Spark's fixed cost (JVM + session ~3.4 s, stop ~1 s here) dwarfs most copies,
so an active session (notebook, scheduled Spark job) is reused and never
stopped by us; only a session this module started is stopped.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from distcp.errors import JavaMissingError

MIN_JAVA = 17

_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yyyy-MM-dd HH:mm:ss}} %p %c{{1}}: %m%n
logger.pydistcp.name = org.apache.spark.api.python
logger.pydistcp.level = warn
"""


def check_java() -> str:
    """The java executable Spark will use, or a one-line JavaMissingError."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    hint = "install a JDK (e.g. openjdk-17-jre-headless) or set JAVA_HOME"
    if not java or not os.path.exists(java):
        raise JavaMissingError(f"pydistcp runs on Spark, which needs Java {MIN_JAVA}+; "
                               f"no java found: {hint}")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        raise JavaMissingError(f"cannot run {java}: {exc}; {hint}") from None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    major = int(match.group(1)) if match else 0
    if major == 1 and match and match.group(2):
        major = int(match.group(2))
    if major < MIN_JAVA:
        raise JavaMissingError(f"pydistcp runs on Spark, which needs Java {MIN_JAVA}+; "
                               f"{java} is Java {major or 'of unknown version'}: {hint}")
    return java


#: JVM flags of a local-mode driver. Its JVM only schedules a few tasks (no byte passes
#: through it), yet C2 compilation and the parallel GC's threads took most of a core
#: during the first job on a 2-core machine, slowing the Python workers copying next to
#: it: with C1 only and the serial GC a 2 GiB local copy ran 4 s (15 %) faster.
LOCAL_DRIVER_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def base_conf(log_file: str, log_dir: str, master: str = "") -> dict[str, str]:
    """Our defaults: quiet terminal, reused Python workers, our interpreter on workers;
    for ``local[...]`` masters, a driver JVM that leaves the cores to the copy.

    The log4j file is per job, so concurrent runs sharing a log dir keep their logs apart.
    A ``--conf spark.driver.extraJavaOptions`` of the user replaces all of it.
    """
    stem = os.path.splitext(os.path.basename(log_file))[0]
    props = os.path.join(log_dir, f"{stem}.log4j2.properties")
    with open(props, "w") as f:
        f.write(_LOG4J.format(log=log_file))
    local = master == "local" or master.startswith("local[")
    return {
        "spark.app.name": "pydistcp",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.python.worker.reuse": "true",
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": f"-Dlog4j.configurationFile=file:{props}"
                                         + (f" {LOCAL_DRIVER_JVM}" if local else ""),
        "spark.executor.extraJavaOptions": f"-Dlog4j.configurationFile=file:{props}",
    }


@contextmanager
def spark_session(master: str, conf: Mapping[str, str], log_file: str) -> Iterator[Any]:
    """The active SparkSession, or a new one that is stopped on exit.

    While a new JVM starts, file descriptor 2 points at the log file: the JVM and
    the Python workers it forks inherit it, so Spark's own output never reaches
    the user's terminal.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    if not master.startswith("sc://"):
        check_java()
    log_dir = os.path.dirname(log_file)
    os.makedirs(log_dir, exist_ok=True)
    remote = master.startswith("sc://")
    # A Spark Connect server owns its JVM and workers: our JVM-side defaults would only
    # be refused (CANNOT_MODIFY_CONFIG), so only the user's settings are sent.
    settings = {**({} if remote else base_conf(log_file, log_dir, master)), **conf}
    builder = SparkSession.builder
    builder = builder.remote(master) if remote else builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    python = None if remote else settings["spark.pyspark.python"]
    with _stderr_to(log_file), _worker_python(python), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        spark = builder.getOrCreate()
    try:
        yield spark
    finally:
        with _stderr_to(log_file):
            spark.stop()


def default_parallelism(spark: Any) -> int:
    """Cores Spark offers; Spark Connect has no SparkContext, so ask the conf there."""
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect raises a variety here
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
