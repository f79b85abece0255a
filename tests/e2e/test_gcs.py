"""Google Cloud Storage end to end, against fake-gcs-server on 127.0.0.1: the real CLI on
local Spark.

The server comes from Google's standard environment (``STORAGE_EMULATOR_HOST``, with the
metadata server kept out of reach, set by the ``gcs`` fixture and inherited by the CLI),
as a user's shell would give it. Trees go local -> GCS -> local and S3 -> GCS byte for byte, GCS -> GCS is
rewritten by the service (no byte through the tasks); a run killed before or in the middle of its publish leaves no object
half-visible and its rerun finishes; a second run copies nothing; a split file is
joined and published whole; bad credentials or endpoints stop the run before Spark with
one line and exit 3. Runs share the suite's warm engine (local[2]) unless killed.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from distcp.errors import IntegrityError
from tests.conftest import run_cli
from tests.e2e.test_azure import copy, rerun_then_back
from tests.e2e.test_fork_cli import tgz
from tests.e2e.test_s3 import local_files, make_tree
from tests.fixtures.azure_server import AzureServer, azure, azurite_server  # noqa: F401
from tests.fixtures.gcs_server import GcsServer, fake_gcs_server, gcs  # noqa: F401 - fixtures
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures
from tests.fixtures.stores import put_tree, visible

pytestmark = pytest.mark.e2e


def staged(server: GcsServer, bucket: str, prefix: str) -> list[str]:
    """Objects of the state directory's staging areas (copies not yet published)."""
    return [k for k in server.objects(bucket, prefix)
            if "/.pydistcp/" in k and ("/staging/" in k or "/splits/" in k)]


def test_local_to_gcs_is_invisible_until_published_then_whole_and_back_identical(
        gcs: GcsServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    files = make_tree(tmp_path / "src")
    crash, _ = copy(tmp_path, str(tmp_path / "src"), "gs://dst/tree",
                    env={**warm_engine_local2, "DISTCP_CRASH_AT": "before_step:1"})
    assert crash.returncode == 137, crash.stderr
    assert visible(gcs, "dst", "tree/") == {}, "a reader saw an object before the publish"
    r, _ = copy(tmp_path, str(tmp_path / "src"), "gs://dst/tree", env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert visible(gcs, "dst", "tree/") == files
    assert staged(gcs, "dst", "tree/") == []
    back = rerun_then_back(tmp_path, str(tmp_path / "src"), "gs://dst/tree",
                           env=warm_engine_local2)
    assert local_files(back) == files


def test_a_run_killed_in_the_middle_of_its_publish_shows_only_whole_objects_and_finishes(
        gcs: GcsServer, tmp_path: Path) -> None:  # noqa: F811
    """Killed after the second file of the set is published (cold: the driver dies; the
    set's other files are published concurrently, so how many made it before the kill
    varies): each object a reader sees is a whole copy of its source; the rerun
    publishes the rest and leaves nothing staged."""
    files = make_tree(tmp_path / "src")
    crash, _ = copy(tmp_path, str(tmp_path / "src"), "gs://dst/mid",
                    env={"DISTCP_CRASH_AT": "mid_publish:2"})
    assert crash.returncode == 137, crash.stderr
    seen = visible(gcs, "dst", "mid/")
    assert len(seen) >= 2, seen.keys()
    assert all(files[k] == v for k, v in seen.items()), "a half-visible object"
    r, _ = copy(tmp_path, str(tmp_path / "src"), "gs://dst/mid", env={})
    assert r.returncode == 0, r.stderr
    assert visible(gcs, "dst", "mid/") == files
    assert staged(gcs, "dst", "mid/") == []


def test_s3_to_gcs_is_byte_for_byte_and_gcs_to_gcs_is_rewritten_by_the_service(
        gcs: GcsServer, s3: S3Server, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    files = make_tree(tmp_path / "src")
    put_tree(s3, "src", "tree/", files)
    r, summary = copy(tmp_path, "s3://src/tree", "gs://dst/from-s3",
                      env={**s3.env, **warm_engine_local2})
    assert r.returncode == 0, r.stderr
    assert visible(gcs, "dst", "from-s3/") == files
    total = sum(len(v) for v in files.values())
    assert summary["bytes_read"] == total and summary["bytes_server_side"] == 0
    r, summary = copy(tmp_path, "gs://dst/from-s3", "gs://src/copy", env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert visible(gcs, "src", "copy/") == files  # rewritten by the service
    assert summary["bytes_server_side"] == total and summary["bytes_read"] == 0, summary
    assert staged(gcs, "src", "copy/") == []


def test_a_split_file_is_joined_and_published_whole_and_its_ranges_come_through_the_tasks(
        gcs: GcsServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    """local -> GCS, then GCS -> GCS split: GCS rewrites whole objects only, so each range
    of a split GCS -> GCS copy is read through its task, and the file still arrives."""
    src = tmp_path / "src"
    src.mkdir()
    body = os.urandom(12 << 20)
    (src / "big.bin").write_bytes(body)
    r, summary = copy(tmp_path, str(src), "gs://dst/big", "--split-size", "5M",
                      env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert visible(gcs, "dst", "big/") == {"big.bin": body}
    assert staged(gcs, "dst", "big/") == []
    r, summary = copy(tmp_path, "gs://dst/big", "gs://src/big", "--split-size", "5M",
                      env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert visible(gcs, "src", "big/") == {"big.bin": body}
    assert summary["bytes_read"] == len(body), summary


def test_mtimes_are_kept_as_the_metadata_gsutil_reads_and_read_back(
        gcs: GcsServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "f.txt").write_bytes(b"kept")
    os.utime(src / "f.txt", (1_600_000_000, 1_600_000_000))
    r, _ = copy(tmp_path, str(src), "gs://dst/m", "--preserve", "t", env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert gcs.metadata("dst", "m/f.txt").get("goog-reserved-file-mtime") == "1600000000"
    back, _ = copy(tmp_path, "gs://dst/m", str(tmp_path / "back"), env=warm_engine_local2)
    assert back.returncode == 0, back.stderr  # the listing reads the kept mtime back
    assert (tmp_path / "back" / "f.txt").stat().st_mtime == 1_600_000_000


@pytest.mark.parametrize("case", ["unreachable", "missing key file", "bad key file",
                                  "no bucket", "unreachable source"])
def test_a_bad_credential_or_endpoint_is_one_line_and_exit_3_before_spark(
        gcs: GcsServer, tmp_path: Path, case: str,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Cold runs: the point is that no engine starts."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_bytes(b"x")
    key_file = tmp_path / "key.json"
    key_file.write_text('{"type": "service_account", "private_key": "not a key"}')
    if case in ("missing key file", "bad key file"):
        monkeypatch.delenv("STORAGE_EMULATOR_HOST")  # real GCS's rules: credentials needed
    env = {
        "unreachable": {"STORAGE_EMULATOR_HOST": "http://127.0.0.1:9"},
        "unreachable source": {"STORAGE_EMULATOR_HOST": "http://127.0.0.1:9"},
        "missing key file": {"GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "none.json")},
        "bad key file": {"GOOGLE_APPLICATION_CREDENTIALS": str(key_file)},
        "no bucket": {},
    }[case]
    dst = "gs://nowhere/t" if case == "no bucket" else "gs://dst/t"
    src = str(tmp_path / "src")
    if case == "unreachable source":
        src, dst = dst, str(tmp_path / "out")
    r = run_cli("copy", src, dst, "--no-progress", env=env, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == (2 if case == "no bucket" else 3), r.stderr
    assert len(lines) == 1, r.stderr
    want = {"unreachable": "GCS endpoint unreachable",
            "missing key file": "no usable Google credentials",
            "bad key file": "Google credentials",
            "no bucket": "no such bucket: nowhere",
            "unreachable source": "GCS endpoint unreachable"}[case]
    assert want in lines[0] and "gs://" in lines[0], lines[0]
    assert "SparkSession" not in r.stderr and "not a key" not in r.stderr + r.stdout


def test_a_split_files_parts_are_composed_by_the_service_past_32_at_a_time(
        gcs: GcsServer) -> None:  # noqa: F811
    """40 part objects (compose takes 32 sources a request) joined into the staging
    object in order, checked against their records' lengths; the parts removed after."""
    from distcp.storage import storage_for
    from distcp.storage.joins import SplitParts

    folder = "gs://dst/j/.pydistcp/splits/g"
    client = gcs.client().bucket("dst")
    bodies = [bytes([i]) * (1000 + i) for i in range(40)]
    offset = 0
    for i, body in enumerate(bodies):
        client.blob(f"j/.pydistcp/splits/g/p{i}-a0").upload_from_string(body)
        record = {"index": i, "offset": offset, "length": len(body), "etag": "",
                  "blocks": "", "part": f"p{i}-a0"}
        client.blob(f"j/.pydistcp/splits/g/r{i}.json").upload_from_string(json.dumps(record))
        offset += len(body)
    storage = storage_for(folder, {})
    job = SplitParts(f"{folder}/data", folder, len(bodies), offset, "", "/src/big.bin")
    storage.finish_split(job, bytearray(1 << 16), "size", "a1")
    held = gcs.objects("dst", "j/.pydistcp/splits/g/")
    assert held.pop("j/.pydistcp/splits/g/data") == b"".join(bodies)
    assert sorted(held) == sorted(f"j/.pydistcp/splits/g/r{i}.json" for i in range(40))
    short = SplitParts(f"{folder}/data2", folder, 1, 5, "", "/src/short.bin")
    client.blob("j/.pydistcp/splits/g/p0-a0").upload_from_string(b"12345")
    client.blob("j/.pydistcp/splits/g/r0.json").upload_from_string(json.dumps(
        {"index": 0, "offset": 0, "length": 6, "etag": "", "blocks": "", "part": "p0-a0"}))
    with pytest.raises(IntegrityError, match="part of range 0 holds 5 bytes, its record 6"):
        storage.finish_split(short, bytearray(1 << 16), "size", "a1")


def test_check_gcs_to_azure_and_a_move_out_of_gcs(
        gcs: GcsServer, azure: AzureServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    """``check`` of a local tree against its GCS copy, GCS -> Azure byte for byte (the
    digest of every file verified on the way), then ``move`` out of GCS: the objects
    arrive on the local disk and are gone from the bucket."""
    files = make_tree(tmp_path / "src")
    r, _ = copy(tmp_path, str(tmp_path / "src"), "gs://dst/t", env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    checked = run_cli("check", str(tmp_path / "src"), "gs://dst/t", "--no-progress",
                      "--master", "local[2]", env=warm_engine_local2)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines()[-1].startswith(f"{len(files)} matching, 0 differing")
    r, _ = copy(tmp_path, "gs://dst/t", "az://dst/from-gs", "--verify", "digest",
                env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert {k.removeprefix("from-gs/"): v for k, v in azure.objects("dst", "from-gs/").items()
            if "/.pydistcp/" not in k} == files
    moved = run_cli("move", "gs://dst/t", str(tmp_path / "moved"), "--no-progress",
                    "--master", "local[2]", env=warm_engine_local2)
    assert moved.returncode == 0, moved.stderr
    assert local_files(tmp_path / "moved") == files
    assert visible(gcs, "dst", "t/") == {}


def test_a_fork_from_gcs_with_one_branch_per_provider_reads_each_object_once(
        gcs: GcsServer, azure: AzureServer, s3: S3Server, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    """Archives on GCS forked to GCS gunzipped and untarred, to Azure, S3 and the local
    disk as they are: every branch published from one read. (Azure as the untarred
    branch refuses the archive's folder name, ``lake/a/``, as a blob name ending in a
    slash: left to the Azure backend.)"""
    drops = {"a.tar.gz": tgz({"a/one.txt": b"one\n", "a/two.bin": bytes(range(256)) * 900}),
             "b.tar.gz": tgz({"b/three.txt": b"three\n" * 5000})}
    put_tree(gcs, "src", "drop/", drops)
    job = tmp_path / "fork.toml"
    job.write_text(textwrap.dedent(f"""\
        master = "local[2]"
        no_progress = true

        [[datasets]]
        source = "gs://src/drop"

        [[branches]]
        name = "gcs"
        destination = "gs://dst/lake"
        convert = ["gunzip", "untar"]

        [[branches]]
        name = "azure"
        destination = "az://dst/archive"

        [[branches]]
        name = "s3"
        destination = "s3://dst/copy"

        [[branches]]
        name = "local"
        destination = "{tmp_path / 'local'}"

        [storage."s3://"]
        endpoint_url = "{s3.endpoint}"
        """))
    r = run_cli("run", str(job), "--summary-json", str(tmp_path / "s.json"),
                env={**s3.env, **warm_engine_local2})
    assert r.returncode == 0, r.stderr
    assert {k.removeprefix("archive/"): v for k, v in azure.objects("dst", "archive/").items()
            if "/.pydistcp/" not in k} == drops
    lake = visible(gcs, "dst", "lake/")
    assert lake["a/a/one.txt"] == b"one\n" and lake["b/b/three.txt"] == b"three\n" * 5000
    assert {k.removeprefix("copy/"): v for k, v in s3.objects("dst", "copy/").items()
            if "/.pydistcp/" not in k} == drops
    assert local_files(tmp_path / "local") == drops
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["bytes_read"] == sum(map(len, drops.values())), summary


def test_a_split_file_killed_half_way_resumes_from_its_staged_parts(
        gcs: GcsServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    """Ranges of a big file are part objects in the state directory; a task killed after
    its second range (a cold run: the kill takes a Python worker) leaves those parts and
    their records, and the next run sends only the missing ranges, then composes and
    publishes one object, byte for byte."""
    src = tmp_path / "src"
    src.mkdir()
    body = os.urandom(24 << 20)
    (src / "big.bin").write_bytes(body)
    (src / "small.txt").write_bytes(b"small\n")
    split = ("--split-size", "5M")
    first, _ = copy(tmp_path, str(src), "gs://dst/big", *split,
                    env={"DISTCP_CRASH_AT": "after_range:2"})
    assert first.returncode == 1, first.stderr
    assert visible(gcs, "dst", "big/").get("big.bin") is None
    records = [k for k in gcs.objects("dst", "big/.pydistcp/splits/") if "/r" in k]
    assert 2 <= len(records) < 5, records
    second, summary = copy(tmp_path, str(src), "gs://dst/big", *split, env=warm_engine_local2)
    assert second.returncode == 0, second.stderr
    assert summary["ranges_resumed"] == len(records), summary
    assert visible(gcs, "dst", "big/") == {"big.bin": body, "small.txt": b"small\n"}
    assert staged(gcs, "dst", "big/") == []


def test_visibility_file_publishes_each_object_as_its_task_copies_it(
        gcs: GcsServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    """``--visibility file``: each object appears whole as soon as its task copied it
    and checked its source (one upload to its final name for a small file; a bigger
    one's staged object rewritten there at once), its mtime kept: the driver dies
    before the publish step and every object is already there, nothing left staged;
    the rerun finishes and copies nothing."""
    files = make_tree(tmp_path / "src")
    for name in ("d/big.bin", "a.bin"):
        os.utime(tmp_path / "src" / name, (1_600_000_000, 1_600_000_000))
    crash, _ = copy(tmp_path, str(tmp_path / "src"), "gs://dst/vis", "--visibility", "file",
                    env={**warm_engine_local2, "DISTCP_CRASH_AT": "before_step:1"})
    assert crash.returncode == 137, crash.stderr
    assert visible(gcs, "dst", "vis/") == files
    assert staged(gcs, "dst", "vis/") == []
    assert [gcs.metadata("dst", f"vis/{n}").get("goog-reserved-file-mtime")
            for n in ("d/big.bin", "a.bin")] == ["1600000000"] * 2
    r, summary = copy(tmp_path, str(tmp_path / "src"), "gs://dst/vis", "--visibility", "file",
                      env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert visible(gcs, "dst", "vis/") == files and staged(gcs, "dst", "vis/") == []
    assert summary["files_copied"] == 0, summary
