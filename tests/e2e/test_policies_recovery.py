"""Commit policies, recovery of unpublished copies, and incremental runs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import distcp
from distcp.commit.status import status_report
from tests.conftest import tree
from tests.e2e.test_errors_cli import NO_DAC

pytestmark = pytest.mark.e2e
needs_setpriv = pytest.mark.skipif(os.geteuid() != 0, reason="drops root's DAC capabilities")


def two_datasets(root: Path) -> Path:
    """good/ (3 files) and bad/ (2 readable files + one that cannot be read)."""
    src = root / "src"
    for name in ("good", "bad"):
        (src / name).mkdir(parents=True)
        for i in range(3):
            (src / name / f"f{i}.txt").write_text(f"{name}{i}" * 1000)
            os.utime(src / name / f"f{i}.txt", (1_700_000_000 + i, 1_700_000_000 + i))
    (src / "bad" / "f2.txt").chmod(0)
    return src


def run_no_dac(*args: str, cwd: Path) -> Any:
    import subprocess
    import sys

    env = {**os.environ, "PYDISTCP_LOG_DIR": str(cwd / "logs")}
    return subprocess.run([*NO_DAC, sys.executable, "-m", "distcp", *args], capture_output=True,
                          text=True, env=env, timeout=300, stdin=subprocess.DEVNULL, check=False)


def summary_of(path: Path) -> dict:
    return json.loads(path.read_text())


@needs_setpriv
@pytest.mark.parametrize("policy, good, bad", [
    ("full", [], []),
    ("successful", ["f0.txt", "f1.txt", "f2.txt"], []),
    ("partial", ["f0.txt", "f1.txt", "f2.txt"], ["f0.txt", "f1.txt"]),
])
def test_commit_policy_with_one_failing_file_set(policy: str, good: list[str], bad: list[str],
                                                 tmp_path: Path) -> None:
    src = two_datasets(tmp_path)
    dst, sj = tmp_path / "dst", tmp_path / "s.json"
    r = run_no_dac("copy", str(src), str(dst), "--dataset-glob", "*", "--no-progress",
                   "--commit-policy", policy, "--summary-json", str(sj), cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert f"cannot read {src / 'bad' / 'f2.txt'}: permission denied" in r.stderr

    def names(d: str) -> list[str]:
        return sorted(p.name for p in (dst / d).glob("*.txt")) if (dst / d).exists() else []

    assert (names("good"), names("bad")) == (good, bad)
    marks = {Path(d["dataset"]).name: d["watermark"]
             for d in status_report(str(dst / ".pydistcp"), {})["datasets"]}
    if policy == "partial":  # the watermark is what was actually published in bad/
        assert marks["bad"] == pytest.approx(1_700_000_001)
    published = {name for name, mark in marks.items() if mark is not None}
    assert ("bad" in published) == (policy == "partial")
    assert ("good" in published) == (policy != "full")
    assert "bad" in marks  # status names the dataset whose run failed, published or not


@needs_setpriv
def test_failed_file_set_is_recovered_without_reading_its_copies_again(tmp_path: Path) -> None:
    src = two_datasets(tmp_path)
    dst, sj = tmp_path / "dst", tmp_path / "s.json"
    r = run_no_dac("copy", str(src), str(dst), "--dataset-glob", "*", "--no-progress",
                   "--summary-json", str(sj), cwd=tmp_path)
    assert r.returncode == 1
    assert summary_of(sj)["files_not_published"] == 2  # bad/f0, bad/f1: kept for recovery
    assert len(status_report(str(dst / ".pydistcp"), {})["recoverable"]) == 2
    (src / "bad" / "f2.txt").chmod(0o644)  # the operator fixes the input
    r = run_no_dac("copy", str(src), str(dst), "--dataset-glob", "*", "--no-progress",
                   "--summary-json", str(sj), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    s = summary_of(sj)
    assert (s["files_copied"], s["files_recovered"]) == (3, 2)
    assert s["bytes_recovered"] == 2 * len("bad0") * 1000  # none of it read from the source
    assert "recovered 2 files" in r.stdout
    assert tree(dst / "bad") == tree(src / "bad")
    assert status_report(str(dst / ".pydistcp"), {})["recoverable"] == []


@needs_setpriv
def test_unwritable_final_directory_is_replayed_once_fixed(tmp_path: Path) -> None:
    src = tmp_path / "src"
    for name in ("a", "b"):
        (src / name).mkdir(parents=True)
        (src / name / "data.txt").write_text(name * 5000)
    dst, sj = tmp_path / "dst", tmp_path / "s.json"
    (dst / "b").mkdir(parents=True)
    (dst / "b").chmod(0o555)  # b's final directory refuses new files
    r = run_no_dac("copy", str(src), str(dst), "--dataset-glob", "*", "--no-progress",
                   "--summary-json", str(sj), cwd=tmp_path)
    assert r.returncode == 1 and "the next run retries it" in r.stderr
    assert (dst / "a" / "data.txt").exists() and not (dst / "b" / "data.txt").exists()
    assert len(status_report(str(dst / ".pydistcp"), {})["pending"]) == 1
    (dst / "b").chmod(0o755)
    r = run_no_dac("copy", str(src), str(dst), "--dataset-glob", "*", "--no-progress",
                   "--summary-json", str(sj), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    s = summary_of(sj)
    assert (s["sequences_replayed"], s["files_recovered"], s["files_copied"]) == (1, 1, 0)
    assert (dst / "b" / "data.txt").read_text() == "b" * 5000


def test_expired_recovery_entries_are_removed(spark: Any, tmp_path: Path) -> None:
    from distcp.commit.recovery import RecoveryArea

    area = RecoveryArea(str(tmp_path / "state"), {})
    (tmp_path / "state" / "recovery" / "abc").mkdir(parents=True)
    (tmp_path / "state" / "recovery" / "abc" / "meta.json").write_text(
        json.dumps({"guid": "abc", "destination": "/x", "kept": 1000.0, "outputs": []}))
    assert area.expire(24 * 3600, now=1000.0 + 3600) == 0
    assert area.expire(24 * 3600, now=1000.0 + 25 * 3600) == 1
    assert not (tmp_path / "state" / "recovery" / "abc").exists()


def test_incremental_rerun_copies_only_changes_and_lists_no_destination(
        spark: Any, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    for d in range(100):
        (src / f"d{d:03d}").mkdir(parents=True)
        for i in range(500):
            (src / f"d{d:03d}" / f"{i}").write_bytes(b"x" * (i % 7))
    first = distcp.copy(str(src), str(dst))
    assert first.ok and first.files_copied == 50_000
    changed = [src / f"d{d:03d}" / "1" for d in range(100)]
    for p in changed:
        p.write_bytes(b"changed!")
    (dst / "d000" / "stray").write_text("not ours")  # invisible without a listing
    again = distcp.copy(str(src), str(dst), incremental=True)
    assert again.ok and (again.files_copied, again.files_skipped) == (100, 49_900)
    assert again.destination_listings == 0
    assert all((dst / p.relative_to(src)).read_bytes() == b"changed!" for p in changed)
    full = distcp.copy(str(src), str(dst))
    assert full.files_copied == 0 and full.destination_listings == 1
