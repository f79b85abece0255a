"""PySpark's Python worker daemon, importing PySpark with its bytecode (executor).

``python -m distcp.spark.daemon``: the ``spark.python.daemon.module`` of local masters
(``jvm.base_conf``).

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on its Python workers' path.
For a pip-installed PySpark that zip is a copy of the installed package, without
bytecode, and Python does not cache what it compiles from a zip: each daemon compiled
PySpark's modules from source at its start (0.67 s against 0.15 s to import them from
the package here), and each worker those its task needed. The zip inside the installed
package is the same code as the package, so the daemon takes it off the path and the
package (with its ``.pyc`` files) is imported instead; a zip of another Spark (a
``SPARK_HOME`` distribution) stays where Spark put it. The workers the daemon forks
inherit the path and what it imported.

A worker the daemon forks imports what its task needs; a warm engine's idle workers
are stopped after a minute (PySpark's PythonWorkerFactory), so a run more than a
minute after the last one forks new workers and pays those imports again. The warm
engine's daemons (``PRELOAD_ENV`` set in the engine's environment) therefore import
pydistcp's task modules once, before they fork (``preload``): 0.09 s off each new
worker here. Not a cold session's: there the daemon starts inside the run's first job,
and importing before the fork made it 0.2-0.3 s longer (an empty job measured 1.6-1.8
s without, 1.9-2.0 s with), where its two workers import in parallel on two cores.
Only modules that start no thread: a forked child keeps only the thread that forked,
and a lock another thread held would stay locked in it. pyarrow starts two (jemalloc's
among them), so workers still import it themselves, as PySpark's own daemon says they
must.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys
from collections.abc import Sequence


def installed_first(path: Sequence[str]) -> list[str]:
    """``path`` without the ``pyspark.zip`` files that lie inside the PySpark package
    the rest of ``path`` imports (unchanged when there is none)."""
    zips = [p for p in path if os.path.basename(p) == "pyspark.zip"]
    rest = [p for p in path if p not in zips]
    spec = importlib.machinery.PathFinder.find_spec("pyspark", rest) if zips else None
    if spec is None or not spec.submodule_search_locations:
        return list(path)
    home = os.path.realpath(next(iter(spec.submodule_search_locations)))
    own = {z for z in zips if os.path.realpath(z).startswith(home + os.sep)}
    return [p for p in path if p not in own]


#: What every copy task imports, loaded by the daemon before it forks (none starts a
#: thread: ``tests/unit/test_daemon_path.py`` checks in a fresh interpreter).
PRELOAD = ("distcp.copying.task", "distcp.copying.keptunit", "distcp.spark.arrow")

#: Set to "1" in the environment of a daemon that should preload (the warm engine's).
PRELOAD_ENV = "PYDISTCP_DAEMON_PRELOAD"

#: The modules this process loaded for its workers (read by tests through a worker).
preloaded: tuple[str, ...] = ()


def preload() -> tuple[str, ...]:
    """Import PRELOAD; one that fails is left to the worker, which imports it again and
    reports what failed where the task does."""
    return tuple(name for name in PRELOAD if _imported(name))


def _imported(name: str) -> bool:
    try:
        importlib.import_module(name)
    except Exception:  # noqa: BLE001 - the worker's own import reports it
        return False
    return True


def main() -> None:
    global preloaded
    from distcp import timeline

    timeline.mark("worker daemon started")
    sys.path[:] = installed_first(sys.path)
    if os.environ.get(PRELOAD_ENV) == "1":
        preloaded = preload()
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
