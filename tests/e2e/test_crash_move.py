"""A killed ``pydistcp move`` never loses a file.

The move is killed (``os._exit(137)``, like kill -9) at a commit boundary through
``DISTCP_CRASH_AT``: while publishing (no source deleted yet) and after the first and
the third source deletion. Then every file is, byte-identical, at the source or at
the destination (or both), and a rerun (``distcp.move`` on the test session) finishes
the move: the destination holds everything, the source nothing. Three CLI runs; then
two runs killed with SIGKILL at random instants.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import distcp
from tests.conftest import PYDISTCP, cli_env, run_cli

pytestmark = pytest.mark.e2e


def _make_source(root: Path) -> dict[str, bytes]:
    rng = random.Random(13)
    want = {f"d{i % 2}/f{i}.bin": rng.randbytes(rng.randint(1, 200_000)) for i in range(5)}
    for rel, data in want.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return want


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".pydistcp" not in p.parts} if root.exists() else {}


@pytest.mark.parametrize(("point", "deleted"),
                         [("mid_publish:2", 0), ("mid_move:1", 1), ("mid_move:3", 3)])
def test_a_killed_move_loses_no_file_and_the_rerun_finishes_it(
        spark: Any, tmp_path: Path, point: str, deleted: int,
        warm_engine: dict[str, str]) -> None:
    """Killed in the driver after the copy job ended: on the suite's warm engine."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    want = _make_source(src)
    killed = run_cli("move", str(src), str(dst), "--no-progress",
                     env={**warm_engine, "DISTCP_CRASH_AT": point})
    assert killed.returncode == 137, killed.stderr
    left, there = _files(src), _files(dst)
    assert len(want) - len(left) == deleted
    for rel, data in want.items():  # the union holds every file, byte-identical
        assert left.get(rel) == data or there.get(rel) == data, rel
    assert all(want[rel] == data for rel, data in {**left, **there}.items())
    summary = distcp.move(str(src), str(dst), progress=False)
    assert summary.ok, summary.failures
    assert _files(dst) == want
    assert _files(src) == {}
    assert not list((dst / ".pydistcp" / "commits").glob("*.json"))


def test_a_move_killed_at_random_instants_never_loses_a_file(spark: Any, tmp_path: Path) -> None:
    """SIGKILL to the whole run (driver, JVM and Python workers) at seeded random
    instants of its life: listing, copying, publishing or deleting sources. After every
    kill the union of source and destination holds every file, byte-identical; the
    next run picks up where the killed one stopped, and the last finishes the move.
    The instants change from run to run (PYDISTCP_TEST_SEED repeats one)."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    rng = random.Random(20261124)
    want = {f"d{i % 3}/f{i}.bin": rng.randbytes(rng.choice((10, 5_000, 3_000_000)))
            for i in range(24)}
    for rel, data in want.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    seed = int(os.environ.get("PYDISTCP_TEST_SEED") or random.SystemRandom().randrange(10**6))
    pick = random.Random(seed)
    # one kill anywhere in the run's life, one while it deletes sources (slowed to
    # 0.1 s a file: the instant the first source is gone, plus a random delay)
    for when in (pick.uniform(2.0, 16.0), "deleting"):
        proc = subprocess.Popen([*PYDISTCP, "move", str(src), str(dst), "--no-progress"],
                                env=cli_env({"DISTCP_SLOW_AT": "mid_move=0.1"}), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        _kill_when(proc, when, lambda: sum(p.is_file() for p in src.rglob("*")) < len(want),
                   pick)
        left, there = _files(src), _files(dst)
        for rel, data in want.items():
            assert left.get(rel) == data or there.get(rel) == data, (seed, when, rel)
        assert all(want[rel] == data for rel, data in {**left, **there}.items()), (seed, when)
    summary = distcp.move(str(src), str(dst), progress=False)
    assert summary.ok, summary.failures
    assert _files(dst) == want
    assert _files(src) == {}


def _kill_when(proc: subprocess.Popen[bytes], when: float | str,
               deleting: Callable[[], bool], pick: random.Random) -> None:
    """SIGKILL ``proc``'s process group after ``when`` seconds, or a random 0-2 s
    after ``deleting()`` first holds; nothing if the run ends first."""
    deadline = time.monotonic() + (when if isinstance(when, float) else 120.0)
    while proc.poll() is None and time.monotonic() < deadline:
        if when == "deleting" and deleting():
            time.sleep(pick.uniform(0.0, 2.0))
            break
        time.sleep(0.02)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
