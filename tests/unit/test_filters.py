"""The run's filters (distcp.filters), --delete's protection of what they leave out,
the --bwlimit bucket and the --log-file lines, as pure values."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from distcp.configuration import CopyConfiguration
from distcp.copying.throttle import Throttle, per_task
from distcp.errors import ConfigurationError
from distcp.model import CopyableFile, FileStatus
from distcp.filters import FileFilter
from distcp.planning.plan import plan_dataset
from distcp.preflight import check_output_file
from distcp.runlog import RunLog

NOW = 1_700_000_000.0
DAY = 86400.0


def st(size: int, age_days: float = 0.0, url: str = "/src/f") -> FileStatus:
    return FileStatus(url, size, NOW - age_days * DAY)


def test_size_and_age_bounds_are_inclusive_like_rclone() -> None:
    f = FileFilter(min_size=10, max_size=100, min_age=DAY, max_age=7 * DAY, now=NOW)
    assert f.admits("a", st(10, 1)) and f.admits("a", st(100, 7))
    assert not f.admits("a", st(9, 2))        # too small
    assert not f.admits("a", st(101, 2))      # too big
    assert not f.admits("a", st(50, 0.5))     # too new for --min-age 1d
    assert not f.admits("a", st(50, 8))       # too old for --max-age 7d
    assert f.active and f.by_status
    assert not FileFilter().active and FileFilter().admits("x", st(0, 1000))


def test_names_and_status_combine_and_exclude_wins() -> None:
    f = FileFilter(include=("*.csv",), exclude=("tmp/*",), max_size=5, now=NOW)
    assert f.admits("a/b.csv", st(5))
    assert not f.admits("a/b.txt", st(1))
    assert not f.admits("tmp/b.csv", st(1))
    assert not f.admits("a/b.csv", st(6))
    assert f.describe() == "--include *.csv --exclude tmp/* --max-size 5"


def test_configuration_parses_filter_flags_and_names_the_bad_one() -> None:
    cfg = CopyConfiguration.build(["/s"], "/d", min_size="1K", max_age="2d", bwlimit="10M")
    assert (cfg.min_size, cfg.max_age, cfg.bwlimit) == (1024, 2 * DAY, 10 << 20)
    assert cfg.file_filter.now == cfg.started
    with pytest.raises(ConfigurationError, match="^--min-size: not a size: '12Q'"):
        CopyConfiguration.build(["/s"], "/d", min_size="12Q")
    with pytest.raises(ConfigurationError, match="^--max-age: not a duration"):
        CopyConfiguration.build(["/s"], "/d", max_age="soon")
    with pytest.raises(ConfigurationError, match="--min-size is larger than --max-size"):
        CopyConfiguration.build(["/s"], "/d", min_size="2K", max_size="1K")
    with pytest.raises(ConfigurationError, match="--bwlimit must be at least 1K"):
        CopyConfiguration.build(["/s"], "/d", bwlimit=10)
    with pytest.raises(ConfigurationError, match="--log-level must be one of"):
        CopyConfiguration.build(["/s"], "/d", log_level="loud")


def _cf(name: str, size: int = 1) -> CopyableFile:
    return CopyableFile(origin=FileStatus(f"/src/{name}", size, NOW), destination=f"/dst/{name}",
                        dataset_urn="u", file_set="files")


def test_delete_leaves_filtered_out_files_and_their_directories() -> None:
    target = {"/dst/keep": st(1), "/dst/big/huge.bin": st(10**9), "/dst/big": st(0),
              "/dst/gone.txt": st(1)}
    target["/dst/big"] = FileStatus("/dst/big", 0, NOW, is_dir=True)
    plan = plan_dataset("u", "/dst", [_cf("keep")], [], target, delete=True,
                        protected=["/dst/big/huge.bin"])
    assert plan.delete == ("/dst/gone.txt",)
    unprotected = plan_dataset("u", "/dst", [_cf("keep")], [], target, delete=True)
    assert unprotected.delete == ("/dst/big/huge.bin", "/dst/big", "/dst/gone.txt")


def test_throttle_paces_reads_to_its_rate() -> None:
    bucket = Throttle(1 << 20)
    start = time.monotonic()
    for _ in range(10):  # 1.25 MiB at 1 MiB/s with a quarter second of burst
        bucket.take(128 << 10)
    assert time.monotonic() - start >= 0.95
    assert per_task(10 << 20, 4) == (10 << 20) // 4
    assert per_task(None, 4) is None and per_task(2048, 8) == 1024


def test_run_log_writes_one_json_line_per_event(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    log = RunLog(str(path), "job-1")
    log.event("copied", path="/src/a", destination="/dst/a", bytes=3, reason="")
    log.deleted(["/dst/old"])
    log.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(e["event"], e["job_id"]) for e in lines] == [("copied", "job-1"), ("deleted", "job-1")]
    assert lines[0]["bytes"] == 3 and "reason" not in lines[0]  # empty fields are left out
    assert lines[1]["destination"] == "/dst/old"
    RunLog(None, "x").event("copied", path="/a")  # no file: nothing happens


def test_log_file_checked_like_summary_json(tmp_path: Path) -> None:
    check_output_file(str(tmp_path / "l.jsonl"), "--log-file")
    with pytest.raises(ConfigurationError, match="^--log-file: .*no such directory"):
        check_output_file(str(tmp_path / "no" / "l.jsonl"), "--log-file")
