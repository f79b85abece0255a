"""A small plan is copied in the run's own process, with no Spark job (``run.here``,
issue "Faster than the peers on every path", point 1): the same outputs, state and
failures as a Spark job's, a crash or a Ctrl-C leaving nothing published, and the
bounds past which a run copies on Spark again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import distcp
from distcp.planning.treeplans import HELD
from distcp.run.choice import HERE_FILES, HERE_FORKED
from tests.conftest import (
    PYDISTCP,
    cli_env,
    imported_by,
    one_error_line,
    run_cli,
    traced_cli,
    tree,
)
from tests.fixtures.processes import gone
from tests.fixtures.s3_server import (  # noqa: F401 - fixtures
    S3Server,
    moto_server,
    s3,
)
from tests.fixtures.trees import small_tree

pytestmark = pytest.mark.e2e


_source = small_tree


def _copy_ways(summary: dict[str, Any]) -> list[str]:
    return [row["strategy"] for row in summary["strategy"]["copy"]]


def test_a_small_plan_is_copied_here_with_no_spark_at_all(tmp_path: Path) -> None:
    src, dst, logs = _source(tmp_path / "src"), tmp_path / "dst", tmp_path / "logs"
    out = run_cli("copy", str(src), str(dst), "--engine", "cold", "--no-progress", "-v",
                  "--log-dir", str(logs), "--summary-json", str(tmp_path / "s.json"))
    assert out.returncode == 0, out.stderr
    assert tree(dst) == tree(src)  # bytes, modes (0600 kept) and mtimes
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["strategy"]["copy"] == [{
        "strategy": "here",
        "why": "5 files copied by processes forked here, no Spark job: --copying auto: "
               "5 files of "
               f"{sum(p.stat().st_size for p in src.rglob('*.txt')):,} bytes on a local "
               f"master, at most {HERE_FORKED:,} files: a Spark job's start would "
               "cost more than the copy"}]
    assert summary["files_copied"] == 5 and summary["log_file"] == ""
    assert "starting Spark" not in out.stderr and not list(logs.glob("spark-*.log"))
    again = run_cli("copy", str(src), str(dst), "--engine", "cold", "--no-progress",
                    "--summary-json", str(tmp_path / "s2.json"))
    assert again.returncode == 0, again.stderr
    assert _copy_ways(json.loads((tmp_path / "s2.json").read_text())) == ["nothing"]


@pytest.mark.parametrize("copying", ["driver", "spark"])
def test_here_and_on_spark_give_the_same_outputs_and_state(
        spark: Any, tmp_path: Path, copying: str) -> None:
    """``--copying driver`` past the auto bound (files the thin path would keep on the
    executors come to the driver instead), against a Spark job: the same destination,
    the same published record (a rerun has nothing to copy)."""
    src = _source(tmp_path / "src", HERE_FILES + 20)
    dst = tmp_path / copying
    s = distcp.copy(str(src), str(dst), copying=copying, listing="driver")
    assert s.ok and s.files_copied == HERE_FILES + 20
    assert [row["strategy"] for row in s.strategy["copy"]] == (
        ["here"] if copying == "driver" else ["kept"])
    assert tree(dst) == tree(src)
    again = distcp.copy(str(src), str(dst), listing="driver")
    assert again.files_copied == 0 and again.files_skipped == HERE_FILES + 20


def test_auto_copies_on_spark_past_its_bound(spark: Any, tmp_path: Path) -> None:
    src = _source(tmp_path / "src", HERE_FILES + 1)
    s = distcp.copy(str(src), str(tmp_path / "dst"), listing="driver", check=["not-empty"])
    assert [row["strategy"] for row in s.strategy["copy"]] == ["collected"]
    small = distcp.copy(str(_source(tmp_path / "small", 3)), str(tmp_path / "d2"),
                        check=["not-empty"])
    assert [row["strategy"] for row in small.strategy["copy"]] == ["here"]


def test_a_cold_run_past_a_chunk_keeps_its_files_and_copies_them_here_as_a_warm_run(
        tmp_path: Path) -> None:
    """Cold as on the warm engine, 1,200 files planned on the driver are kept past a
    chunk in copy-rows files, copied by processes forked here (no JVM) and published
    from their results files: no file's result comes back to the driver."""
    src, dst = _source(tmp_path / "src", HERE_FILES + 200), tmp_path / "dst"
    out = run_cli("copy", str(src), str(dst), "--engine", "cold", "--no-progress",
                  "--summary-json", str(tmp_path / "s.json"))
    assert out.returncode == 0, out.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert (_copy_ways(summary), summary["files_copied"], summary["results_collected"]
            ) == (["kept-here"], HERE_FILES + 200, 0)
    assert "starting Spark" not in out.stderr
    assert tree(dst) == tree(src)


def test_a_warm_run_past_its_bound_copies_the_kept_files_here_too(
        tmp_path: Path, warm_engine: dict[str, str]) -> None:
    """On the warm engine, past ``HERE_FILES`` the files to copy are kept in copy-rows
    files and copied by processes forked here, as a cold run's past its bound: the
    engine's tasks were no faster (``choice.kept_here``). ``--copying spark`` sends the
    same plan to the engine."""
    src = _source(tmp_path / "src", HERE_FILES + 200)
    ways = {}
    for copying in ("auto", "spark"):
        dst = tmp_path / copying
        out = run_cli("copy", str(src), str(dst), "--no-progress", "--copying", copying,
                      "--summary-json", str(tmp_path / f"{copying}.json"), env=warm_engine)
        assert out.returncode == 0, out.stderr
        summary = json.loads((tmp_path / f"{copying}.json").read_text())
        ways[copying] = (_copy_ways(summary), summary["files_copied"],
                         summary["results_collected"], "spark_start_s" in summary["phases"])
        assert tree(dst) == tree(src)
    assert ways == {"auto": (["kept-here"], HERE_FILES + 200, 0, False),
                    "spark": (["kept"], HERE_FILES + 200, 0, True)}


def test_a_warm_run_whose_files_all_come_to_the_driver_copies_them_here_too(
        tmp_path: Path, warm_engine: dict[str, str]) -> None:
    """``--visibility file`` brings every file to copy to the driver: on the warm
    engine, past the threads' ``HERE_FILES`` the forked processes copy them here up to
    ``HERE_FORKED``, as cold, rather than the engine's job (20,000 files of 1-64 KiB:
    2.2 s here against 3.1-3.3 s on the engine, benchmarks/RESULTS.md)."""
    src, dst = _source(tmp_path / "src", HERE_FILES + 200), tmp_path / "dst"
    out = run_cli("copy", str(src), str(dst), "--no-progress", "--visibility", "file",
                  "--summary-json", str(tmp_path / "s.json"), env=warm_engine)
    assert out.returncode == 0, out.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert (_copy_ways(summary), summary["files_copied"], summary["results_collected"],
            "spark_start_s" in summary["phases"]) == (["here"], HERE_FILES + 200,
                                                      HERE_FILES + 200, False)
    assert tree(dst) == tree(src)


def test_a_cold_run_past_the_cold_bound_is_kept_and_copied_by_forked_processes(
        tmp_path: Path) -> None:
    """Past ``HERE_FORKED`` (the bound of a plan whose files all come to the driver)
    too, the driver's walk keeps the files to copy in copy-rows files (the thin path,
    no per-file result on the driver), and a cold run copies those chunks in processes
    forked here, not in a Spark job of a JVM of its own (``choice.kept_here``). A
    copying process that dies fails its unit's files, the rest is published, and the
    rerun copies what is missing."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = HERE_FORKED + 200
    for n in range(files):
        if n % 200 == 0:
            (src / f"d{n // 200:03d}").mkdir(parents=True)
        (src / f"d{n // 200:03d}" / f"f{n % 200:03d}").write_bytes(b"%d\n" % n)
    crash = run_cli("copy", str(src), str(dst), "--engine", "cold", "--no-progress",
                    "--cores", "2", "--tasks", "4", "--summary-json", str(tmp_path / "crash.json"),
                    env={"DISTCP_CRASH_AT": "after_stage:7000"})  # each in its second unit
    assert crash.returncode == 1, crash.stderr
    summary = json.loads((tmp_path / "crash.json").read_text())
    assert _copy_ways(summary) == ["kept-here"], summary["strategy"]
    assert summary["files_copied"] + summary["files_failed"] == files
    failed = summary["files_failed"]
    assert 0 < failed < files and summary["results_collected"] == 0
    assert "starting Spark" not in crash.stderr
    assert set(tree(dst)) < set(tree(src))
    out = run_cli("copy", str(src), str(dst), "--engine", "cold", "--no-progress",
                  "--summary-json", str(tmp_path / "s.json"))
    assert out.returncode == 0, out.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    # what is left is kept past a chunk again, or held whole and its results collected
    assert summary["files_copied"] == failed
    assert _copy_ways(summary) == (["here"] if failed <= HELD else ["kept-here"])
    assert tree(dst) == tree(src)


def test_a_small_upload_to_s3_is_copied_here(s3: S3Server, tmp_path: Path) -> None:  # noqa: F811
    src = _source(tmp_path / "src")
    out = run_cli("copy", str(src), "s3://dst/here", "--engine", "cold", "--no-progress",
                  "--summary-json", str(tmp_path / "s.json"), env=s3.env)
    assert out.returncode == 0, out.stderr
    assert _copy_ways(json.loads((tmp_path / "s.json").read_text())) == ["here"]
    got = {k.removeprefix("here/"): v for k, v in s3.objects("dst", "here/").items()
           if "/.pydistcp/" not in k}
    assert got == {p.relative_to(src).as_posix(): p.read_bytes() for p in src.rglob("*.txt")}
    assert s3.pending_uploads() == []


@pytest.mark.parametrize("copying", ["auto", "driver"])
def test_a_small_fork_is_copied_here_for_every_branch_with_no_spark(
        tmp_path: Path, copying: str) -> None:
    """One read for both branches, in this process's forked processes: the same bytes,
    modes and mtimes in each, no Spark log; a rerun has nothing to copy in either."""
    src, logs = _source(tmp_path / "src"), tmp_path / "logs"
    a, b = tmp_path / "a", tmp_path / "b"
    out = run_cli("copy", str(src), str(a), "--fork", str(b), "--engine", "cold",
                  "--copying", copying, "--no-progress", "--log-dir", str(logs),
                  "--summary-json", str(tmp_path / "s.json"))
    assert out.returncode == 0, out.stderr
    assert tree(a) == tree(src) and tree(b) == tree(src)
    summary = json.loads((tmp_path / "s.json").read_text())
    (way,) = summary["strategy"]["copy"]
    assert way["strategy"] == "fork" and "by processes forked here, no Spark job: --copying " \
        f"{copying}" in way["why"], way
    assert summary["files_copied"] == 10 and summary["log_file"] == ""
    assert "starting Spark" not in out.stderr and not list(logs.glob("spark-*.log"))
    again = run_cli("copy", str(src), str(a), "--fork", str(b), "--engine", "cold",
                    "--no-progress", "--summary-json", str(tmp_path / "s2.json"))
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "s2.json").read_text())["files_skipped"] == 10


def _paused_in_staging(src: Path, dst: Path) -> subprocess.Popen[str]:
    """A run copying here, its processes each paused after a staged file."""
    proc = subprocess.Popen([*PYDISTCP, "copy", str(src), str(dst), "--engine", "cold",
                             "--no-progress", "--cores", "2"],
                            env=cli_env({"DISTCP_SLOW_AT": "after_stage=60"}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    staging = dst / ".pydistcp" / "staging"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(p.is_file() for p in staging.rglob("*")):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    return proc


def _children(pid: int) -> set[int]:
    """The processes whose parent is ``pid``."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.add(int(stat.parent.name))
    return out


def test_a_crash_while_copying_here_publishes_nothing_and_the_rerun_finishes(
        tmp_path: Path) -> None:
    src, dst = _source(tmp_path / "src", 8), tmp_path / "dst"
    proc = _paused_in_staging(src, dst)
    workers = _children(proc.pid)
    assert workers  # the files are copied by forked processes
    proc.kill()  # SIGKILL of the run: its copying processes die with it
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert gone(workers)
    assert tree(dst) == {}  # staged copies only, under .pydistcp
    again = run_cli("copy", str(src), str(dst), "--engine", "cold", "--no-progress")
    assert again.returncode == 0, again.stderr
    assert tree(dst) == tree(src)


def test_a_copying_process_that_dies_fails_its_files_and_the_rerun_copies_them(
        tmp_path: Path) -> None:
    src, dst = _source(tmp_path / "src", 8), tmp_path / "dst"
    crash = run_cli("copy", str(src), str(dst), "--engine", "cold", "--no-progress",
                    "--cores", "2", "--tasks", "2", "--summary-json", str(tmp_path / "s.json"),
                    env={"DISTCP_CRASH_AT": "after_stage:3"})  # each process's third file
    assert crash.returncode == 1, crash.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["files_copied"] + summary["files_failed"] == 8
    assert summary["files_failed"] >= 4  # a dead process's whole unit
    assert "exited with status 137" in crash.stderr
    assert set(tree(dst)) < set(tree(src))
    again = run_cli("copy", str(src), str(dst), "--engine", "cold", "--no-progress")
    assert again.returncode == 0, again.stderr
    assert tree(dst) == tree(src)


@pytest.mark.parametrize("attempt", range(3))  # a lost interrupt hung 1 run in 5-8
def test_ctrl_c_while_copying_here_ends_at_once_with_nothing_published(tmp_path: Path,
                                                                         attempt: int) -> None:
    src, dst = _source(tmp_path / "src", 4), tmp_path / "dst"
    proc = _paused_in_staging(src, dst)
    workers = _children(proc.pid)
    pressed = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
    _out, err = proc.communicate(timeout=30)
    assert time.monotonic() - pressed < 10  # not after the paused file's 60 s
    assert proc.returncode == 130, err
    assert workers and gone(workers)  # the copying processes killed, not waited for
    assert one_error_line(err) == ("pydistcp: error: interrupted; nothing unverified was "
                                   "published, rerun to finish")
    assert tree(dst) == {}
    again = run_cli("copy", str(src), str(dst), "--engine", "cold", "--no-progress")
    assert again.returncode == 0, again.stderr
    assert tree(dst) == tree(src)


def test_a_small_copy_here_imports_neither_spark_nor_pandas(tmp_path: Path) -> None:
    """Publishing's first array has pyarrow probe for pandas, which it would import to
    ask (0.25 s of a 0.7 s run): the command answers "absent", as a task does."""
    src, dst = _source(tmp_path / "src"), tmp_path / "dst"
    out = traced_cli("copy", str(src), str(dst), "--no-progress")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("copied 5 files"), out.stdout
    assert tree(dst) == tree(src)
    # (pyarrow's probe is answered by an import refused at once: "pandas" alone)
    assert sorted(m for m in imported_by(out) if m.startswith(("pyspark", "pandas."))) == []
    assert "fsspec" not in imported_by(out)  # local paths are spelled without it
    assert len(list((dst / ".pydistcp" / "manifests").rglob("*.parquet"))) == 1
    again = run_cli("copy", str(src), str(dst), "--no-progress", "--incremental")
    # the segment reads back: every file is in the manifest, none copied again
    assert again.stdout.startswith("copied 0 files (0 B), skipped 5,"), again.stdout


def test_the_copying_processes_of_a_kept_plan_import_neither_spark_nor_pandas(
        tmp_path: Path, warm_engine: dict[str, str]) -> None:
    """On the warm engine a plan of more than a chunk keeps its files in copy-rows
    files, copied by processes forked here, which write their results files with
    pyarrow: the command answers pyarrow's pandas probe before it forks them, so none
    imports pandas (each did, 0.3 s of CPU, for its first results file)."""
    src, dst = _source(tmp_path / "src", 1_100), tmp_path / "dst"
    sj = tmp_path / "s.json"
    out = traced_cli("copy", str(src), str(dst), "--no-progress", "--summary-json", str(sj),
                     env=warm_engine)
    assert out.returncode == 0, out.stderr[-2000:]
    assert tree(dst) == tree(src)
    assert _copy_ways(json.loads(sj.read_text())) == ["kept-here"]
    # every process's imports are on stderr (the forked ones' too, same interpreter)
    assert sorted(m for m in imported_by(out) if m.startswith(("pyspark", "pandas."))) == []


@pytest.mark.parametrize("flags", [(), ("--incremental",)])
def test_a_rerun_with_nothing_to_copy_imports_neither_spark_nor_what_it_does_not_use(
        tmp_path: Path, flags: tuple[str, ...]) -> None:
    """A no-op rerun's cost is its walk: the engine's key is named without importing
    PySpark, the manifest read without ``pyarrow.dataset`` (nor pandas, which pyarrow's
    ``to_numpy`` imports), and the metrics file's, S3's and the events' HTTP libraries
    are imported only by the runs that use them (0.8 s in all). Nor is pyarrow, once
    ``--incremental`` has kept the manifest's sizes (its first read of the segments), nor
    anything publishing would need."""
    src, dst = _source(tmp_path / "src"), tmp_path / "dst"
    assert run_cli("copy", str(src), str(dst), "--no-progress").returncode == 0
    for _ in range(2 if flags else 1):  # the first --incremental keeps the sizes
        out = traced_cli("copy", str(src), str(dst), "--no-progress", *flags,
                      env={"PYDISTCP_ENGINE": "auto",  # asks for the engine's key; none runs
                           "PYDISTCP_ENGINE_DIR": str(tmp_path / "engines")})
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.startswith("copied 0 files"), out.stdout
    imported = imported_by(out)
    assert "distcp.run.pipeline" in imported  # the record is read
    assert sorted(imported & {"pyspark", "pandas", "pyarrow", "numpy", "prometheus_client",
                              "xml.sax.saxutils", "urllib.request", "fsspec", "asyncio"}) == []
    kept = dst / ".pydistcp" / "sizes"
    assert [p.suffix for p in kept.iterdir()] == [".bin"] if flags else not kept.exists()


def test_an_incremental_dry_run_writes_nothing_to_the_state(tmp_path: Path) -> None:
    """``--incremental`` keeps the manifest's sizes in the state; a dry run reads them as
    a run does and writes nothing, neither them nor anything else."""
    src, dst = _source(tmp_path / "src"), tmp_path / "dst"
    assert run_cli("copy", str(src), str(dst), "--no-progress").returncode == 0

    def state() -> dict[str, bytes]:
        return {p.relative_to(dst).as_posix(): p.read_bytes()
                for p in (dst / ".pydistcp").rglob("*") if p.is_file()}

    before = state()
    dry = run_cli("copy", str(src), str(dst), "--incremental", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would copy 0 files" in dry.stdout, dry.stdout
    assert state() == before
    assert run_cli("copy", str(src), str(dst), "--incremental", "--no-progress").returncode == 0
    assert any(name.startswith(".pydistcp/sizes/") for name in state())
