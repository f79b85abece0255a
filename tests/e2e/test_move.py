"""``distcp.move``: sources deleted only once their copy is published and found again."""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any

import pytest

import distcp
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".pydistcp" not in p.parts}


def _source(root: Path) -> dict[str, bytes]:
    want = {"a/one.txt": b"one", "a/b/two.bin": os.urandom(70_000), "three": b"3" * 10}
    for rel, data in want.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "empty").mkdir()
    return want


def test_move_publishes_then_deletes_every_source_file(spark: Any, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    want = _source(src)
    s = distcp.move(str(src), str(dst))
    assert s.ok and s.files_copied == 3 and s.sources_deleted == 3
    assert "moved: deleted 3 source files whose copies are published" in s.render()
    assert _files(dst) == want
    assert _files(src) == {}
    assert (src / "a" / "b").is_dir() and (src / "empty").is_dir()  # folders are left
    assert not list((dst / ".pydistcp" / "commits").glob("*.json"))  # nothing pending


def test_an_identical_file_at_the_destination_loses_its_source(spark: Any,
                                                               tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    want = _source(src)
    assert distcp.copy(str(src), str(dst)).ok
    (src / "new.txt").write_bytes(b"new")
    s = distcp.move(str(src), str(dst))
    assert s.ok and s.files_copied == 1 and s.files_skipped == 3 and s.sources_deleted == 4
    assert _files(src) == {}
    assert _files(dst) == {**want, "new.txt": b"new"}


def test_ignore_existing_keeps_the_source_of_a_skipped_file(spark: Any, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src).mkdir()
    (src / "f").write_bytes(b"source version")
    dst.mkdir()
    (dst / "f").write_bytes(b"other")
    s = distcp.move(str(src), str(dst), ignore_existing=True)
    assert s.ok and s.files_skipped == 1
    assert (src / "f").read_bytes() == b"source version"  # never lost
    assert (dst / "f").read_bytes() == b"other"


def test_max_delete_refuses_the_move_before_any_change(spark: Any, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    want = _source(src)
    with pytest.raises(distcp.PlanningError,
                       match=r"^--max-delete 2: the move would delete 3 source files"):
        distcp.move(str(src), str(dst), max_delete=2)
    assert _files(src) == want
    assert not dst.exists() or _files(dst) == {}
    assert distcp.move(str(src), str(dst), max_delete=3).ok
    assert _files(src) == {} and _files(dst) == want


def test_an_unknown_option_is_refused(tmp_path: Path) -> None:
    with pytest.raises(distcp.ConfigurationError, match="^colour: not a parameter of distcp.move"):
        distcp.move(str(tmp_path), str(tmp_path / "d"), colour="red")


def test_a_failed_file_keeps_its_source(spark: Any, tmp_path: Path) -> None:
    """Each converted file is its own set: the good one moves, the corrupt one stays."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "good.txt.gz").write_bytes(gzip.compress(b"good\n"))
    (src / "bad.txt.gz").write_bytes(b"\x1f\x8b\x08\x00 not gzip at all")
    s = distcp.move(str(src), str(dst), convert=["gunzip"])
    assert not s.ok and s.files_failed == 1
    assert _files(dst) == {"good.txt": b"good\n"}
    assert _files(src) == {"bad.txt.gz": b"\x1f\x8b\x08\x00 not gzip at all"}


def test_move_from_s3_deletes_the_objects_with_the_source_options(
        spark: Any, tmp_path: Path, s3: S3Server) -> None:  # noqa: F811 - the fixture
    client = s3.client()
    want = {"in/a.txt": b"a" * 100, "in/d/b.bin": os.urandom(5000)}
    for key, body in want.items():
        client.put_object(Bucket="src", Key=key, Body=body)
    s = distcp.move("s3://src/in", str(tmp_path / "dst"), src_options=s3.options)
    assert s.ok and s.files_copied == 2
    assert _files(tmp_path / "dst") == {k.removeprefix("in/"): v for k, v in want.items()}
    assert s3.objects("src", "in/") == {}


def test_recover_finishes_a_pending_move_with_the_source_options(
        tmp_path: Path, s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """A move killed after publishing leaves its deletions pending; ``recover`` has no
    run's options, so it takes the sources' own (never kept in the commit log). No
    AWS_* variables: only the options can reach moto."""
    for key in s3.env:
        monkeypatch.delenv(key)
    from distcp.commit.log import CommitStepStore
    from distcp.commit.move_steps import DeleteSources
    from distcp.commit.steps import CommitSequence
    from distcp.storage import filesystems as fsutil

    s3.client().put_object(Bucket="src", Key="recover-move/a.txt", Body=b"moved")
    fs, path = fsutil.filesystem("s3://src/recover-move/a.txt", s3.options)
    origin = fsutil.status(fs, fs.info(path))
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "a.txt").write_bytes(b"moved")
    root = str(dst / ".pydistcp")
    entry = ("s3://src/recover-move/a.txt", origin.size, origin.mtime, ((str(dst / "a.txt"), 5),))
    CommitStepStore(root, {}).persist(
        CommitSequence("urn", "fs", (DeleteSources((entry,)),), "job-1:fs"), "job-1")
    assert "endpoint_url" not in (dst / ".pydistcp" / "commits").joinpath(
        "job-1:fs.json").read_text()
    s = distcp.recover(str(dst), src_options=s3.options)
    assert s.ok and s.sequences_replayed == 1, s.failures
    assert s3.objects("src", "recover-move/") == {}
    assert _files(dst) == {"a.txt": b"moved"}


def test_delete_empty_src_dirs_removes_the_folders_left_empty(spark: Any,
                                                               tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    want = _source(src)
    (src / "keep").mkdir()
    (src / "keep" / "skip.tmp").write_bytes(b"excluded, so not moved")
    s = distcp.move(str(src), str(dst), exclude=["*.tmp"], delete_empty_src_dirs=True)
    assert s.ok and _files(dst) == want
    assert sorted(p.relative_to(src).as_posix() for p in src.rglob("*")) == \
        ["keep", "keep/skip.tmp"]  # the root and a folder still holding a file stay
