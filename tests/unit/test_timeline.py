"""``distcp.timeline``: marks only when asked, whole lines, the process's real start."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distcp import timeline


def test_nothing_is_written_or_opened_without_the_variable(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.delenv(timeline.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    off = importlib.reload(timeline)
    off.mark("x")
    off.mark_once("y")
    off.client_started()
    assert list(tmp_path.iterdir()) == []


def test_marks_of_several_processes_are_whole_lines_in_one_file(tmp_path: Path) -> None:
    out = tmp_path / "t.txt"
    code = ("from distcp import timeline\n"
            "for n in range(200):\n    timeline.mark(f'mark {n} ' + 'x' * 100)\n"
            "timeline.mark_once('once'); timeline.mark_once('once')\n")
    env = {**os.environ, timeline.ENV: str(out)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env) for _ in range(4)]
    assert [p.wait() for p in procs] == [0, 0, 0, 0]
    lines = out.read_text().splitlines()
    assert len(lines) == 4 * 201
    for line in lines:
        at, pid, name = line.split(" ", 2)
        assert abs(float(at) - time.time()) < 120 and int(pid) in {p.pid for p in procs}
        assert name == "once" or (name.startswith("mark ") and name.endswith("x" * 100))
    assert sum(1 for line in lines if line.endswith(" once")) == 4


def test_a_process_start_is_read_from_the_kernel() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        time.sleep(0.5)
        started = timeline.process_started(child.pid)
        assert started is not None and 0.3 < time.time() - started < 5
    finally:
        child.kill()
        child.wait()
    assert timeline.process_started(2**22 + 7) is None  # no such process
