"""Small objects S3 -> local disk: one GET If-Match per object, against real servers.

The task function runs in-process against moto and ``rclone serve s3`` so a botocore
hook can count the requests and an object can be overwritten between listing and
copy; the CLI run checks a whole tree (bytes, mtimes) and that a rerun copies 0.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import fsspec.asyn
import pytest

from distcp import fs as fsutil
from distcp.model import CopyableFile, WorkUnit
from distcp.task import TaskSpec, copy_file, run_work_unit
from tests.conftest import run_cli
from tests.fixtures.s3_server import (  # noqa: F401 - fixtures
    S3Server,
    moto_server,
    rclone_server,
    s3_any,
)

pytestmark = pytest.mark.e2e


def _put(s3: S3Server, objects: dict[str, bytes]) -> None:
    client = s3.client()
    for key, data in objects.items():
        client.put_object(Bucket="src", Key=key, Body=data)


def _listed(s3: S3Server, prefix: str, tmp: Path) -> list[CopyableFile]:
    fs, path = fsutil.filesystem(f"s3://src/{prefix}", s3.options)
    fs.invalidate_cache()
    return [CopyableFile(origin=fsutil.status(fs, info), dataset_urn="d", file_set="",
                         destination=str(tmp / "out" / name.rsplit("/", 1)[1]))
            for name, info in sorted(fs.find(path, detail=True).items())]


def _count_requests(s3: S3Server) -> list[str]:
    """Every request the task's s3fs client sends, by operation name."""
    fs, _ = fsutil.filesystem("s3://src/", s3.options)
    fsspec.asyn.sync(fs.loop, fs.set_session)
    seen: list[str] = []

    def hook(request: Any, **_: Any) -> None:
        seen.append(request.method)

    fs.s3.meta.events.register("before-send.s3", hook)
    return seen


def test_one_get_per_small_object_and_a_changed_source_stages_nothing(
        s3_any: S3Server, tmp_path: Path) -> None:  # noqa: F811
    s3 = s3_any
    rng = random.Random(9)
    objects = {f"small/f{i:03d}.bin": rng.randbytes(64) for i in range(40)}
    _put(s3, objects)
    files = _listed(s3, "small", tmp_path)
    assert len(files) == 40 and all(f.origin.etag for f in files)
    staging = tmp_path / "staging"
    spec = TaskSpec(job_id="j", staging_root=str(staging), progress_root=str(tmp_path / "p"),
                    src_options=s3.options)
    seen = _count_requests(s3)
    results = run_work_unit(WorkUnit(unit_id=0, files=tuple(files)), spec, "a0")
    assert [r.status for r in results] == ["ok"] * 40, [r.message for r in results]
    assert seen == ["GET"] * 40  # no HEAD before (size, ETag) nor after (recheck)
    for f, r in zip(files, results):
        assert Path(r.staging).read_bytes() == objects[f"small/{Path(f.origin.url).name}"]
        assert os.stat(r.staging).st_mtime == pytest.approx(f.origin.mtime, abs=1e-3)

    # overwritten between listing and copy: the If-Match GET refuses, nothing staged
    s3.client().put_object(Bucket="src", Key="small/f007.bin", Body=b"new" * 30)
    changed = tmp_path / "changed"
    changed.mkdir()
    [failed] = copy_file(files[7], 0, "a1", str(changed), 0, spec, bytearray(1 << 16))
    assert failed.status == "failed" and failed.error_type == "SourceReadError"
    assert "source changed while copying: s3://src/small/f007.bin" in failed.message
    assert list(changed.iterdir()) == []


def test_small_objects_tree_to_local_is_identical_with_mtimes_and_rerun_copies_none(
        s3_any: S3Server, tmp_path: Path) -> None:  # noqa: F811
    s3 = s3_any
    rng = random.Random(11)
    objects = {f"tree/d{i % 5}/o{i:03d}.bin": rng.randbytes(rng.randrange(0, 300))
               for i in range(500)}
    _put(s3, objects)
    listed = {s: s.origin.mtime for s in _listed(s3, "tree", tmp_path)}
    mtimes = {f.origin.url.removeprefix("s3://src/tree/"): m for f, m in listed.items()}
    dst, sj = tmp_path / "dst", tmp_path / "s.json"
    args = ("copy", "s3://src/tree", str(dst), "--no-progress", "--master", "local[2]",
            "--log-dir", str(tmp_path / "logs"), "--summary-json", str(sj))
    first = run_cli(*args, env=s3.env)
    assert first.returncode == 0, first.stderr
    assert json.loads(sj.read_text())["files_copied"] == 500
    got = {p.relative_to(dst).as_posix(): p for p in dst.rglob("*")
           if p.is_file() and ".pydistcp" not in p.parts}
    assert {k: p.read_bytes() for k, p in got.items()} == {
        k.removeprefix("tree/"): v for k, v in objects.items()}
    for rel, p in got.items():
        assert p.stat().st_mtime == pytest.approx(mtimes[rel], abs=1e-3), rel
    again = run_cli(*args, env=s3.env)
    assert again.returncode == 0, again.stderr
    s = json.loads(sj.read_text())
    assert (s["files_copied"], s["files_skipped"]) == (0, 500)
