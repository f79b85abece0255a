"""What every JVM pydistcp starts gets: a Java it checked, its flags, its log setup (driver).

Shared by the session (``distcp.spark.session``) and the class-data-sharing archive's
recorder (``distcp.spark.cds``), which must start its JVM exactly as a run does.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from functools import cache

from distcp.errors import JavaMissingError
from distcp.usercache import user_cache

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
        out = java_version(java)
    except (OSError, subprocess.SubprocessError) as exc:
        raise JavaMissingError(f"cannot run {java}: {exc}; {hint}") from None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(match.group(1)) if match else 0
    if major == 1 and match and match.group(2):
        major = int(match.group(2))
    if major < MIN_JAVA:
        raise JavaMissingError(f"pydistcp runs on Spark, which needs Java {MIN_JAVA}+; "
                               f"{java} is Java {major or 'of unknown version'}: {hint}")
    return java


def is_local_master(master: str) -> bool:
    """Spark runs in this process's own JVM (the case the warm engine and the local
    driver's flags are for)."""
    return master == "local" or master.startswith("local[")


#: JVM flags of a local-mode driver. Its JVM only schedules a few tasks (no byte passes
#: through it), yet C2 compilation and the parallel GC's threads took most of a core
#: during the first job on a 2-core machine, slowing the Python workers copying next to
#: it: with C1 only and the serial GC a 2 GiB local copy ran 4 s (15 %) faster.
LOCAL_DRIVER_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def base_conf(log_file: str, log_dir: str, master: str = "", archive_flags: str = ""
              ) -> dict[str, str]:
    """Our defaults: quiet terminal, reused Python workers, our interpreter on workers;
    for ``local[...]`` masters, a driver JVM that leaves the cores to the copy.

    The log4j file is per job, so concurrent runs sharing a log dir keep their logs apart.
    A ``--conf spark.driver.extraJavaOptions`` of the user replaces all of it.
    ``archive_flags``: the class-data-sharing archive's flags (distcp.spark.cds).
    """
    stem = os.path.splitext(os.path.basename(log_file))[0]
    props = os.path.join(log_dir, f"{stem}.log4j2.properties")
    with open(props, "w") as f:
        f.write(_LOG4J.format(log=log_file))
    local = is_local_master(master)
    driver_jvm = f"{LOCAL_DRIVER_JVM} {archive_flags}".strip() if local else ""
    # PySpark's daemon, importing PySpark from its package rather than from Spark's zip
    # (distcp.spark.daemon); on clusters the executors' Python is not ours to assume.
    # Its workers talk to the JVM over Unix sockets: on loopback TCP each task's input
    # waited ~40 ms (Nagle's algorithm and the delayed ACK) before the worker saw its
    # end, a third of a warm 1-task job (0.113-0.12 s; 0.078-0.093 s over Unix sockets).
    daemon = {"spark.python.daemon.module": "distcp.spark.daemon",
              "spark.python.unix.domain.socket.enabled": "true"} if local else {}
    # A local driver (a cold run's, the warm engine's) serves nobody but this machine:
    # its RPC and block-manager ports listen on loopback, never on the machine's other
    # addresses, where anyone who reached them could run code as its user.
    loopback = {"spark.driver.bindAddress": "127.0.0.1",
                "spark.driver.host": "127.0.0.1"} if local else {}
    return {
        "spark.app.name": "pydistcp",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.python.worker.reuse": "true",
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": f"-Dlog4j.configurationFile=file:{props}"
                                         + (f" {driver_jvm}" if local else ""),
        "spark.executor.extraJavaOptions": f"-Dlog4j.configurationFile=file:{props}",
        **daemon,
        **loopback,
    }


@cache
def java_version(java: str) -> str:
    """``java -version``'s output, asked once per process and executable.

    Starting a JVM for it took 0.03-0.14 s here on an idle machine, more on a busy one,
    in every run (the warm engine's key and the archive's name include it), so the
    answer is kept in the user's cache under the identity of the binary and its JDK's
    class library: a JDK upgraded or replaced in place has another and is asked again.
    """
    path = _version_file(java)
    if path is not None:
        try:
            with open(path) as f:
                return f.read()
        except OSError:
            pass
    out = subprocess.run([java, "-version"], check=False, capture_output=True, text=True,
                         timeout=60)
    text = (out.stderr + out.stdout).strip()
    if path is not None and out.returncode == 0 and "version" in text:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, path)
        except OSError:
            pass  # a cache: the next run asks the JVM again
    return text


def _version_file(java: str) -> str | None:
    """Where ``java``'s version is kept: named by the real binary's path, inode, size
    and mtime and those of ``lib/modules`` beside it (None: it cannot be identified)."""
    try:
        real = os.path.realpath(java)
        parts = [real]
        for name in (real, os.path.join(os.path.dirname(os.path.dirname(real)), "lib",
                                        "modules")):
            try:
                st = os.stat(name)
            except FileNotFoundError:
                parts.append("-")
                continue
            parts.append(f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}")
    except OSError:
        return None
    key = hashlib.sha1("|".join(parts).encode()).hexdigest()[:20]
    return user_cache("java", f"{key}.version")
