"""Publishing carried out by the executors (``--publishing spark``), on real local Spark.

The commit log still records each file set before its first step; the per-file steps
(renames, multipart completes, move's source deletes) run as Spark tasks, one piece
of the step each. The proof that the tasks, not the driver, did the work is a task
killed mid-publish: its Python worker dies (the fault point is given to the tasks
only), the run reports the set unpublished, and the rerun finishes it from the
commit log, leaving exactly the source's bytes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import distcp
from distcp.commit.log import CommitStepStore
from distcp.spark import publish
from tests.conftest import tree
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e


def _source(root: Path, count: int = 40) -> dict[str, bytes]:
    files = {f"d{i % 4}/f{i:02}.bin": os.urandom(100 + i) for i in range(count)}
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return files


def _published(dst: Path) -> dict[str, bytes]:
    return {p.relative_to(dst).as_posix(): p.read_bytes() for p in dst.rglob("*")
            if p.is_file() and ".pydistcp" not in p.parts}


def _objects(s3: S3Server) -> dict[str, bytes]:
    return {k.removeprefix("t/"): v for k, v in s3.objects("dst", "t/").items()
            if not k.startswith("t/.pydistcp/")}


def _kill_tasks_at(monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    """The fault point reaches the publishing tasks only, never this process."""
    monkeypatch.setattr(publish, "task_environment", lambda: {"DISTCP_CRASH_AT": point})
    monkeypatch.setattr(publish, "MIN_PIECE", 8)  # several pieces, as for a big set


def test_tasks_publish_a_tree_and_the_rerun_finishes_a_task_killed_mid_rename(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = _source(src)
    with monkeypatch.context() as m:
        _kill_tasks_at(m, "mid_publish:3")
        s = distcp.copy(str(src), str(dst), publishing="spark", progress=False)
    assert not s.ok
    assert "the tasks carrying out publish of 40 file(s) failed" in s.failures[0].error
    half = _published(dst)
    assert 3 <= len(half) < len(files)  # the killed worker had renamed 3, the others some
    assert all(files[name] == data for name, data in half.items())  # each one whole
    assert len(CommitStepStore(str(dst / ".pydistcp"), {}).pending()) == 1

    again = distcp.copy(str(src), str(dst), publishing="spark", progress=False)
    assert again.ok, again.failures
    assert _published(dst) == files
    assert tree(dst) == tree(src)  # modes and mtimes too
    assert CommitStepStore(str(dst / ".pydistcp"), {}).pending() == []
    assert not list((dst / ".pydistcp" / "staging").rglob("*.tmp"))


def test_tasks_complete_multipart_uploads_and_the_rerun_completes_the_rest(
        spark: Any, tmp_path: Path, s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    files = _source(src, 24)
    with monkeypatch.context() as m:
        _kill_tasks_at(m, "mid_publish:2")
        s = distcp.copy(str(src), "s3://dst/t", dst_options=s3.options, publishing="spark",
                        progress=False)
    assert not s.ok and "s3-complete of 24 file(s) failed" in s.failures[0].error
    seen = _objects(s3)
    assert 2 <= len(seen) < len(files) and all(files[k] == v for k, v in seen.items())
    assert s3.pending_uploads()  # the rest wait, staged on their final keys

    again = distcp.copy(str(src), "s3://dst/t", dst_options=s3.options, publishing="spark",
                        progress=False)
    assert again.ok, again.failures
    assert _objects(s3) == files
    assert s3.pending_uploads() == []


def test_a_move_whose_deleting_task_is_killed_loses_no_file(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = _source(src, 30)
    with monkeypatch.context() as m:
        _kill_tasks_at(m, "mid_move:4")
        s = distcp.move(str(src), str(dst), publishing="spark", progress=False)
    assert not s.ok and "delete-source of 30 file(s) failed" in s.failures[0].error
    left = {p.relative_to(src).as_posix(): p.read_bytes() for p in src.rglob("*") if p.is_file()}
    assert 4 <= len(files) - len(left) < len(files)  # some sources went, not all
    assert _published(dst) == files  # published before any source was deleted

    again = distcp.move(str(src), str(dst), publishing="spark", progress=False)
    assert again.ok, again.failures
    assert _published(dst) == files
    assert not [p for p in src.rglob("*") if p.is_file()]


def test_driver_and_auto_publish_in_this_process(spark: Any, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Small sets under auto, and every set under driver, never start a publishing job:
    the same fault point given to tasks is never reached."""
    src = tmp_path / "src"
    files = _source(src, 12)
    _kill_tasks_at(monkeypatch, "mid_publish:1")
    for mode in ("auto", "driver"):
        dst = tmp_path / mode
        s = distcp.copy(str(src), str(dst), publishing=mode, progress=False)
        assert s.ok and _published(dst) == files
