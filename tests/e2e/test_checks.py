"""Quality checks (``--check``) on real staged outputs: local staging (read back) and
S3 staging (multipart uploads, checked as the bytes pass), on real local Spark."""

from __future__ import annotations

import gzip
import io
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import distcp
from tests.conftest import run_cli
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e
MiB = 1 << 20


def gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=1)


def parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def test_a_truncated_gzip_fails_its_file_and_the_others_publish(spark: Any, tmp_path: Path
                                                                ) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "sub").mkdir(parents=True)
    good, other = gz(b"line\n" * 50_000), gz(b"another\n" * 1000)
    (src / "a.gz").write_bytes(good)
    (src / "b.gz").write_bytes(good[:-20])  # cut inside the member: the CRC never comes
    (src / "sub" / "c.gz").write_bytes(other)
    s = distcp.copy(str(src), str(dst), check=["not-empty", "gzip"], progress=False)
    assert (s.files_copied, s.files_failed) == (2, 1)
    assert [(f.path, f.error) for f in s.failures] == [
        (str(src / "b.gz"), (f"{dst / 'b.gz'}: quality check 'gzip' failed: truncated gzip "
                            "stream (it ends inside a member)"))]
    assert (dst / "a.gz").read_bytes() == good and (dst / "sub" / "c.gz").read_bytes() == other
    assert not (dst / "b.gz").exists()  # what stays staged: tests/unit/test_task_checks.py


def test_schema_check_on_converted_outputs(spark: Any, tmp_path: Path) -> None:
    """Checks run on what is staged: here the gunzipped Parquet, not the .gz source."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    right = parquet(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]}))
    wrong = parquet(pa.table({"id": pa.array([1, 2], pa.int32()), "name": ["a", "b"]}))
    (src / "right.parquet.gz").write_bytes(gz(right))
    (src / "wrong.parquet.gz").write_bytes(gz(wrong))
    s = distcp.copy(str(src), str(dst), convert="gunzip", check=["schema=id:int64,name:string"],
                    progress=False)
    assert (s.files_copied, s.files_failed) == (1, 1)
    assert [f.error for f in s.failures] == [
        (f"{dst / 'wrong.parquet'}: quality check 'schema=id:int64,name:string' failed: "
        "schema differs: column 'id' is int32, not int64")]
    assert (dst / "right.parquet").read_bytes() == right
    assert sorted(os.listdir(dst)) == [".pydistcp", "right.parquet"]


def test_checks_on_s3_staging_see_the_bytes_of_multipart_uploads(
        spark: Any, s3: S3Server, tmp_path: Path) -> None:  # noqa: F811
    """Staged outputs on S3 are unfinished multipart uploads nobody can read: the checks
    see the bytes as they are uploaded; a failure aborts the upload, nothing appears."""
    src = tmp_path / "src"
    src.mkdir()
    big = gz(os.urandom(12 * MiB))  # random: stays > 8 MiB, so several parts
    small = gz(b"small\n" * 100)
    (src / "big.gz").write_bytes(big)
    (src / "cut.gz").write_bytes(big[:10 * MiB])
    (src / "small.gz").write_bytes(small)
    (src / "empty.gz").write_bytes(b"")
    s = distcp.copy(str(src), "s3://dst/q", dst_options=s3.options, check=["gzip"],
                    progress=False)
    assert (s.files_copied, s.files_failed) == (2, 2)
    assert sorted(f.error for f in s.failures) == [
        ("s3://dst/q/cut.gz: quality check 'gzip' failed: truncated gzip stream (it ends "
        "inside a member)"),
        "s3://dst/q/empty.gz: quality check 'gzip' failed: not a gzip stream (no member)"]
    objects = {k: v for k, v in s3.objects("dst", "q/").items() if "/.pydistcp/" not in k}
    assert objects == {"q/big.gz": big, "q/small.gz": small}
    assert s3.pending_uploads() == []
    assert s.requests.get("part", 0) >= 2  # the big files were staged in parts


def test_check_flag_exit_codes(tmp_path: Path, warm_engine: dict[str, str]) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    ok = gz(b"fine")
    (src / "ok.gz").write_bytes(ok)
    (src / "bad.gz").write_bytes(b"not gzip at all")
    usage = run_cli("copy", str(src), str(dst), "--check", "gzip=9")
    assert (usage.returncode, usage.stderr.strip()) == (
        2, "pydistcp: error: --check gzip=9: gzip takes no argument")
    run = run_cli("copy", str(src), str(dst), "--check", "gzip", "--no-progress",
                  env=warm_engine)
    assert run.returncode == 1, run.stderr
    assert run.stderr.splitlines() == [
        (f"pydistcp: FAILED {dst / 'bad.gz'}: quality check 'gzip' failed: not a valid gzip "
        "stream (Error -3 while decompressing data: incorrect header check)")]
    assert (dst / "ok.gz").read_bytes() == ok and not (dst / "bad.gz").exists()
