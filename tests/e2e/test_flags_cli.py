"""The rclone-style flags through the real CLI: comparisons and --summary-json -."""

from __future__ import annotations

import json
import os
import time
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


def test_size_only_copy_with_tasks_on_a_real_tree(tmp_path: Path,
                                                  warm_engine: dict[str, str]) -> None:
    src, dst = _trees(tmp_path)
    r = run_cli("copy", "--size-only", "--tasks", "2", str(src), str(dst), env=warm_engine)
    assert r.returncode == 0, r.stderr
    assert (dst / "same.txt").read_bytes() == b"abcdefghij"  # same size: kept
    assert (dst / "grown.txt").read_bytes() == b"longer source"
    assert (dst / "new.txt").read_bytes() == b"n"
    assert r.stdout.startswith("copied 2 files")


def _aged(root: Path, name: str, size: int, age_days: float) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(size))
    when = time.time() - age_days * 86400
    os.utime(path, (when, when))


def test_size_and_age_filters_and_delete_leaves_what_they_leave_out(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _aged(src, "fresh-mid.bin", 2000, 0.1)       # the only one every filter admits
    _aged(src, "fresh-tiny.bin", 10, 0.1)        # below --min-size
    _aged(src, "fresh-big.bin", 9000, 0.1)       # above --max-size
    _aged(src, "old-mid.bin", 2000, 30)          # older than --max-age
    _aged(dst, "stale-mid.bin", 2000, 0.1)       # admitted, not in the source: deleted
    _aged(dst, "archive/huge.bin", 50_000, 0.1)  # filtered out: --delete leaves it
    r = run_cli("copy", "--dry-run", "--delete", "--min-size", "1K", "--max-size", "8K",
                "--max-age", "2d", str(src), str(dst))
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0] + " " + Path(line.split()[1]).name for line in r.stdout.splitlines()
            if line.startswith(("copy", "skip", "delete"))}
    assert rows == {"copy fresh-mid.bin", "delete stale-mid.bin"}

    r = run_cli("copy", "--min-size", "12Q", str(src), str(dst))
    assert r.returncode == 2 and r.stderr.strip().endswith("--min-size: not a size: '12Q' "
                                                           "(examples: 1048576, 64K, 256M, 2G)")
    r = run_cli("copy", "-q", "-v", str(src), str(dst))
    assert r.returncode == 2 and "-q and -v are mutually exclusive" in r.stderr
    r = run_cli("copy", "--log-file", str(tmp_path / "no" / "run.jsonl"), str(src), str(dst))
    assert r.returncode == 2 and "--log-file" in r.stderr and "no such directory" in r.stderr
    assert not (dst / "fresh-mid.bin").exists()


def test_verbose_log_file_bwlimit_then_quiet(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    payload = os.urandom(12 << 20)
    (src / "big.bin").write_bytes(payload)
    (src / "small.txt").write_bytes(b"s")
    (src / "link").symlink_to("small.txt")
    log = tmp_path / "run.jsonl"
    r = run_cli("copy", "-v", "--tasks", "1", "--bwlimit", "1M", "--log-file",
                str(log), "--summary-json", str(tmp_path / "s.json"), str(src), str(dst))
    assert r.returncode == 0, r.stderr
    assert (dst / "big.bin").read_bytes() == payload
    assert f"copy   {dst}/big.bin  (new)" in r.stderr  # -v: decisions are status lines
    assert r.stdout.startswith("copied 2 files")
    # 12 MiB at 1 MiB/s (a quarter second of burst) cannot take less than 11.75 s
    assert json.loads((tmp_path / "s.json").read_text())["phases"]["copy_s"] >= 11.7
    # progress lines (every 5 s when stderr is not a terminal) move while the one big
    # file is read, not only when it is done
    middle = [line for line in r.stderr.splitlines() if line.startswith("[")
              and "12.0 MiB/12.0 MiB" not in line and not line.split("] ")[1].startswith("  0%")]
    assert middle, r.stderr
    events = [json.loads(line) for line in log.read_text().splitlines()]
    by = {(e["event"], Path(e.get("path") or e["destination"]).name) for e in events}
    assert {("decision", "big.bin"), ("decision", "small.txt"), ("copied", "big.bin"),
            ("copied", "small.txt"), ("not-copied", "link")} <= by
    copied = next(e for e in events if e["event"] == "copied" and e["path"].endswith("big.bin"))
    assert copied["bytes"] == 12 << 20 and copied["destination"] == f"{dst}/big.bin"
    assert {e["job_id"] for e in events} == {events[0]["job_id"]}

    r = run_cli("copy", "-q", "--log-file", str(log), str(src), str(dst))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and r.stderr == ""  # -q: errors only, and there were none
    again = [json.loads(line) for line in log.read_text().splitlines()][len(events):]
    assert {(e["event"], e.get("action")) for e in again if e["event"] == "decision"} == {
        ("decision", "skip")}
