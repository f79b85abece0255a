"""The real ``pydistcp`` command, in a subprocess, on local Spark."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PYDISTCP, cli_env, run_cli, tree

pytestmark = pytest.mark.e2e


def make_tree(root: Path) -> None:
    """Nested dirs, unicode/space names, a 0-byte file, empty dirs and mixed modes."""
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "empty" / "nested-empty").mkdir(parents=True)
    (root / "a" / "b" / "c" / "deep.bin").write_bytes(os.urandom(3 << 20))
    (root / "a" / "ünïcödé name.txt").write_text("grüße\n" * 100)
    (root / "a" / "b" / "zero").write_bytes(b"")
    (root / "top.csv").write_text("id,v\n1,2\n")
    (root / "a" / "script.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "a" / "script.sh").chmod(0o750)
    (root / "top.csv").chmod(0o444)
    (root / "a" / "b").chmod(0o700)
    for i, p in enumerate(sorted(root.rglob("*"), reverse=True)):
        os.utime(p, (1_600_000_000 + i, 1_600_000_000 + i))


#: The marks of a cold run, in the order they must come (each process's own clock is the
#: machine's: the lines of the client, the driver JVM and the workers are comparable).
COLD_MARKS = ["client process created", "client imports done", "locked", "planned",
              "spark session starting", "driver JVM process created", "spark session ready",
              "copy job submitted", "worker process created", "worker's first task starts",
              "worker's first file done", "copy job done", "copied", "published",
              "client exits"]


#: How far a mark read from /proc may stand from the truth (two 0.01 s ticks).
KERNEL_SLACK = 0.02


#: The marks of a run that copies in its own process (``run.here``): no Spark at all.
HERE_MARKS = ["client process created", "client imports done", "locked", "planned",
              "copying in this process", "copied in this process", "copied", "published",
              "client exits"]


def assert_timeline(text: str, engine: str) -> None:
    """Every mark a run must leave, in order (a warm engine's workers and JVM leave none;
    a run copying here leaves no Spark mark, nor a worker's)."""
    first: dict[str, float] = {}
    for line in text.splitlines():
        at, pid, name = line.split(" ", 2)
        assert int(pid) > 0
        first.setdefault(name, float(at))
    want = {"cold": COLD_MARKS, "here": HERE_MARKS}.get(engine) or [
        m for m in COLD_MARKS if not m.startswith(("driver JVM", "worker", "spark session"))]
    if engine == "here":
        assert [m for m in first if m.startswith(("spark", "driver JVM", "worker"))] == []
    assert [m for m in want if m not in first] == [], first
    # A "... process created" mark is read from the kernel, whose start time and uptime
    # each come in 0.01 s ticks: it may stand up to two ticks from the truth either way.
    for before, after in zip(want, want[1:]):
        slack = KERNEL_SLACK if "process created" in before + after else 0.0
        assert first[after] >= first[before] - slack, \
            (before, after, sorted(first.items(), key=lambda kv: kv[1]))


def summary(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("engine", ["cold", "warm", "here"])
def test_tree_copy_is_identical_then_incremental(engine: str, tmp_path: Path) -> None:
    """On a cold JVM, on the warm engine, and copied in the run's own process (``here``:
    the default for a plan this small; the others ask for Spark)."""
    src, dst, sj = tmp_path / "src", tmp_path / "dst", tmp_path / "s.json"
    make_tree(src)
    timeline = tmp_path / "timeline.txt"  # where the seconds went (distcp.timeline)
    how = ["--engine", "cold"] if engine == "here" else [
        "--engine", engine, "--copying", "spark"]
    first = run_cli("copy", str(src), str(dst), "--summary-json", str(sj), *how,
                    env={"PYDISTCP_TIMELINE": str(timeline)})
    assert first.returncode == 0, first.stderr
    assert_timeline(timeline.read_text(), engine)
    assert tree(dst) == tree(src)  # bytes, modes and mtimes, directories included
    s = summary(sj)
    total = sum(p.stat().st_size for p in src.rglob("*") if p.is_file())
    assert (s["files_copied"], s["files_failed"], s["bytes_copied"]) == (5, 0, total)
    assert {"files_skipped", "files_deleted", "duration_s", "failures"} <= set(s)
    assert "copied 5 files" in first.stdout
    assert "Exception" not in first.stderr and "WARN" not in first.stderr + first.stdout
    if engine == "here":
        assert s["log_file"] == "" and [r["strategy"] for r in s["strategy"]["copy"]] == [
            "here"]
    else:
        used_warm = "used the warm engine" in Path(s["log_file"]).read_text()
        assert used_warm == (engine == "warm")

    again = run_cli("copy", str(src), str(dst), "--summary-json", str(sj), "--no-progress")
    assert again.returncode == 0, again.stderr
    assert (summary(sj)["files_copied"], summary(sj)["files_skipped"]) == (0, 5)
    assert not (dst / "src").exists()  # a rerun never nests DST/SRC

    (src / "top.csv").chmod(0o644)
    (src / "top.csv").write_text("id,v\n1,3\n")
    third = run_cli("copy", str(src), str(dst), "--summary-json", str(sj), "--no-progress",
                    *how)
    assert third.returncode == 0, third.stderr
    assert summary(sj)["files_copied"] == 1
    assert (dst / "top.csv").read_text() == "id,v\n1,3\n"
    assert tree(dst) == tree(src)


def test_dry_run_changes_nothing_and_delete_mirrors(tmp_path: Path,
                                                    warm_engine: dict[str, str]) -> None:
    src, dst, sj = tmp_path / "src", tmp_path / "dst", tmp_path / "s.json"
    src.mkdir()
    (src / "keep.txt").write_text("k")
    dst.mkdir()
    (dst / "keep.txt").write_text("k")
    os.utime(dst / "keep.txt", (os.stat(src / "keep.txt").st_mtime,) * 2)
    (dst / "old").mkdir()
    (dst / "old" / "stale.txt").write_text("s")
    before = tree(dst)

    dry = run_cli("copy", str(src), str(dst), "--delete", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"delete {dst / 'old' / 'stale.txt'}  (not in source)" in dry.stdout
    assert f"skip   {dst / 'keep.txt'}  (same size and mtime)" in dry.stdout
    assert tree(dst) == before

    real = run_cli("copy", str(src), str(dst), "--delete", "--summary-json", str(sj),
                   env=warm_engine)
    assert real.returncode == 0, real.stderr
    assert sorted(p.name for p in dst.iterdir() if p.name != ".pydistcp") == ["keep.txt"]
    assert summary(sj)["files_deleted"] == 2  # the file and its directory


def test_an_incremental_rerun_on_the_warm_engine_keeps_and_renews_the_sizes(
        tmp_path: Path, warm_engine: dict[str, str]) -> None:
    """The warm engine's ``--incremental`` rerun whose copy may take a Spark job plans in
    a forked child, which keeps the manifest's sizes in the state as a run planning in
    its own process does (``--copying spark``; tests/e2e/test_planning_beside.py says
    which runs plan beside): the next rerun skips every
    file from them, a file changed behind the tool's back is still copied (its size and
    mtime differ from its row) and the publish renews them; a state folder where they
    cannot be kept costs one line on stderr, never the run."""
    src, dst, sj = tmp_path / "src", tmp_path / "dst", tmp_path / "s.json"
    make_tree(src)
    inc = ["--incremental", "--copying", "spark", "--no-progress", "--summary-json", str(sj)]
    assert run_cli("copy", str(src), str(dst), "--no-progress", env=warm_engine
                   ).returncode == 0
    kept = dst / ".pydistcp" / "sizes"
    assert not kept.exists()  # only --incremental reads the manifest's sizes
    first = run_cli("copy", str(src), str(dst), *inc, env=warm_engine)
    assert first.returncode == 0, first.stderr
    assert (summary(sj)["files_copied"], summary(sj)["files_skipped"]) == (0, 5)
    [made] = kept.iterdir()
    before = made.read_bytes()
    (src / "top.csv").chmod(0o644)
    (src / "top.csv").write_text("id,v\n1,2,3\n")  # another size: changed behind its back
    second = run_cli("copy", str(src), str(dst), *inc, env=warm_engine)
    assert second.returncode == 0, second.stderr
    assert (summary(sj)["files_copied"], summary(sj)["files_skipped"]) == (1, 4)
    assert tree(dst) == tree(src)
    third = run_cli("copy", str(src), str(dst), *inc, env=warm_engine)
    assert (summary(sj)["files_copied"], summary(sj)["files_skipped"]) == (0, 5)
    assert [p.name for p in kept.iterdir()] == [made.name]
    assert made.read_bytes() != before  # made again from the segments after the publish
    assert third.stderr.strip() == ""
    made.unlink()
    kept.rmdir()
    kept.write_bytes(b"")  # a file where the folder goes: the sizes cannot be kept
    blocked = run_cli("copy", str(src), str(dst), *inc, env=warm_engine)
    assert blocked.returncode == 0, blocked.stderr
    assert (summary(sj)["files_copied"], summary(sj)["files_skipped"]) == (0, 5)
    [line] = [x for x in blocked.stderr.splitlines() if x.strip()]
    assert line.startswith(f"state: cannot keep the manifest sizes in {kept}/"), line


def test_glob_datasets_land_at_their_relative_paths(tmp_path: Path,
                                                    warm_engine: dict[str, str]) -> None:
    wh, out = tmp_path / "warehouse", tmp_path / "out"
    for db, table in [("sales", "orders"), ("sales", "items"), ("hr", "people")]:
        part = wh / db / "tables" / table / "dt=2026-01-01"
        part.mkdir(parents=True)
        (part / "part-0.parquet").write_bytes(os.urandom(1000))
    (wh / "sales" / "scratch").mkdir()
    (wh / "sales" / "scratch" / "tmp").write_text("not a dataset")
    r = run_cli("copy", str(wh), str(out), "--dataset-glob", "*/tables/*", "--no-progress",
                env=warm_engine)
    assert r.returncode == 0, r.stderr
    got = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.parquet")
                 if ".pydistcp" not in p.parts)  # the manifests are Parquet too
    assert got == ["hr/tables/people/dt=2026-01-01/part-0.parquet",
                   "sales/tables/items/dt=2026-01-01/part-0.parquet",
                   "sales/tables/orders/dt=2026-01-01/part-0.parquet"]
    assert not (out / "sales" / "scratch").exists()


def test_non_tty_progress_prints_plain_lines(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(os.urandom(1000))
    r = run_cli("copy", str(src), str(tmp_path / "dst"))
    assert r.returncode == 0, r.stderr
    # status and progress on stderr; stdout keeps only the summary
    assert "pydistcp: copying 1 file(s) by processes forked here, no Spark job" in r.stderr
    assert "starting Spark" not in r.stderr  # a plan this small needs none
    assert "100% 1/1 files" in r.stderr and "\r" not in r.stderr
    assert r.stdout.startswith("copied 1 files") and "pydistcp:" not in r.stdout


def run_on_terminal(*args: str, timeout: float = 300) -> tuple[int, str]:
    """Run ``pydistcp ARGS`` on a pseudo-terminal, as in an interactive shell."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*PYDISTCP, *args], stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=follower, env=cli_env())
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=timeout), b"".join(chunks).decode(errors="replace")


def test_tty_progress_is_one_bar_redrawn_in_place(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(40):
        (src / f"f{i:02d}").write_bytes(os.urandom(32 << 10))
    rc, out = run_on_terminal("copy", str(src), str(tmp_path / "dst"))
    assert rc == 0, out
    bars = [line for line in out.split("\r") if line.startswith("[")]
    assert bars, out
    final = bars[-1]
    assert "100% 40/40 files" in final and "1.2 MiB/1.2 MiB" in final and "ETA 0s" in final
    assert all("\x1b[K" in b for b in bars)  # each redraw clears the rest of the line
    assert "copied 40 files" in out


def test_workers_run_the_interpreter_that_runs_pydistcp(tmp_path: Path) -> None:
    """As from an unactivated venv or pipx: the first python3 on PATH is another one."""
    decoy = tmp_path / "bin"
    decoy.mkdir()
    (decoy / "python3").write_text("#!/bin/sh\necho wrong interpreter >&2\nexit 1\n")
    (decoy / "python3").chmod(0o755)
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"data")
    r = run_cli("copy", str(src), str(tmp_path / "dst"), "--no-progress",
                env={"PATH": f"{decoy}:{os.environ['PATH']}"})
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "dst" / "f").read_bytes() == b"data"
