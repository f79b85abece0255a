"""A killed ``pydistcp move`` never loses a file.

The move is killed (``os._exit(137)``, like kill -9) at a commit boundary through
``DISTCP_CRASH_AT``: while publishing (no source deleted yet) and after the first and
the third source deletion. Then every file is, byte-identical, at the source or at
the destination (or both), and a rerun (``distcp.move`` on the test session) finishes
the move: the destination holds everything, the source nothing. Three CLI runs.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

import distcp
from tests.conftest import run_cli

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
        spark: Any, tmp_path: Path, point: str, deleted: int) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    want = _make_source(src)
    killed = run_cli("move", str(src), str(dst), "--no-progress",
                     env={"DISTCP_CRASH_AT": point})
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
