"""Spare a task pandas' import: pyarrow's probe for pandas objects, answered once (executor).

pyarrow imports pandas (0.22-0.30 s of CPU here) the first time it builds an array from
Python objects, only to ask whether they are pandas objects. A copy task never hands it
any, yet every Python worker a run starts paid that import: each cold run's workers,
and the warm engine's on their first run. pyarrow remembers a probe that could not
import pandas, so the probe is made once while ``import pandas`` fails; a real
conversion (``Table.to_pandas``) imports pandas as usual afterwards, and so does any
``import pandas``. If pyarrow probes differently one day, the worst case is the import
it always made.
"""

from __future__ import annotations

import sys
import threading
from importlib.abc import MetaPathFinder
from typing import Any

_done = threading.Lock()


class _NoPandas(MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not needed here (distcp.spark.pandasprobe)")


def skip_pandas_probe() -> None:
    """Answer pyarrow's pandas probe with "absent", once per process: a task's, and the
    ``pydistcp`` command's when it copies a plan itself (``run.here``) or checks a copy
    (``run.check``: a manifest's read, 0.2 s of a 0.6 s check of 500 files). pyarrow then takes
    no pandas object for one for the rest of the process (``pa.array`` of a pandas
    Series with nulls fails), which pydistcp's code never hands it; not in an API
    caller's process, whose code may. A no-op where pandas is already imported (the
    driver's Spark Connect client imports it)."""
    if "pandas" in sys.modules or not _done.acquire(blocking=False):
        return
    import pyarrow as pa

    blocker = _NoPandas()
    sys.meta_path.insert(0, blocker)
    try:
        pa.array([0])  # the first array from Python objects is where pyarrow probes
    finally:
        sys.meta_path.remove(blocker)
