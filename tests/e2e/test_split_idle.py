"""Without ``--split-size``, a big file that would keep one core busy while the others
wait is copied in ranges spread over the cores (issue "fast", point 4).

The limit is lowered so that an 8 MiB file counts as big on the shared ``local[2]``
session; the proof that it was split is the range results the driver collected, and
the bytes, mode and mtime that arrive are the whole file's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import distcp
from distcp.planning import splitting
from tests.conftest import tree

pytestmark = pytest.mark.e2e
MiB = 1 << 20


def _source(root: Path, big: int) -> None:
    root.mkdir()
    (root / "big.bin").write_bytes(os.urandom(big))
    for n in range(3):
        (root / f"small{n}.txt").write_bytes(b"%d\n" % n)


def test_a_big_file_alone_is_spread_over_the_idle_cores(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _source(src, 8 * MiB)
    monkeypatch.setattr(splitting, "IDLE_SPLIT_FROM", 2 * MiB)
    s = distcp.copy(str(src), str(dst), progress=False)
    assert s.ok, s.failures
    assert s.files_copied == 4
    # half a share (4 MiB and 3 bytes) is just over 2 MiB, ranges are whole MiB: 3 of 3 MiB
    assert s.results_collected == 3 + 3
    assert "1 big file(s) copied in ranges of about 2 MiB over the idle cores" in s.notes[0]
    assert tree(dst) == tree(src)  # bytes, modes and mtimes of the whole file
    again = distcp.copy(str(src), str(dst), progress=False)
    assert (again.files_copied, again.files_skipped) == (0, 4)


@pytest.mark.parametrize("options", [{"verify": "size"}, {"tasks": 1}, {"check": ["not-empty"]},
                                     {"split_size": 0}])
def test_files_that_keep_the_cores_busy_or_a_run_that_needs_them_whole_are_not_split(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        options: dict[str, Any]) -> None:
    """``verify``: a control (its big file alone is split); one task has no idle core; a
    ``--check`` needs each file whole in one task; ``--split-size 0`` never splits."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    _source(src, 8 * MiB)
    monkeypatch.setattr(splitting, "IDLE_SPLIT_FROM", 2 * MiB)
    s = distcp.copy(str(src), str(dst), progress=False, **options)
    assert s.ok, s.failures
    split = "verify" in options
    assert s.results_collected == (6 if split else 4)
    assert tree(dst) == tree(src)
