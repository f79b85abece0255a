"""What executors import: neither the planner nor the state module (issue 10).

Checked in a fresh interpreter, so that modules other tests imported do not hide
an import the executor side makes.
"""

from __future__ import annotations

import subprocess
import sys

EXECUTOR_MODULES = ("distcp.task", "distcp.ranges", "distcp.join", "distcp.sources",
                    "distcp.writer", "distcp.upload", "distcp.localcopy", "distcp.symlinks",
                    "distcp.spark.arrow")
DRIVER_ONLY = ("distcp.planning", "distcp.state", "distcp.listing", "distcp.packing",
               "distcp.splitting", "distcp.commit", "distcp.publish", "pyspark")


def test_executor_modules_import_no_driver_module_and_no_pyspark() -> None:
    code = (f"import sys\nfor m in {EXECUTOR_MODULES!r}: __import__(m)\n"
            f"print(','.join(m for m in {DRIVER_ONLY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == ""
