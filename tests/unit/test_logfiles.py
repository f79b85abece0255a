"""The log folder keeps the newest runs' Spark logs and nothing of anyone else's."""

from __future__ import annotations

import os
import time
from pathlib import Path

from distcp.configuration import CopyConfiguration
from distcp.spark.logfiles import KEEP_DAYS, KEEP_RUNS, prune, run_log_file


def _run(folder: Path, job: str, mtime: float, check: bool = False) -> list[Path]:
    stem = f"spark-check-{job}" if check else f"spark-{job}"
    files = [folder / f"{stem}.log", folder / f"{stem}.log4j2.properties"]
    for f in files:
        f.write_text("log")
        os.utime(f, (mtime, mtime))
    return files


def test_runs_beyond_the_newest_go_and_others_files_stay(tmp_path: Path) -> None:
    now = time.time()
    jobs = [f"20261101T{n // 3600:02d}{n // 60 % 60:02d}{n % 60:02d}-abc{n:03x}"
            for n in range(KEEP_RUNS + 5)]  # oldest first
    made = {job: _run(tmp_path, job, now - 60, check=n % 2 == 0) for n, job in enumerate(jobs)}
    theirs = [tmp_path / "spark-notes.log", tmp_path / "other.log", tmp_path / "spark-x.txt"]
    for f in theirs:
        f.write_text("not ours")
    (tmp_path / "engine").mkdir()

    assert prune(str(tmp_path), now) == 2 * 5

    assert not any(f.exists() for job in jobs[:5] for f in made[job])
    assert all(f.exists() for job in jobs[5:] for f in made[job])
    assert all(f.exists() for f in theirs) and (tmp_path / "engine").is_dir()


def test_runs_older_than_the_days_go_unless_a_file_of_theirs_is_fresh(tmp_path: Path) -> None:
    now = time.time()
    old = _run(tmp_path, "20261001T000000-0a0a0a", now - (KEEP_DAYS + 1) * 86_400)
    fresh = _run(tmp_path, "20261002T000000-0b0b0b", now - (KEEP_DAYS + 1) * 86_400)
    os.utime(fresh[0], (now, now))  # a long run still writing its log
    recent = _run(tmp_path, "20261127T000000-0c0c0c", now - 86_400)
    assert prune(str(tmp_path), now) == 2
    assert not any(f.exists() for f in old)
    assert all(f.exists() for f in fresh + recent)


def test_a_run_prunes_its_log_folder_and_a_missing_folder_is_no_error(tmp_path: Path) -> None:
    cfg = CopyConfiguration.build([str(tmp_path)], str(tmp_path / "dst"),
                                  log_dir=str(tmp_path / "logs"))
    assert prune(str(tmp_path / "none")) == 0
    (tmp_path / "logs").mkdir()
    stale = _run(tmp_path / "logs", "20200101T000000-000000", 0.0)
    assert run_log_file(cfg, "spark-20261127T000000-123456.log") == \
        str(tmp_path / "logs" / "spark-20261127T000000-123456.log")
    assert not any(f.exists() for f in stale)
