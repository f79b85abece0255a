"""The resident client (``distcp.resident``): ``engine start`` starts it, and a warm
``copy`` is run by a fork of it exactly as the command would run it, or by the command
itself when the fork would not be the same."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import PYDISTCP, cli_env, one_error_line, run_cli, tree
from tests.fixtures.processes import children, gone, settles, state_of
from tests.fixtures.trees import small_tree

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def warm(warm_engine: dict[str, str]) -> dict[str, str]:
    """The suite's warm engine, with its resident client: started again here, since a
    test elsewhere may have stopped them (``engine start`` of a running engine only
    starts what is missing)."""
    started = run_cli("engine", "start", env=warm_engine)
    assert started.returncode == 0, started.stderr
    assert "resident client: pid " in started.stdout, started.stdout + started.stderr
    return warm_engine


def _source(root: Path) -> Path:
    return small_tree(root, 4)


def _started(args: list[str], env: dict[str, str], cwd: Path, timeline: Path
             ) -> subprocess.Popen[str]:
    return subprocess.Popen([*PYDISTCP, *args], cwd=cwd, text=True,
                            env=cli_env({**env, "PYDISTCP_TIMELINE": str(timeline)}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, process_group=0)  # a shell's job


def _run_pid(timeline: Path) -> int:
    """The pid of the process that ran the command (its first mark)."""
    for line in timeline.read_text().splitlines():
        if line.endswith(" client imports done"):
            return int(line.split()[1])
    raise AssertionError(timeline.read_text())


def _paused(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], Path, int]:
    """A warm run of 4 files paused after a staged file; the command, the destination
    and the run's pid."""
    src, dst, timeline = _source(tmp_path / "src"), tmp_path / "dst", tmp_path / "timeline"
    proc = _started(["copy", str(src), str(dst), "--no-progress", "--cores", "2"],
                    {**env, "DISTCP_SLOW_AT": "after_stage=60"}, tmp_path, timeline)
    staging = dst / ".pydistcp" / "staging"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(p.is_file() for p in staging.rglob("*")):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    return proc, dst, _run_pid(timeline)


def test_engine_start_starts_the_resident_and_a_warm_copy_is_run_by_its_fork(
        warm: dict[str, str], tmp_path: Path) -> None:
    status = run_cli("engine", "status", env=warm)
    assert "resident client: pid " in status.stdout, status.stdout + status.stderr
    _source(tmp_path / "src")
    timeline = tmp_path / "timeline"
    proc = _started(["copy", "src", "dst", "--no-progress"], warm, tmp_path, timeline)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert _run_pid(timeline) != proc.pid  # a fork of the resident ran it
    # relative paths against the command's folder, its stdout, the files as they are
    assert tree(tmp_path / "dst") == tree(tmp_path / "src")
    assert out.startswith("copied 4 files"), out


def test_an_error_of_the_run_is_the_commands_exit_status_and_line(
        warm: dict[str, str], tmp_path: Path) -> None:
    timeline = tmp_path / "timeline"
    proc = _started(["copy", str(tmp_path / "missing"), str(tmp_path / "dst")], warm,
                    tmp_path, timeline)
    _out, err = proc.communicate(timeout=120)
    assert _run_pid(timeline) != proc.pid
    assert proc.returncode == 2, err
    assert one_error_line(err).startswith("pydistcp: error: source not found: ")


def test_ctrl_c_of_the_command_interrupts_its_run_with_nothing_published(
        warm: dict[str, str], tmp_path: Path) -> None:
    proc, dst, run = _paused(tmp_path, warm)
    assert run != proc.pid
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the command's group
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert one_error_line(err) == ("pydistcp: error: interrupted; nothing unverified was "
                                   "published, rerun to finish")
    assert gone({run})
    assert tree(dst) == {}


def test_ctrl_z_stops_the_run_with_the_command_and_fg_continues_both(
        warm: dict[str, str], tmp_path: Path) -> None:
    """The terminal stops its foreground group, the command's; the run, in a group of
    its own, must stop with it (its copying processes too), not copy on unseen."""
    proc, dst, run = _paused(tmp_path, warm)
    assert run != proc.pid
    group = [run, *(p.pid for p in children(run))]  # the run and its copying processes
    os.killpg(proc.pid, signal.SIGTSTP)  # as a terminal's Ctrl-Z
    assert settles(lambda: state_of(proc.pid) == "T" and all(
        state_of(p) in ("T", "gone") for p in group)), (state_of(proc.pid), group)
    os.killpg(proc.pid, signal.SIGCONT)  # fg
    assert settles(lambda: state_of(run) not in ("T", "gone"))
    os.killpg(proc.pid, signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert gone({run})
    assert tree(dst) == {}


def test_a_killed_command_takes_its_run_with_it(warm: dict[str, str],
                                                tmp_path: Path) -> None:
    proc, dst, run = _paused(tmp_path, warm)
    assert run != proc.pid
    proc.kill()
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert gone({run})
    assert tree(dst) == {}
    again = run_cli("copy", str(tmp_path / "src"), str(dst), "--no-progress")
    assert again.returncode == 0, again.stderr
    assert tree(dst) == tree(tmp_path / "src")


@pytest.mark.parametrize("how", [
    {"PYDISTCP_ENGINE": "cold"},     # nothing warm asked for
    {"--engine": "cold"},
    {"PYDISTCP_RESIDENT": "0"},      # turned off
    {"PYTHONHASHSEED": "7"},         # another environment than the resident's
])
def test_the_command_runs_itself_where_a_fork_would_not_be_the_same(
        warm: dict[str, str], tmp_path: Path, how: dict[str, str]) -> None:
    _source(tmp_path / "src")
    args = ["copy", "src", "dst", "--no-progress"] + [
        a for k, v in how.items() if k.startswith("--") for a in (k, v)]
    env = {**warm, **{k: v for k, v in how.items() if not k.startswith("--")}}
    timeline = tmp_path / "timeline"
    proc = _started(args, env, tmp_path, timeline)
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert _run_pid(timeline) == proc.pid
    assert tree(tmp_path / "dst") == tree(tmp_path / "src")


def test_a_resident_whose_code_changed_refuses_the_run_and_exits(tmp_path: Path) -> None:
    """The resident asks for its code's hash afresh at each run: one that differs from
    the hash it started with (an upgrade, an edited checkout) makes it refuse and exit,
    and the command runs itself."""
    env = cli_env({"XDG_CACHE_HOME": str(tmp_path / "cache"), "PYDISTCP_ENGINE": "auto"})
    changing = ("import distcp.resident as r, distcp.installed as i, distcp.entry as m; "
                "hashes = iter(['at its start', 'edited since']); "
                "i.code_hash = lambda: next(hashes); "
                "raise SystemExit(r.serve(60.0, m.run_here))")
    server = subprocess.Popen([PYDISTCP[0], "-c", changing], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, process_group=0)  # a shell's job
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not list((tmp_path / "cache").rglob("*.sock")):
            assert server.poll() is None, server.communicate()
            time.sleep(0.05)
        _source(tmp_path / "src")
        timeline = tmp_path / "timeline"
        proc = subprocess.Popen([*PYDISTCP, "copy", "src", "dst", "--no-progress"],
                                cwd=tmp_path, text=True,
                                env={**env, "PYDISTCP_TIMELINE": str(timeline)},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert _run_pid(timeline) == proc.pid  # refused: the command ran itself
        assert tree(tmp_path / "dst") == tree(tmp_path / "src")
        assert server.wait(timeout=30) == 0  # and the stale resident left
        assert not list((tmp_path / "cache").rglob("*.sock"))
    finally:
        server.kill()
        server.communicate()
