"""``copy --checksum`` between trees pydistcp never wrote (issue 38, point 7): the contents
decide, as ``rclone -c`` does, instead of every file being copied again.

Trees are made by ``cp -a`` or by boto3, so no digest is stored at the destination.
The runs are the CLI's on the suite's warm engine (the cold start is not the point).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e


def make_source(root: Path) -> dict[str, bytes]:
    rng = random.Random(38)
    files = {"a.bin": rng.randbytes(2 * (1 << 20) + 7), "d/b.txt": b"hello\n",
             "d/e/c.csv": rng.randbytes(30_000), "empty": b""}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def stats(root: Path, files: dict[str, bytes]) -> dict[str, tuple[int, int]]:
    return {rel: (os.stat(root / rel).st_ino, os.stat(root / rel).st_mtime_ns) for rel in files}


def copy(*args: str, summary: Path, env: dict[str, str]) -> dict[str, object]:
    done = run_cli("copy", *args, "--no-progress", "--summary-json", str(summary), env=env)
    assert done.returncode == 0, done.stderr
    data: dict[str, object] = json.loads(summary.read_text())
    data["stdout"] = done.stdout
    return data


def test_identical_trees_made_by_cp_copy_nothing_and_a_changed_content_only_that_file(
        tmp_path: Path, warm_engine: dict[str, str]) -> None:
    src, dst, sj = tmp_path / "src", tmp_path / "dst", tmp_path / "summary.json"
    files = make_source(src)
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
    before = stats(dst, files)

    same = copy("--checksum", str(src), str(dst), summary=sj, env=warm_engine)
    assert (same["files_copied"], same["files_skipped"]) == (0, len(files))
    assert (same["files_compared"], same["files_compared_same"]) == (len(files), len(files))
    assert same["bytes_compared"] == 2 * sum(len(b) for b in files.values())  # both sides
    assert "copied 0 files" in str(same["stdout"])
    assert stats(dst, files) == before  # not rewritten: same inodes, same mtimes

    # bit rot: another content of the same size, the mtime put back
    changed = dst / "d/e/c.csv"
    changed.write_bytes(bytes(b ^ 1 for b in files["d/e/c.csv"]))
    os.utime(changed, ns=(before["d/e/c.csv"][1], before["d/e/c.csv"][1]))
    plain = copy(str(src), str(dst), summary=sj, env=warm_engine)
    assert (plain["files_copied"], plain["files_compared"]) == (0, 0)  # size and mtime agree
    assert changed.read_bytes() != files["d/e/c.csv"]

    fixed = copy("--checksum", str(src), str(dst), summary=sj, env=warm_engine)
    assert (fixed["files_copied"], fixed["files_skipped"]) == (1, len(files) - 1)
    assert fixed["files_compared_same"] == len(files) - 1
    assert changed.read_bytes() == files["d/e/c.csv"]
    after = stats(dst, files)
    assert {rel for rel in files if after[rel] != before[rel]} == {"d/e/c.csv"}


def test_s3_checksums_decide_without_reading_and_a_local_source_is_read(
        tmp_path: Path, s3: S3Server, warm_engine: dict[str, str]) -> None:
    """Objects put in one part have MD5 ETags: S3 to S3 compares them and reads nothing;
    a local source has no such checksum, so both sides are read."""
    src, sj = tmp_path / "src", tmp_path / "summary.json"
    files = make_source(src)
    client = s3.client()
    for rel, data in files.items():
        client.put_object(Bucket="src", Key=f"t/{rel}", Body=data)
        client.put_object(Bucket="dst", Key=f"t/{rel}", Body=data)
    client.put_object(Bucket="dst", Key="t/d/b.txt", Body=b"HELLO\n")  # same size
    env = {**warm_engine, **s3.env}

    stored = copy("--checksum", "s3://src/t", "s3://dst/t", summary=sj, env=env)
    assert (stored["files_copied"], stored["files_skipped"]) == (1, len(files) - 1)
    assert (stored["files_compared"], stored["bytes_compared"]) == (len(files), 0)
    assert s3.objects("dst", "t/")["t/d/b.txt"] == b"hello\n"

    client.put_object(Bucket="dst", Key="t/d/b.txt", Body=b"HELLO\n")
    read = copy("--checksum", str(src), "s3://dst/t", summary=sj, env=env)
    assert (read["files_copied"], read["files_skipped"]) == (1, len(files) - 1)
    assert read["bytes_compared"] == 2 * sum(len(b) for b in files.values())
    copied = {k: v for k, v in s3.objects("dst", "t/").items() if "/.pydistcp/" not in k}
    assert copied == {f"t/{rel}": data for rel, data in files.items()}
