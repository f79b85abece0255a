"""Crash handling a user can follow: a killed run, then status / recover / copy;
one run per destination; cleanup frees a dead run's bytes. Real CLI, real kills."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import cli_env, run_cli

pytestmark = pytest.mark.e2e
FILES, SIZE = 300, 1 << 20


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("crash-src") / "src"
    src.mkdir()
    for i in range(FILES):
        (src / f"f{i:03d}.bin").write_bytes(os.urandom(SIZE))
    return src


def _start(src: Path, dst: Path, slow: bool = False) -> subprocess.Popen[bytes]:
    """The copy in a session of its own; ``slow``: each file's copy followed by a pause
    (``DISTCP_SLOW_AT``), so that a run cannot publish before the test kills it: on a
    quiet machine the 300 files were copied, journaled and published between two polls."""
    env = cli_env({"DISTCP_SLOW_AT": "after_stage=0.05"} if slow else None)
    return subprocess.Popen([sys.executable, "-m", "distcp", "copy", str(src), str(dst),
                             "--no-progress"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _wait_for(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _journaled(dst: Path) -> int:
    return sum(len(json.loads(p.read_bytes() or b"[]"))
               for p in (dst / ".pydistcp" / "progress").rglob("*.j*.json")
               if p.stat().st_size)


def _kill_after_journal(src: Path, dst: Path) -> None:
    proc = _start(src, dst, slow=True)
    try:
        _wait_for(lambda: _journaled(dst) >= 2, 240, "journaled copies")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers
        proc.wait(timeout=60)
    assert not list(dst.glob("*.bin"))  # the file set was not published


def test_killed_run_status_recover_then_copy(source: Path, tmp_path: Path,
                                             warm_engine: dict[str, str]) -> None:
    dst = tmp_path / "dst"
    _kill_after_journal(source, dst)

    status = run_cli("status", str(dst))
    assert status.returncode == 0, status.stderr
    report = json.loads(run_cli("status", str(dst), "--json").stdout)
    journaled = len(report["journaled"])
    assert journaled >= 2 and report["running"] is None
    assert f"verified copies journaled by interrupted runs: {journaled} " in status.stdout

    recovered = run_cli("recover", str(dst))
    assert recovered.returncode == 0, recovered.stderr
    assert f"kept {journaled} verified copies" in recovered.stdout
    assert "the next 'pydistcp copy' to this destination publishes them" in recovered.stdout
    after = json.loads(run_cli("status", str(dst), "--json").stdout)
    assert len(after["recoverable"]) == journaled and after["journaled"] == []

    copy = run_cli("copy", str(source), str(dst), "--no-progress", env=warm_engine)
    assert copy.returncode == 0, copy.stderr
    assert f"recovered {journaled} files" in copy.stdout
    for i in (0, FILES // 2, FILES - 1):
        name = f"f{i:03d}.bin"
        assert (dst / name).read_bytes() == (source / name).read_bytes()
    assert len(list(dst.glob("*.bin"))) == FILES


def test_second_run_on_a_destination_is_refused_naming_the_first(source: Path,
                                                                 tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    first = _start(source, dst)
    try:
        _wait_for(lambda: (dst / ".pydistcp" / "lock").exists(), 120, "the first run's lock")
        second = run_cli("copy", str(source), str(dst), "--no-progress")
        assert second.returncode == 3, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("pydistcp: error: destination busy")
        assert f"(pid {first.pid} on " in lines[0] and "copy job " in lines[0]
        assert first.wait(timeout=300) == 0
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert not (dst / ".pydistcp" / "lock").exists()
    assert len(list(dst.glob("*.bin"))) == FILES


def test_cleanup_frees_every_byte_a_dead_run_left(source: Path, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    _kill_after_journal(source, dst)
    state = dst / ".pydistcp"
    left = sum(p.stat().st_size for p in state.rglob("*") if p.is_file())
    assert left >= 2 * SIZE
    out = run_cli("cleanup", str(dst), "--older-than", "0s")
    assert out.returncode == 0, out.stderr
    assert "staging of 1 dead run(s)" in out.stdout
    remaining = [p for part in ("staging", "progress", "splits", "recovery")
                 for p in (state / part).rglob("*") if p.is_file()]
    assert remaining == []
    assert not (state / "lock").exists()
