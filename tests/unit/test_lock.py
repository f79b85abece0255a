"""The destination lock on a real local state directory: taken, refused, broken."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from distcp.errors import DestinationBusyError, PlanningError
from distcp.state import lock as lockmod
from distcp.state.lock import DestinationLock, Holder, holder_alive, live_holder


def _write(root: Path, holder: Holder) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "lock").write_text(json.dumps(asdict(holder)))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_taken_released_and_refused_while_held(tmp_path: Path) -> None:
    root = tmp_path / ".pydistcp"
    with DestinationLock(str(root), {}, "job-a") as held:
        doc = json.loads((root / "lock").read_text())
        assert doc["job_id"] == "job-a" and doc["pid"] == os.getpid()
        assert live_holder(str(root), {}) == held.me
        with pytest.raises(DestinationBusyError) as err:
            DestinationLock(str(root), {}, "job-b").acquire()
        text = str(err.value)
        assert f"pid {os.getpid()} on {socket.gethostname()}" in text
        assert "copy job job-a" in text and str(root / "lock") in text
    assert not (root / "lock").exists()
    assert live_holder(str(root), {}) is None


def test_lock_of_a_dead_process_is_broken(tmp_path: Path) -> None:
    root = tmp_path / ".pydistcp"
    now = time.time()
    dead = Holder("job-dead", _dead_pid(), socket.gethostname(), now - 60, now - 60)
    _write(root, dead)
    assert not holder_alive(dead)
    with DestinationLock(str(root), {}, "job-new"):
        assert json.loads((root / "lock").read_text())["job_id"] == "job-new"


def test_reused_pid_is_not_the_holder(tmp_path: Path) -> None:
    """Our own pid, but the lock was taken before this process started: a reused pid."""
    started = time.time() - 3600 * 24 * 365
    me = Holder("old", os.getpid(), socket.gethostname(), started, started)
    assert not holder_alive(me)


def test_other_host_breaks_only_after_silence(tmp_path: Path) -> None:
    now = time.time()
    fresh = Holder("j", 1, "elsewhere.example", now - 5, now - 5)
    silent = Holder("j", 1, "elsewhere.example", now - 7200, now - lockmod.STALE_S - 1)
    assert holder_alive(fresh) and not holder_alive(silent)
    root = tmp_path / ".pydistcp"
    _write(root, fresh)
    with pytest.raises(DestinationBusyError, match="elsewhere.example"):
        DestinationLock(str(root), {}, "mine").acquire()
    _write(root, silent)
    with DestinationLock(str(root), {}, "mine"):
        pass


def test_unreadable_lock_left_by_a_kill_is_removed(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lockmod, "UNREADABLE_S", 0.2)
    root = tmp_path / ".pydistcp"
    root.mkdir()
    (root / "lock").write_bytes(b"")  # created, killed before its document was written
    old = time.time() - 10
    os.utime(root / "lock", (old, old))
    with DestinationLock(str(root), {}, "mine"):
        assert json.loads((root / "lock").read_text())["job_id"] == "mine"


def test_unwritable_state_directory_is_a_planning_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(PlanningError, match="cannot write to the state directory"):
        DestinationLock(str(blocker / ".pydistcp"), {}, "j").acquire()


def test_folders_the_lock_created_go_again_when_the_run_left_nothing(tmp_path: Path) -> None:
    dst = tmp_path / "new-dst"
    with DestinationLock(str(dst / ".pydistcp"), {}, "j"):
        assert (dst / ".pydistcp" / "lock").exists()
    assert not dst.exists()  # a run refused while planning leaves no trace
    with DestinationLock(str(dst / ".pydistcp"), {}, "k"):
        (dst / "published.txt").write_text("x")
    assert (dst / "published.txt").exists() and not (dst / ".pydistcp").exists()
