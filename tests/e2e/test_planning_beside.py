"""A warm run whose copy may take a Spark job plans in a forked child while it imports
the Spark client (``distcp.planning.beside``); one whose copy opens no session plans in
its own process: the real command, the suite's warm engine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import PYDISTCP, cli_env, run_cli, tree

pytestmark = pytest.mark.e2e


def make_files(root: Path, count: int) -> None:
    for i in range(count):
        (root / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        (root / f"d{i % 3}" / f"f{i}.txt").write_bytes(os.urandom(100 + i))


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return found


def state(pid: int) -> str:
    """The process's state letter ("Z": ended, waiting to be reaped), "" once gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


#: A copy that takes a Spark job (its files copied on the warm engine's tasks), so
#: that its run plans beside the client's import.
ON_SPARK = ("--engine", "warm", "--copying", "spark", "--no-progress")


def start(src: Path, dst: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([*PYDISTCP, "copy", str(src), str(dst), *ON_SPARK],
                            env=cli_env(env), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def planning_child(run: subprocess.Popen[str], timeout: float = 60) -> int:
    """The run's child process while it plans (slowed by DISTCP_SLOW_AT)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # a fork of the run itself (its command line), not a JVM or an engine it starts
        me = Path(f"/proc/{run.pid}/cmdline").read_bytes()
        kids = [k for k in children(run.pid) if Path(f"/proc/{k}/cmdline").read_bytes() == me]
        if kids:
            return kids[0]
        time.sleep(0.02)
    raise AssertionError("no planning child appeared")


def test_a_warm_run_plans_in_a_child_and_a_failing_child_changes_nothing(
        tmp_path: Path) -> None:
    src = tmp_path / "src"
    make_files(src, 30)
    slowed = start(src, tmp_path / "d1", {"DISTCP_SLOW_AT": "planning_beside=1.5"})
    child = planning_child(slowed)
    out, err = slowed.communicate(timeout=300)
    assert slowed.returncode == 0, err
    assert state(child) in ("", "Z")
    assert tree(tmp_path / "d1") == tree(src)
    assert "copied 30 files" in out

    # the child dies before its plan reaches the run: the run plans itself
    died = run_cli("copy", str(src), str(tmp_path / "d2"), *ON_SPARK,
                   env={"DISTCP_CRASH_AT": "planned_beside:1"})
    assert died.returncode == 0, died.stderr
    assert tree(tmp_path / "d2") == tree(src)

    # the child's planning error is the run's, word for word, with its exit code
    cold = run_cli("copy", str(src), str(tmp_path / "d3"), "--include", "nomatch*",
                   "--no-progress")
    warm = run_cli("copy", str(src), str(tmp_path / "d3"), "--include", "nomatch*", *ON_SPARK)
    assert warm.returncode == cold.returncode == 2
    assert warm.stderr.splitlines()[-1] == cold.stderr.splitlines()[-1]
    assert "no file matched" in warm.stderr and "Traceback" not in warm.stderr


@pytest.mark.parametrize(("flags", "beside"), [
    ((), False),  # copied by processes forked here: no session, nothing to import beside
    (("--copying", "spark"), True),
])
def test_a_warm_run_plans_beside_only_when_its_copy_may_take_spark(
        flags: tuple[str, ...], beside: bool, tmp_path: Path) -> None:
    src, timeline, summary = tmp_path / "src", tmp_path / "timeline.txt", tmp_path / "s.json"
    for i in range(60):  # folders enough for the walk to take both cores ("walked here")
        (src / f"d{i % 20}").mkdir(parents=True, exist_ok=True)
        (src / f"d{i % 20}" / f"f{i}.txt").write_bytes(os.urandom(100 + i))
    done = run_cli("copy", str(src), str(tmp_path / "dst"), "--engine", "warm", "--no-progress",
                   "--summary-json", str(summary), *flags,
                   env={"PYDISTCP_TIMELINE": str(timeline)})
    assert done.returncode == 0, done.stderr
    assert tree(tmp_path / "dst") == tree(src)
    marks = {name: pid for _at, pid, name in
             (line.split(" ", 2) for line in timeline.read_text().splitlines())}
    assert (marks["walked here"] != marks["client imports done"]) is beside
    why = json.loads(summary.read_text())["strategy"]["plan"][0]["why"]
    assert ("planned in a forked child" in why) is beside


@pytest.mark.parametrize("how", ["ctrl-c", "kill-9"])
def test_a_run_ended_while_its_child_plans_ends_the_child(how: str, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_files(src, 10)
    run = start(src, dst, {"DISTCP_SLOW_AT": "planning_beside=30"})
    child = planning_child(run)
    if how == "ctrl-c":
        os.killpg(run.pid, signal.SIGINT)  # the terminal's Ctrl-C: the whole group
    else:
        os.kill(run.pid, signal.SIGKILL)
    _, err = run.communicate(timeout=60)
    if how == "ctrl-c":
        assert run.returncode == 130, err
        assert "interrupted" in err and "Traceback" not in err
    else:
        assert run.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while state(child) not in ("", "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert state(child) in ("", "Z")  # it did not plan on for its 30 s
    assert not [p for p in dst.rglob("*.txt")]  # nothing published
