"""``--visibility`` end to end: the real CLI on local Spark against a real S3 server (moto).

What the summary's ``requests`` counts: the requests the tasks send for each file
(create, part, complete, put, head, get...) and those of the publish step (the
completes, one listing of pending uploads per file set), plus the tasks' progress
documents ("progress"); ``requests_per_file`` leaves out the listing and the progress
documents, which do not grow with each file. The planning phase's listings are not
counted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e

FILES = {"a.bin": bytes(range(256)) * 400, "empty.txt": b"", "d/e/f.txt": b"hello\n",
         "d/g.bin": b"\x01\x02" * 150_000, "sp ace+plus=.txt": b"x" * 10}


def make_tree(root: Path) -> None:
    for rel, data in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def visible(s3srv: S3Server, prefix: str) -> dict[str, bytes]:
    return {k.removeprefix(prefix): v for k, v in s3srv.objects("dst", prefix).items()
            if "/.pydistcp/" not in k}


def copy(s3srv: S3Server, tmp_path: Path, src: Path, dst: str, *flags: str,
         env: dict[str, str]) -> tuple[Any, dict[str, Any]]:
    """A run with ``env``: the suite's warm engine for local[2] (the point is what it
    writes and asks; a run killed at a crash point dies in the driver, the client)."""
    out = tmp_path / f"summary-{dst.replace('/', '_')}.json"
    r = run_cli("copy", str(src), dst, "--no-progress", "--master", "local[2]",
                "--summary-json", str(out), *flags, env={**s3srv.env, **env})
    return r, (json.loads(out.read_text()) if out.exists() else {})


def test_visibility_file_copies_a_tree_with_one_put_per_file(
        s3: S3Server, tmp_path: Path, warm_engine_local2: dict[str, str]) -> None:  # noqa: F811
    make_tree(tmp_path / "src")
    r, summary = copy(s3, tmp_path, tmp_path / "src", "s3://dst/tree", "--visibility", "file",
                      env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert visible(s3, "tree/") == FILES
    assert s3.pending_uploads() == []
    requests = summary["requests"]
    assert requests["put"] == len(FILES), requests
    assert not {"create", "part", "complete", "list_uploads"} & set(requests), requests
    assert summary["requests_per_file"] <= 1.0
    assert f"S3 requests: {sum(requests.values())} (" in r.stdout


def test_a_crash_before_publish_leaves_every_object_whole_under_visibility_file(
        s3: S3Server, tmp_path: Path, warm_engine_local2: dict[str, str]) -> None:  # noqa: F811
    """The driver dies before the first commit step: with file visibility the objects
    are already there, each whole, and no upload is pending; the next run finishes."""
    make_tree(tmp_path / "src")
    crash, _ = copy(s3, tmp_path, tmp_path / "src", "s3://dst/crash", "--visibility", "file",
                    env={**warm_engine_local2, "DISTCP_CRASH_AT": "before_step:1"})
    assert crash.returncode == 137, crash.stderr
    assert visible(s3, "crash/") == FILES
    assert s3.pending_uploads() == []
    r, _ = copy(s3, tmp_path, tmp_path / "src", "s3://dst/crash", "--visibility", "file",
                env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert visible(s3, "crash/") == FILES and s3.pending_uploads() == []


def test_file_set_visibility_stays_within_three_requests_and_a_single_file_is_one_put(
        s3: S3Server, tmp_path: Path, warm_engine_local2: dict[str, str]) -> None:  # noqa: F811
    make_tree(tmp_path / "src")
    r, summary = copy(s3, tmp_path, tmp_path / "src", "s3://dst/set", env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert visible(s3, "set/") == FILES and s3.pending_uploads() == []
    requests, non_empty = summary["requests"], sum(1 for v in FILES.values() if v)
    assert (requests["create"], requests["part"], requests["complete"]) == (non_empty,) * 3
    assert requests["put"] == 1  # the empty file, at publish
    assert summary["requests_per_file"] <= 3.0
    # A file set of one file is published per file, whatever --visibility says.
    r, summary = copy(s3, tmp_path, tmp_path / "src" / "a.bin", "s3://dst/one.bin",
                      env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert s3.objects("dst", "one.bin") == {"one.bin": FILES["a.bin"]}
    assert summary["requests"]["put"] == 1, summary["requests"]
    assert not {"create", "part", "complete"} & set(summary["requests"])
    assert summary["requests_per_file"] == 1.0


def test_a_commit_whose_uploads_were_aborted_is_set_aside_by_the_first_rerun_which_finishes(
        s3: S3Server, tmp_path: Path, warm_engine_local2: dict[str, str]) -> None:  # noqa: F811
    """The driver dies before publishing; a lifecycle rule then aborts the pending
    uploads its commit would complete. The next run sets the commit aside at once and
    copies the files again: every object whole, nothing pending. (moto answers the
    complete of an aborted upload 500, which is retried as throttling: the S3 bound,
    ``PYDISTCP_S3_TIMEOUT``, ends those retries in seconds instead of ~40 s.)"""
    make_tree(tmp_path / "src")
    crash, _ = copy(s3, tmp_path, tmp_path / "src", "s3://dst/aborted",
                    env={**warm_engine_local2, "DISTCP_CRASH_AT": "before_step:1"})
    assert crash.returncode == 137, crash.stderr
    pending = s3.pending_uploads()
    assert pending
    for upload in pending:
        s3.client().abort_multipart_upload(Bucket="dst", Key=upload["Key"],
                                           UploadId=upload["UploadId"])
    r, summary = copy(s3, tmp_path, tmp_path / "src", "s3://dst/aborted",
                      env={**warm_engine_local2, "PYDISTCP_S3_TIMEOUT": "10"})
    assert r.returncode == 0, r.stderr
    assert "cannot finish: its staged copy of s3://dst/aborted/" in r.stdout + r.stderr
    assert visible(s3, "aborted/") == FILES and s3.pending_uploads() == []
    assert summary["sequences_set_aside"] == 1
