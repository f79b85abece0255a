"""Exactly-once publishing under real kills: every run is safe to kill.

A run is killed (``os._exit(137)``, like kill -9) at a named commit boundary
through ``DISTCP_CRASH_AT``, or by SIGKILL at a random instant; then a normal run
must leave the destination byte-identical to a clean run, with the same
watermarks and nothing pending. A watcher polls the destination during the
killed run and must never see a final file whose bytes differ from its source.
A run killed at a commit boundary dies in the driver (the client), after its copy job
ended, so it runs on the suite's warm engine like the clean run and the reruns (their
point is what they publish, not a JVM's start; the engine's session slot is a lock the
kernel frees with the killed process). Runs killed in a task or by a SIGKILL of their
whole process group take their own JVM: they stay cold.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from distcp.commit.status import status_report
from tests.conftest import run_cli, tree

pytestmark = pytest.mark.e2e
GLOB = "*/tables/*"


def make_source(root: Path) -> None:
    """Three datasets (one file set each), with nested dirs and an empty dir."""
    rng = random.Random(42)
    for db, table, n in [("db1", "a", 4), ("db1", "b", 3), ("db2", "c", 5)]:
        base = root / db / "tables" / table
        (base / "part=1").mkdir(parents=True)
        (base / "empty").mkdir()
        for i in range(n):
            (base / "part=1" / f"f{i}.bin").write_bytes(rng.randbytes(rng.randint(0, 300_000)))
        os.utime(base / "part=1", (1_700_000_000, 1_700_000_000))


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory,
           warm_engine: dict[str, str]) -> tuple[Path, Path, dict]:
    root = tmp_path_factory.mktemp("golden")
    src, dst = root / "src", root / "dst"
    make_source(src)
    r = run_cli("copy", str(src), str(dst), "--dataset-glob", GLOB, "--no-progress",
                env=warm_engine)
    assert r.returncode == 0, r.stderr
    return src, dst, watermarks(dst)


def watermarks(dst: Path) -> dict[str, float]:
    report = status_report(str(dst / ".pydistcp"), {})
    return {Path(d["dataset"]).name: d["watermark"] for d in report["datasets"]}


class Watcher(threading.Thread):
    """Polls the destination; records any final file whose bytes differ from the source."""

    def __init__(self, src: Path, dst: Path) -> None:
        super().__init__(daemon=True)
        self.src, self.dst = src, dst
        self.stop = threading.Event()
        self.bad: list[str] = []
        self.seen = 0

    def run(self) -> None:
        while not self.stop.is_set():
            for path in self._finals():
                rel = path.relative_to(self.dst)
                try:
                    data = path.read_bytes()
                except FileNotFoundError:
                    continue
                self.seen += 1
                if data != (self.src / rel).read_bytes():
                    self.bad.append(str(rel))
            time.sleep(0.01)

    def _finals(self) -> list[Path]:
        """The final files under the destination now. The state folder is not walked:
        its staging folders come and go while a walk reads them (``rglob`` raised on
        one that vanished, which ended this thread's watch)."""
        found: list[Path] = []
        for root, dirs, files in os.walk(self.dst):  # a folder that vanishes is skipped
            if Path(root) == self.dst:
                dirs[:] = [d for d in dirs if d != ".pydistcp"]
            found += [Path(root) / f for f in files if f.endswith(".bin")]
        return found


DATASETS = ["db1/tables/a", "db1/tables/b", "db2/tables/c"]


def assert_like_golden(dst: Path, golden: tuple[Path, Path, dict]) -> None:
    """Datasets identical in bytes, modes and mtimes; the rest identical in names (the
    parents between DST and the datasets belong to no dataset, so their mtimes are
    those of whichever run made them)."""
    _src, golden_dst, golden_wm = golden
    assert tree(dst).keys() == tree(golden_dst).keys()
    for ds in DATASETS:
        assert tree(dst / ds) == tree(golden_dst / ds)
    assert watermarks(dst) == golden_wm
    report = status_report(str(dst / ".pydistcp"), {})
    assert report["pending"] == [] and report["set_aside"] == []
    staging = dst / ".pydistcp" / "staging"
    assert not [p for p in staging.rglob("*") if p.is_file()]


# Each sequence here is: mkdirs, publish, attributes, watermark, record-run, event
# (6 steps); three datasets give 18 steps per run.
CRASH_POINTS = ["before_persist:1", "after_persist:1", "before_persist:3", "before_step:2",
                "after_step:2", "after_step:4", "before_step:10", "after_step:12",
                "after_step:18", "mid_publish:1", "mid_publish:6", "before_remove:1",
                "before_remove:3"]


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_killed_at_commit_boundary_then_rerun_matches_clean_run(
        point: str, golden: tuple[Path, Path, dict], tmp_path: Path,
        warm_engine: dict[str, str]) -> None:
    src, _, _ = golden
    dst = tmp_path / "dst"
    watcher = Watcher(src, dst)
    watcher.start()
    killed = run_cli("copy", str(src), str(dst), "--dataset-glob", GLOB, "--no-progress",
                     env={**warm_engine, "DISTCP_CRASH_AT": point})
    assert watcher.is_alive(), "the destination's watcher stopped watching"
    watcher.stop.set()
    watcher.join()
    assert killed.returncode == 137, killed.stderr
    assert watcher.bad == []
    rerun = run_cli("copy", str(src), str(dst), "--dataset-glob", GLOB, "--no-progress",
                    env=warm_engine)
    assert rerun.returncode == 0, rerun.stderr
    assert_like_golden(dst, golden)
    again = run_cli("copy", str(src), str(dst), "--dataset-glob", GLOB, "--no-progress",
                    env=warm_engine)
    assert "copied 0 files" in again.stdout  # idempotent: nothing left to do


def test_killed_while_tasks_copy_rerun_recovers_journaled_copies(
        golden: tuple[Path, Path, dict], tmp_path: Path,
        warm_engine: dict[str, str]) -> None:
    """Executor-side kill after the first staged file: the job fails, copies are kept."""
    src, _, _ = golden
    dst = tmp_path / "dst"
    first = run_cli("copy", str(src), str(dst), "--dataset-glob", GLOB, "--no-progress",
                    "--master", "local[2]", env={"DISTCP_CRASH_AT": "after_stage:2"})
    assert first.returncode != 0
    rerun = run_cli("copy", str(src), str(dst), "--dataset-glob", GLOB, "--no-progress",
                    env=warm_engine)
    assert rerun.returncode == 0, rerun.stderr
    assert_like_golden(dst, golden)


@pytest.mark.parametrize("delay", [3.0, 9.0, 15.0])
def test_sigkill_at_a_random_instant_then_rerun_matches_clean_run(
        delay: float, golden: tuple[Path, Path, dict], tmp_path: Path,
        warm_engine: dict[str, str]) -> None:
    src, _, _ = golden
    dst = tmp_path / "dst"
    env = {**os.environ, "PYDISTCP_LOG_DIR": str(tmp_path / "logs")}
    proc = subprocess.Popen([sys.executable, "-m", "distcp", "copy", str(src), str(dst),
                             "--dataset-glob", GLOB, "--no-progress"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    watcher = Watcher(src, dst)
    watcher.start()
    time.sleep(delay * random.uniform(0.8, 1.2))
    os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers
    proc.wait(timeout=60)
    assert watcher.is_alive(), "the destination's watcher stopped watching"
    watcher.stop.set()
    watcher.join()
    assert watcher.bad == []
    rerun = run_cli("copy", str(src), str(dst), "--dataset-glob", GLOB, "--no-progress",
                    env=warm_engine)
    assert rerun.returncode == 0, rerun.stderr
    assert_like_golden(dst, golden)


def _killed_after_the_first_commit_is_logged(golden: tuple[Path, Path, dict],
                                             tmp_path: Path, warm: dict[str, str]) -> Path:
    """A copy of the golden source killed once its first commit is in the log, before
    any of its steps ran; the destination."""
    dst = tmp_path / "dst"
    killed = run_cli("copy", str(golden[0]), str(dst), "--dataset-glob", GLOB, "--no-progress",
                     env={**warm, "DISTCP_CRASH_AT": "after_persist:1"})
    assert killed.returncode == 137
    return dst


def test_a_commit_whose_staged_copies_vanished_is_set_aside_by_the_first_rerun_which_finishes(
        golden: tuple[Path, Path, dict], tmp_path: Path,
        warm_engine: dict[str, str]) -> None:
    src, dst = golden[0], _killed_after_the_first_commit_is_logged(golden, tmp_path, warm_engine)
    shutil.rmtree(dst / ".pydistcp" / "staging")  # a temp cleaner took the staged copies
    r = run_cli("copy", str(src), str(dst), "--dataset-glob", GLOB, "--no-progress",
                env=warm_engine)
    assert r.returncode == 0, r.stderr
    said = r.stdout + r.stderr
    assert "cannot finish: its staged copy of" in said and "the dataset is copied again" in said
    report = status_report(str(dst / ".pydistcp"), {})
    assert len(report["set_aside"]) == 1 and report["pending"] == []
    for ds in DATASETS:  # every dataset complete after that one rerun
        assert tree(dst / ds) == tree(golden[1] / ds)
    assert watermarks(dst) == golden[2]


def test_a_commit_that_keeps_failing_is_set_aside_and_reported(
        golden: tuple[Path, Path, dict], tmp_path: Path,
        warm_engine: dict[str, str]) -> None:
    src, dst = golden[0], _killed_after_the_first_commit_is_logged(golden, tmp_path, warm_engine)
    # its staged copies are there, but a file stands where its files' folder must go
    pending = status_report(str(dst / ".pydistcp"), {})["pending"]
    blocked = next(ds for ds in DATASETS if pending[0]["dataset"].endswith(ds))
    (dst / blocked).mkdir(parents=True, exist_ok=True)
    (dst / blocked / "part=1").write_bytes(b"in the way")
    for attempt in (1, 2):
        r = run_cli("recover", str(dst))
        assert r.returncode == 1 and "replay of commit" in r.stderr, r.stderr
    r = run_cli("copy", str(src), str(dst), "--dataset-glob", GLOB, "--no-progress",
                "--max-replays", "2", env=warm_engine)
    assert r.returncode == 1
    assert "failed 2 replays; set aside in" in r.stderr
    report = status_report(str(dst / ".pydistcp"), {})
    assert len(report["set_aside"]) == 1 and report["pending"] == []
    assert "set aside (need attention): 1" in run_cli("status", str(dst)).stdout
    # the other datasets went on and are complete
    for ds in DATASETS:
        if ds != blocked:
            assert tree(dst / ds) == tree(golden[1] / ds)
    assert (dst / blocked / "part=1").read_bytes() == b"in the way"


def test_corrupt_commit_log_entry_is_named_and_nothing_changes(
        golden: tuple[Path, Path, dict], tmp_path: Path,
        warm_engine: dict[str, str]) -> None:
    src, _, _ = golden
    dst = tmp_path / "dst"
    assert run_cli("copy", str(src), str(dst), "--dataset-glob", GLOB, "--no-progress",
                   env=warm_engine).returncode == 0
    bad = dst / ".pydistcp" / "commits" / "20990101T000000-deadbe-x.json"
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text('{"id": "x", "steps": [')
    before = tree(dst)
    r = run_cli("copy", str(src), str(dst), "--dataset-glob", GLOB, "--no-progress",
                env=warm_engine)
    assert r.returncode == 1
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith(f"pydistcp: error: corrupt commit log entry {bad}: ")
    assert "no data was changed" in line and "Traceback" not in r.stderr
    assert tree(dst) == before


def test_a_retried_task_publishes_once_and_leaves_no_stray_attempt(
        golden: tuple[Path, Path, dict], tmp_path: Path) -> None:
    """The first attempt of every task dies after staging a file; Spark retries it
    (local[2,3] allows retries) and only the accepted attempt's copies are published."""
    import json

    src, _, _ = golden
    dst, sj = tmp_path / "dst", tmp_path / "s.json"
    r = run_cli("copy", str(src), str(dst), "--dataset-glob", GLOB, "--no-progress",
                "--master", "local[2,3]", "--summary-json", str(sj), "--copying", "spark",
                env={"DISTCP_CRASH_AT": "first_attempt_after_stage:1"})
    assert r.returncode == 0, r.stderr
    assert_like_golden(dst, golden)
    log = Path(json.loads(sj.read_text())["log_file"]).read_text()
    assert "Lost task" in log  # the first attempts really died and were retried
