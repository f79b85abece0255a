"""S3 sources read by the processes a run forks, against real servers.

A download into a local tree is copied by one forked process per core, as a copy
between local trees is (``run.choice.forks_here``), while this process has made no
s3fs client for the source (``Storage.reads_forked``): each child opens its own lean
connections, and makes its own s3fs client for an object over 1 MiB.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from distcp.storage.s3.storage import ObjectStorage
from tests.conftest import run_cli
from tests.fixtures.s3_server import S3Server, moto_server, rclone_server, s3, s3_any  # noqa: F401

pytestmark = pytest.mark.e2e


def test_a_source_is_read_by_forked_processes_until_this_process_makes_its_s3fs_client(
        s3: S3Server) -> None:  # noqa: F811
    url = "s3://src/forked-probe"
    s3.client().put_object(Bucket="src", Key="forked-probe/a", Body=b"a")
    storage = ObjectStorage(s3.options)
    assert storage.reads_forked(url)
    assert storage.names(url) == ["a"]  # on the lean wire: nothing made
    assert storage.reads_forked(url)
    storage.fs(url)[0].ls("src")  # s3fs's client, made here, refuses to serve a child
    assert not storage.reads_forked(url)
    anonymous = ObjectStorage({**s3.options, "anon": True})  # s3fs's own way
    assert not anonymous.reads_forked(url)


def test_a_download_past_a_chunk_is_copied_by_forked_processes_with_big_objects(
        s3_any: S3Server, tmp_path: Path) -> None:  # noqa: F811
    """1,100 small objects and two of 1.5 MiB (read through s3fs, made in each child
    that needs it), cold: kept past a chunk and copied by the forked processes, no JVM;
    every byte arrives and a rerun copies none."""
    rng = random.Random(5)
    objects = {f"forked/d{i % 7}/o{i:04d}": rng.randbytes(rng.randrange(1, 200))
               for i in range(1_100)}
    objects |= {f"forked/big{i}": rng.randbytes(3 << 19) for i in range(2)}
    client = s3_any.client()
    for key, data in objects.items():
        client.put_object(Bucket="src", Key=key, Body=data)
    dst, sj = tmp_path / "dst", tmp_path / "s.json"
    args = ("copy", "s3://src/forked", str(dst), "--no-progress", "--master", "local[2]",
            "--engine", "cold", "--summary-json", str(sj))
    first = run_cli(*args, env=s3_any.env)
    assert first.returncode == 0, first.stderr
    summary = json.loads(sj.read_text())
    assert summary["files_copied"] == len(objects) and summary["files_failed"] == 0
    (copy,) = summary["strategy"]["copy"]
    assert copy["strategy"] == "kept-here" and "2 processes forked here" in copy["why"]
    assert "spark_start_s" not in summary["phases"]  # no JVM started
    got = {p.relative_to(dst).as_posix(): p.read_bytes() for p in dst.rglob("*")
           if p.is_file() and ".pydistcp" not in p.parts}
    assert got == {k.removeprefix("forked/"): v for k, v in objects.items()}
    again = run_cli(*args, env=s3_any.env)
    assert again.returncode == 0, again.stderr
    s = json.loads(sj.read_text())
    assert (s["files_copied"], s["files_skipped"]) == (0, len(objects))


def test_a_proxy_keeps_a_download_in_threads(s3: S3Server,  # noqa: F811
                                             tmp_path: Path) -> None:
    """A proxy in the environment makes the source s3fs's from the start: a child could
    not use that client, so threads copy (their bound named), and the bytes arrive."""
    objects = {f"proxied/o{i}": bytes([i]) * (i + 1) for i in range(20)}
    client = s3.client()
    for key, data in objects.items():
        client.put_object(Bucket="src", Key=key, Body=data)
    dst, sj = tmp_path / "dst", tmp_path / "s.json"
    host = s3.endpoint.split("://", 1)[1].split(":")[0]
    out = run_cli("copy", "s3://src/proxied", str(dst), "--no-progress", "--master",
                  "local[2]", "--engine", "cold", "--summary-json", str(sj),
                  env={**s3.env, "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": host})
    assert out.returncode == 0, out.stderr
    (copy,) = json.loads(sj.read_text())["strategy"]["copy"]
    assert copy["strategy"] == "here" and "at most 10,000 files" in copy["why"]
    assert {p.name: p.read_bytes() for p in dst.iterdir() if p.is_file()} == {
        k.removeprefix("proxied/"): v for k, v in objects.items()}
