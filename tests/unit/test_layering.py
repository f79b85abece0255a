"""What executors import: neither the planning nor the commit stage, nor pyspark (issue 10).

Checked in a fresh interpreter, so that modules other tests imported do not hide
an import the executor side makes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "distcp"

#: Every module of the copy stage and of ``check``'s digest tasks, and the Spark adapter
#: that runs them on executors.
EXECUTOR_MODULES = tuple(
    f"distcp.copying.{p.stem}" for p in sorted((ROOT / "copying").glob("*.py"))
    if p.stem != "__init__") + ("distcp.spark.arrow",) + tuple(
    f"distcp.checking.{p.stem}" for p in sorted((ROOT / "checking").glob("*.py")))
#: The driver's stages (whole packages) and Spark itself.
DRIVER_ONLY = ("distcp.planning", "distcp.commit", "pyspark")


def test_executor_modules_import_no_driver_module_and_no_pyspark() -> None:
    code = (f"import sys\nfor m in {EXECUTOR_MODULES!r}: __import__(m)\n"
            f"print(','.join(m for m in sys.modules if m.startswith({DRIVER_ONLY!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == ""


#: What a publishing task (``--publishing spark``) imports: the commit steps it runs.
PUBLISH_TASK_MODULES = ("distcp.commit.fanout", "distcp.commit.steps",
                        "distcp.commit.upload_steps", "distcp.commit.move_steps",
                        "distcp.spark.arrow")


def test_publish_tasks_import_their_commit_steps_but_no_planner_and_no_pyspark() -> None:
    code = (f"import sys\nfor m in {PUBLISH_TASK_MODULES!r}: __import__(m)\n"
            f"print(','.join(m for m in sys.modules if m.startswith(('distcp.planning', "
            f"'pyspark', 'distcp.spark.job', 'distcp.run', 'distcp.commit.publish'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == ""
