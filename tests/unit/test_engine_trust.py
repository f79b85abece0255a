"""Which warm engine a caller may use: only its own identity's, in a directory and with a
token file nobody else could have planted or changed (``Engine.refusal``). No Spark: the
files are written here as an engine's would be, the server is any process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distcp.errors import EngineRefusedError, EnvironmentProblem
from distcp.spark.engine import Engine, identity

needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="needs root's setpriv")


def _engine(root: Path, pid: int | None = None) -> Engine:
    """An engine directory as ``ensure`` leaves it: 0700, its discovery file 0600."""
    eng = Engine(root / "key")
    eng.dir.mkdir(mode=0o700, parents=True)
    eng.discovery.write_text(json.dumps({"pid": pid or os.getpid(), "host": "127.0.0.1",
                                         "port": 1, "token": "t"}))
    eng.discovery.chmod(0o600)
    eng.meta_path.write_text(json.dumps({"inputs": {"identity": identity()}}))
    return eng


def test_the_callers_own_engine_is_used(tmp_path: Path) -> None:
    eng = _engine(tmp_path)
    assert eng.refusal() is None
    eng.check()


def test_a_directory_or_token_file_others_may_write_is_refused(tmp_path: Path) -> None:
    eng = _engine(tmp_path)
    eng.discovery.chmod(0o622)
    assert eng.refusal() == f"{eng.discovery} is writable by others (mode 0622)"
    eng.discovery.chmod(0o600)
    eng.dir.chmod(0o777)
    assert eng.refusal() == f"{eng.dir} is writable by others (mode 0777)"
    with pytest.raises(EngineRefusedError) as caught:
        eng.check()
    assert isinstance(caught.value, EnvironmentProblem)  # exit status 3
    assert str(caught.value).startswith(f"refusing the warm engine in {eng.dir}: ")


def test_a_linked_directory_is_refused(tmp_path: Path) -> None:
    eng = _engine(tmp_path / "real")
    (tmp_path / "shared").mkdir()
    link = Engine(tmp_path / "shared" / "key")
    link.dir.symlink_to(eng.dir)
    assert link.refusal() == f"{link.dir} is a symbolic link"


def test_a_parent_anyone_may_rename_in_is_refused(tmp_path: Path) -> None:
    """World-writable without the sticky bit: anyone could swap the engine's directory
    for their own between two checks."""
    eng = _engine(tmp_path)
    tmp_path.chmod(0o777)
    assert "writable by everyone without the sticky bit" in (eng.refusal() or "")
    tmp_path.chmod(0o1777)
    assert eng.refusal() is None


def test_an_engine_recorded_for_another_identity_is_refused(tmp_path: Path) -> None:
    eng = _engine(tmp_path)
    other = {**identity(), "uid": identity()["uid"] + 1}
    eng.meta_path.write_text(json.dumps({"inputs": {"identity": other}}))
    assert (eng.refusal() or "").startswith("it was started by another identity")


@needs_root
def test_files_of_another_uid_are_refused(tmp_path: Path) -> None:
    eng = _engine(tmp_path)
    shutil.chown(eng.discovery, "nobody")
    assert eng.refusal() == (f"{eng.discovery} is owned by uid 65534, not by you "
                             f"(uid {os.geteuid()})")


@pytest.fixture()
def nobodys_process() -> Iterator[int]:
    proc = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                             "--", "sleep", "60"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@needs_root
def test_a_server_running_as_another_identity_is_refused(tmp_path: Path,
                                                         nobodys_process: int) -> None:
    """Files that look like the caller's own do not help when the server behind them runs
    with other rights: its tasks would read and write as that identity."""
    eng = _engine(tmp_path, pid=nobodys_process)
    for _ in range(50):  # setpriv has switched once /proc says so
        if "65534" in Path(f"/proc/{nobodys_process}/status").read_text():
            break
        time.sleep(0.02)
    why = eng.refusal() or ""
    assert why.startswith(f"its server (pid {nobodys_process}) runs as uid 65534, gid 65534")


def test_the_identity_is_part_of_the_engines_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another user (or the same one with other groups) never even finds the engine."""
    from distcp.spark import engine

    java = shutil.which("java") or "java"
    mine = Engine.for_settings("local[2]", java, {})[0].dir
    monkeypatch.setattr(engine, "identity", lambda: {**identity(), "groups": [12345]})
    assert Engine.for_settings("local[2]", java, {})[0].dir != mine
