"""The rclone-style flags through the real CLI: comparisons and --summary-json -."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import run_cli


def _trees(tmp_path: Path) -> tuple[Path, Path]:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "same.txt").write_bytes(b"0123456789")
    (src / "grown.txt").write_bytes(b"longer source")
    (src / "new.txt").write_bytes(b"n")
    (dst / "same.txt").write_bytes(b"abcdefghij")  # same size, other bytes, newer
    (dst / "grown.txt").write_bytes(b"short")
    os.utime(dst / "same.txt", (2_000_000_000, 2_000_000_000))
    return src, dst


def test_comparisons_plan_and_summary_json_on_stdout(tmp_path: Path) -> None:
    src, dst = _trees(tmp_path)
    r = run_cli("copy", "--dry-run", "--size-only", "--summary-json", "-", str(src), str(dst))
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)  # stdout is exactly one JSON document
    assert summary["files_skipped"] == 1
    assert "same.txt  (same size (--size-only))" in r.stderr
    assert "grown.txt  (size differs)" in r.stderr

    r = run_cli("copy", "--dry-run", "--ignore-existing", str(src), str(dst))
    assert r.returncode == 0, r.stderr
    assert "skip   " in r.stdout and "grown.txt  (destination exists (--ignore-existing))" in r.stdout
    assert "new.txt  (new)" in r.stdout


def test_two_comparison_flags_are_a_usage_error(tmp_path: Path) -> None:
    src, dst = _trees(tmp_path)
    r = run_cli("copy", "--checksum", "--overwrite", str(src), str(dst))
    assert r.returncode == 2
    assert "--overwrite and --checksum are mutually exclusive" in r.stderr
    assert (dst / "grown.txt").read_bytes() == b"short"


def test_max_delete_refuses_before_any_change(tmp_path: Path) -> None:
    src, dst = _trees(tmp_path)
    (dst / "extra1").write_bytes(b"x")
    (dst / "extra2").write_bytes(b"y")
    r = run_cli("copy", "--delete", "--max-delete", "1", "--no-progress", str(src), str(dst))
    assert r.returncode == 2, r.stderr
    assert "--max-delete 1: the plan would delete 2 entries" in r.stderr
    assert (dst / "extra1").exists() and (dst / "extra2").exists()
    assert not (dst / "new.txt").exists()


def test_size_only_copy_with_tasks_on_a_real_tree(tmp_path: Path) -> None:
    src, dst = _trees(tmp_path)
    r = run_cli("copy", "--size-only", "--tasks", "2", str(src), str(dst))
    assert r.returncode == 0, r.stderr
    assert (dst / "same.txt").read_bytes() == b"abcdefghij"  # same size: kept
    assert (dst / "grown.txt").read_bytes() == b"longer source"
    assert (dst / "new.txt").read_bytes() == b"n"
    assert r.stdout.startswith("copied 2 files")
