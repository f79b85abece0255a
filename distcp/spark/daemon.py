"""``python -m distcp.spark.daemon``: PySpark's Python worker daemon, importing PySpark
with its bytecode (``spark.python.daemon.module`` of local masters, ``jvm.base_conf``).

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on its Python workers' path.
For a pip-installed PySpark that zip is a copy of the installed package, without
bytecode, and Python does not cache what it compiles from a zip: each daemon compiled
PySpark's modules from source at its start (0.67 s against 0.15 s to import them from
the package here), and each worker those its task needed. The zip inside the installed
package is the same code as the package, so the daemon takes it off the path and the
package (with its ``.pyc`` files) is imported instead; a zip of another Spark (a
``SPARK_HOME`` distribution) stays where Spark put it. The workers the daemon forks
inherit the path and what it imported.
"""

from __future__ import annotations

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


def main() -> None:
    sys.path[:] = installed_first(sys.path)
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
