"""The fork end to end: each source object read once for every branch, counted in the
S3 server's own request log; the ``all`` and ``independent`` policies; job files of
several branches. Real local Spark, the real moto server (its own process), real gpg."""

from __future__ import annotations

import io
import json
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

import distcp
from tests.conftest import run_cli
from tests.fixtures.gpgkeys import ALICE, PASSPHRASE, Keyring, gpg, keyring
from tests.fixtures.s3_server import (  # noqa: F401 - fixtures
    LoggedS3Server,
    moto_logged_server,
    s3_logged,
)

pytestmark = pytest.mark.e2e

ENV = {"PYSPARK_PYTHON": sys.executable}


def tgz(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1_700_000_000, 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def files_under(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".pydistcp" not in p.parts}


@pytest.fixture()
def ring() -> Keyring:
    return keyring()


def test_three_branches_read_each_source_object_once(
        s3_logged: LoggedS3Server, ring: Keyring, tmp_path: Path) -> None:  # noqa: F811
    """A job file of three branches (local plain, local gunzipped and untarred, S3
    encrypted): one GET per source object in the server's log, all three published."""
    s3 = s3_logged.server
    drops = {"a.tar.gz": tgz({"a/one.txt": b"one\n", "a/two.bin": bytes(range(256)) * 900}),
             "b.tar.gz": tgz({"b/three.txt": b"three\n" * 5000})}
    client = s3.client()
    for name, data in drops.items():
        client.put_object(Bucket="src", Key=f"drop/{name}", Body=data)
    job = tmp_path / "fork.toml"
    job.write_text(textwrap.dedent(f"""\
        master = "local[2]"
        no_progress = true

        [[datasets]]
        source = "s3://src/drop"

        [[branches]]
        name = "archive"
        destination = "archive"

        [[branches]]
        name = "lake"
        destination = "lake"
        convert = ["gunzip", "untar"]

        [[branches]]
        name = "sealed"
        destination = "s3://dst/sealed"
        convert = ["encrypt"]
        gpg_home = "{ring.home}"
        gpg_recipient = ["{ALICE}"]

        [storage."s3://"]
        endpoint_url = "{s3.endpoint}"
        """))
    r = run_cli("run", str(job), "--summary-json", str(tmp_path / "s.json"), env=ENV)
    assert r.returncode == 0, r.stderr
    assert s3_logged.gets("src", "drop/") == {f"drop/{n}": 1 for n in drops}
    assert files_under(tmp_path / "archive") == drops
    lake = files_under(tmp_path / "lake")
    assert lake["a/a/one.txt"] == b"one\n" and lake["b/b/three.txt"] == b"three\n" * 5000
    sealed = {k: v for k, v in s3.objects("dst", "sealed/").items() if "/.pydistcp/" not in k}
    assert sorted(sealed) == ["sealed/a.tar.gz.gpg", "sealed/b.tar.gz.gpg"]
    for name, cipher in sealed.items():
        plain = gpg(ring.home, "--decrypt", passphrase=PASSPHRASE, data=cipher).stdout
        assert plain == drops[name.removeprefix("sealed/").removesuffix(".gpg")]
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["files_copied"] == 2 + 3 + 2 and summary["bytes_read"] == sum(map(len,
                                                                          drops.values()))
    assert set(summary["branches"]) == {"archive", "lake", "sealed"}
    assert all(b["queue"]["puts"] >= 2 for b in summary["branches"].values())
    assert "branch lake -> " in r.stdout


@pytest.mark.parametrize("policy", ["all", "independent"])
def test_a_failing_branch_under_each_policy_and_the_rerun(
        s3_logged: LoggedS3Server, spark: object, tmp_path: Path, policy: str,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Branch fork_1 (an S3 bucket) fails every file (an injected write failure): under
    ``all`` no branch publishes; under ``independent`` fork_0 does, and the rerun copies
    into fork_1 only. Each run reads each object once (the server's own log)."""
    s3 = s3_logged.server
    client = s3.client()
    objects = {"x.bin": b"x" * 3000, "y/z.txt": b"zed\n"}
    for key, data in objects.items():
        client.put_object(Bucket="src", Key=f"in/{key}", Body=data)
    local = tmp_path / "local"
    monkeypatch.setenv("DISTCP_FAIL_AT", "fork_branch:fork_1")
    first = distcp.copy("s3://src/in", str(local), fork=["s3://dst/out"], fork_policy=policy,
                        progress=False)
    assert not first.ok and first.branches["fork_1"]["files_failed"] == 2
    assert any(f.error.endswith("OSError: injected failure at fork_branch:fork_1 (fork "
                                "branch 'fork_1')") for f in first.failures), first.failures
    assert s3_logged.gets("src", "in/") == {f"in/{k}": 1 for k in objects}
    assert files_under(local) == ({} if policy == "all" else objects)
    assert not [k for k in s3.objects("dst", "out/") if "/.pydistcp/" not in k]
    monkeypatch.delenv("DISTCP_FAIL_AT")
    second = distcp.copy("s3://src/in", str(local), fork=["s3://dst/out"],
                         fork_policy=policy, progress=False)
    assert second.ok, second.failures
    assert files_under(local) == objects
    out = {k.removeprefix("out/"): v for k, v in s3.objects("dst", "out/").items()
           if "/.pydistcp/" not in k}
    assert out == objects
    assert second.branches["fork_1"]["files_copied"] == 2
    assert second.branches["fork_0"]["files_copied"] == (2 if policy == "all" else 0)
    assert s3_logged.gets("src", "in/") == {f"in/{k}": 2 for k in objects}


def test_a_branchs_quality_check_holds_the_file_back_in_every_branch(
        spark: object, tmp_path: Path) -> None:
    """A job of two branches, only the lake one checking its gunzipped output is Parquet:
    the file that fails there is published in neither branch (--fork-policy all), named
    with the check and the branch; the file that passes is in both."""
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq

    from distcp.cli import job_keys
    from distcp.jobs import load_job
    from distcp.run.forkjob import fork_job

    src = tmp_path / "in"
    src.mkdir()
    table = io.BytesIO()
    pq.write_table(pa.table({"id": [1, 2, 3]}), table)
    (src / "good.parquet.gz").write_bytes(gzip.compress(table.getvalue()))
    (src / "bad.parquet.gz").write_bytes(gzip.compress(b"not parquet at all"))
    job = tmp_path / "job.toml"
    job.write_text(textwrap.dedent("""\
        [[datasets]]
        source = "in"

        [[branches]]
        name = "raw"
        destination = "raw"

        [[branches]]
        name = "lake"
        destination = "lake"
        convert = ["gunzip"]
        check = ["parquet"]
        """))
    summary = fork_job(load_job(str(job), job_keys()), progress=False)
    assert not summary.ok
    assert files_under(tmp_path / "raw") == {"good.parquet.gz": (src / "good.parquet.gz")
                                             .read_bytes()}
    assert files_under(tmp_path / "lake") == {"good.parquet": table.getvalue()}
    errors = " ".join(f.error for f in summary.failures)
    assert "quality check 'parquet' failed" in errors and "fork branch 'lake'" in errors
    assert "not published in any branch (--fork-policy all): branch 'lake'" in errors
