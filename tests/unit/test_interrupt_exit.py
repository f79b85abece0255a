"""Ctrl-C ends a run with exit 130, never with the signal, whatever code it landed in.

The e2e test (tests/e2e/test_exit_codes.py) presses Ctrl-C at real instants, so it only
sometimes lands inside a string ``exec`` (dataclasses build their methods so while
pyspark is imported): this case, made deterministic, failed there once in CI with the
process killed by SIGINT after printing our line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("where", ["exec('raise KeyboardInterrupt', {})", "raise KeyboardInterrupt"])
def test_an_interrupt_caught_by_the_cli_exits_130_under_python_m(tmp_path: Path,
                                                                 where: str) -> None:
    (tmp_path / "interrupted_run.py").write_text(
        "from distcp.cli import _run\n\n\n"
        "def action():\n"
        f"    {where}\n\n\n"
        "_run(action)\n")
    proc = subprocess.run([sys.executable, "-m", "interrupted_run"], cwd=tmp_path,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr == ("pydistcp: error: interrupted; nothing unverified was published, "
                           "rerun to finish\n")


def test_a_broken_gateway_logged_by_py4j_stays_off_the_terminal() -> None:
    """py4j's ``logging.exception`` on a broken gateway call (Ctrl-C, even before our
    interrupt handler is in place) prints nothing and leaves no root handler behind;
    other libraries' records and pydistcp's own warnings reach stderr as before."""
    script = (
        "import logging\n"
        "from distcp.spark.session import _quiet_py4j_logger\n"
        "_quiet_py4j_logger('local[2]')\n"
        "from py4j import java_gateway as g\n"
        "try:\n"
        "    raise ConnectionResetError(104, 'Connection reset by peer')\n"
        "except ConnectionResetError:\n"
        "    g.logging.exception('Exception while sending command.')\n"
        "assert logging.getLogger().handlers == [], logging.getLogger().handlers\n"
        "logging.getLogger('quiet.lib').addHandler(logging.NullHandler())\n"
        "logging.getLogger('quiet.lib').warning('a library keeps this to itself')\n"
        "logging.getLogger('pydistcp.events').warning('events: kept for the next run')\n")
    proc = subprocess.run([sys.executable, "-c", script],
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "events: kept for the next run\n"
