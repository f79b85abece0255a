"""Azure Blob Storage end to end, against Azurite on 127.0.0.1: the real CLI on local Spark.

The account comes from Azure's standard environment (``AZURE_STORAGE_CONNECTION_STRING``,
set by the ``azure`` fixture and inherited by the CLI), as a user's shell would give it.
Trees go local -> Azure -> local and S3 -> Azure byte for byte, Azure -> Azure is copied
by the service (no byte through the tasks), a killed run leaves nothing visible and its
rerun finishes, a second run copies nothing, a split file resumes from its staged
blocks, and bad credentials or endpoints stop the
run before Spark with one line and exit 3. Runs share the suite's warm engine (local[2]):
the point of none of them is the cold start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.e2e.test_s3 import local_files, make_tree
from tests.fixtures.azure_server import (  # noqa: F401 - fixtures
    ACCOUNT,
    KEY,
    AzureServer,
    azure,
    azurite_server,
)
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures
from tests.fixtures.stall_proxy import StallProxy
from tests.fixtures.stores import put_tree, visible

pytestmark = pytest.mark.e2e


def copy(tmp_path: Path, src: str, dst: str, *flags: str,
         env: dict[str, str]) -> tuple[Any, dict[str, Any]]:
    out = tmp_path / f"summary-{len(list(tmp_path.glob('summary-*')))}.json"
    r = run_cli("copy", src, dst, "--no-progress", "--master", "local[2]",
                "--summary-json", str(out), *flags, env=env)
    return r, (json.loads(out.read_text()) if out.exists() else {})


def rerun_then_back(tmp_path: Path, src: str, dst: str, *flags: str,
                    env: dict[str, str]) -> Path:
    """A rerun of ``src -> dst`` copies nothing; then ``dst`` is copied back to the
    local folder returned."""
    again, summary = copy(tmp_path, src, dst, *flags, env=env)
    assert again.returncode == 0, again.stderr
    assert summary["files_copied"] == 0 and summary["bytes_read"] == 0, summary
    back, _ = copy(tmp_path, dst, str(tmp_path / "back"), env=env)
    assert back.returncode == 0, back.stderr
    return tmp_path / "back"


def test_local_to_azure_is_invisible_until_published_then_whole_and_back_identical(
        azure: AzureServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    files = make_tree(tmp_path / "src")
    non_empty = sum(1 for data in files.values() if data)
    crash, _ = copy(tmp_path, str(tmp_path / "src"), "az://dst/tree",
                    env={**warm_engine_local2, "DISTCP_CRASH_AT": "before_step:1"})
    assert crash.returncode == 137, crash.stderr
    assert visible(azure, "dst", "tree/") == {}, "a reader saw a blob before the publish"
    assert len(azure.pending_uploads()) == non_empty  # the 0-byte file: one commit later
    r, summary = copy(tmp_path, str(tmp_path / "src"), "az://dst/tree", env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert visible(azure, "dst", "tree/") == files
    assert azure.pending_uploads() == []
    again, summary = copy(tmp_path, str(tmp_path / "src"), "az://dst/tree",
                          env=warm_engine_local2)
    assert again.returncode == 0, again.stderr
    assert summary["files_copied"] == 0 and summary["bytes_read"] == 0, summary
    # the Data Lake spelling of the same blobs (the account in the URL)
    back, _ = copy(tmp_path, f"abfs://dst@{ACCOUNT}.dfs.core.windows.net/tree",
                   str(tmp_path / "back"), env=warm_engine_local2)
    assert back.returncode == 0, back.stderr
    assert local_files(tmp_path / "back") == files


def test_s3_to_azure_is_byte_for_byte_and_azure_to_azure_falls_back_where_the_service_cannot(
        azure: AzureServer, s3: S3Server, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    """Azure -> Azure in one account asks the service to copy (Put Block From URL);
    Azurite has no such request (APINotImplemented), so there the bytes come through the
    tasks, and the summary says so and why."""
    files = make_tree(tmp_path / "src")
    put_tree(s3, "src", "tree/", files)
    r, summary = copy(tmp_path, "s3://src/tree", "az://dst/from-s3",
                      env={**s3.env, **warm_engine_local2})
    assert r.returncode == 0, r.stderr
    assert visible(azure, "dst", "from-s3/") == files
    total = sum(len(v) for v in files.values())
    assert summary["bytes_read"] == total and summary["bytes_server_side"] == 0
    r, summary = copy(tmp_path, "az://dst/from-s3", "az://src/copy", env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert visible(azure, "src", "copy/") == files
    assert summary["bytes_server_side"] == 0 and summary["bytes_read"] == total
    non_empty = sum(1 for v in files.values() if v)
    assert any(f"server-side copy not used for {non_empty} file(s)" in n
               and "APINotImplemented" in n for n in summary["notes"]), summary["notes"]
    assert azure.pending_uploads("src") == []


@pytest.mark.parametrize("case", ["bad key", "no account", "unreachable", "no container",
                                  "stalled"])
def test_a_bad_account_or_endpoint_is_one_line_and_exit_3_before_spark(
        azure: AzureServer, tmp_path: Path, case: str,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Cold runs: the point is that no engine starts. A stalled endpoint (it takes the
    connection and never answers) is given up within the request bound, not Azure's
    two-minute read timeout."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_bytes(b"x")
    wrong_key = "A" * 86 + "=="
    endpoint = azure.endpoint
    host, port = endpoint.removeprefix("http://").split("/")[0].split(":")
    proxy = StallProxy((host, int(port)))
    proxy.frozen.set()
    stalled = f"{proxy.endpoint}/{ACCOUNT}" if "/" + ACCOUNT in endpoint else proxy.endpoint
    env = {
        "bad key": {"AZURE_STORAGE_CONNECTION_STRING": azure.connection_string.replace(
            KEY, wrong_key)},
        "no account": {},
        "unreachable": {"AZURE_STORAGE_CONNECTION_STRING": azure.connection_string.replace(
            endpoint, "http://127.0.0.1:9/" + ACCOUNT)},
        "no container": {},
        "stalled": {"AZURE_STORAGE_CONNECTION_STRING": azure.connection_string.replace(
            endpoint, stalled), "PYDISTCP_S3_TIMEOUT": "3"},
    }[case]
    if case == "no account":
        monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING")
    dst = "az://nowhere/t" if case == "no container" else "az://dst/t"
    started = time.monotonic()
    try:
        r = run_cli("copy", str(tmp_path / "src"), dst, "--no-progress", env=env, timeout=120)
    finally:
        proxy.close()
    if case == "stalled":
        assert time.monotonic() - started < 30, "the preflight waited on a silent endpoint"
    lines = r.stderr.strip().splitlines()
    assert r.returncode == (2 if case == "no container" else 3), r.stderr
    assert len(lines) == 1, r.stderr
    want = {"bad key": "Azure refused the credentials", "no account": "no Azure account",
            "unreachable": "Azure endpoint unreachable",
            "stalled": "Azure endpoint unreachable", "no container":
            "no such container: nowhere"}[case]
    assert want in lines[0] and dst in lines[0], lines[0]
    assert "SparkSession" not in r.stderr and KEY not in r.stderr + r.stdout


def test_a_split_file_killed_half_way_resumes_from_its_staged_blocks(
        azure: AzureServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    """Ranges of a big file are blocks of its blob; a task killed after its second range
    (a cold run's Spark job: the kill takes a Python worker; ``auto`` would copy this
    small plan in the run's own threads, whose kill is the run's, as S3's test shows)
    leaves those blocks staged, and the next run sends only the missing ranges, then
    commits one blob, byte for byte."""
    src = tmp_path / "src"
    src.mkdir()
    body = os.urandom(24 << 20)
    (src / "big.bin").write_bytes(body)
    (src / "small.txt").write_bytes(b"small\n")
    split = ("--split-size", "5M")
    first, _ = copy(tmp_path, str(src), "az://dst/big", *split, "--copying", "spark",
                    env={"DISTCP_CRASH_AT": "after_range:2"})
    assert first.returncode == 1, first.stderr
    assert visible(azure, "dst", "big/").get("big.bin") is None
    records = [k for k in azure.objects("dst", "big/.pydistcp/splits/") if "/r" in k]
    assert len(azure.pending_uploads()) == 1 and 2 <= len(records) < 5, records
    second, summary = copy(tmp_path, str(src), "az://dst/big", *split, env=warm_engine_local2)
    assert second.returncode == 0, second.stderr
    assert summary["ranges_resumed"] == len(records), summary
    assert visible(azure, "dst", "big/") == {"big.bin": body, "small.txt": b"small\n"}
    assert azure.pending_uploads() == []
    assert not azure.objects("dst", "big/.pydistcp/splits/")


def test_a_split_file_azure_to_azure_falls_back_to_the_tasks_range_by_range(
        azure: AzureServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    """A big file split into ranges, Azure -> Azure in one account: each range asks the
    service for its block (Put Block From URL); Azurite has no such request, so each
    range's bytes come through its task instead, and the file is committed whole, the
    summary naming the fallback once for the file (it used to fail the run)."""
    body = os.urandom(12 << 20)
    put_tree(azure, "src", "big/", {"big.bin": body})
    r, summary = copy(tmp_path, "az://src/big", "az://dst/big", "--split-size", "5M",
                      env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert visible(azure, "dst", "big/") == {"big.bin": body}
    assert summary["bytes_server_side"] == 0 and summary["bytes_read"] == len(body)
    assert any("server-side copy not used for 1 file(s)" in n and "APINotImplemented" in n
               for n in summary["notes"]), summary["notes"]
    assert azure.pending_uploads("dst") == []


RCLONE = Path(sys.executable).with_name("rclone")


def test_mtimes_are_kept_as_the_metadata_rclone_reads_and_come_back(
        azure: AzureServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    """Each blob keeps its source's mtime as rclone's azureblob backend does (metadata
    ``mtime``, RFC 3339 with nanoseconds), written by the commit (a small file, an
    empty one, a split file's blocks): Azure -> local gives the files their mtimes to
    the nanosecond, a rerun copies nothing, and rclone lists the same times."""
    src = tmp_path / "src"
    src.mkdir()
    bodies = {"small.txt": b"kept", "empty": b"", "big.bin": os.urandom(11 << 20)}
    mtimes = {"small.txt": 1_600_000_000_123_456_789, "empty": 1_500_000_000_000_000_001,
              "big.bin": 1_700_000_000_987_654_321}
    for name, body in bodies.items():
        (src / name).write_bytes(body)
        os.utime(src / name, ns=(mtimes[name], mtimes[name]))
    r, _ = copy(tmp_path, str(src), "az://dst/m", "--split-size", "5M",
                env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    container = azure.client().get_container_client("dst")
    kept = {b.name.removeprefix("m/"): b.metadata.get("mtime")
            for b in container.list_blobs(name_starts_with="m/", include=["metadata"])
            if "/.pydistcp/" not in b.name}
    assert kept == {"small.txt": "2020-09-13T12:26:40.123456789Z",
                    "empty": "2017-07-14T02:40:00.000000001Z",
                    "big.bin": "2023-11-14T22:13:20.987654321Z"}, kept
    back = rerun_then_back(tmp_path, str(src), "az://dst/m", "--split-size", "5M",
                           env=warm_engine_local2)
    assert local_files(back) == bodies
    assert {n: (back / n).stat().st_mtime_ns for n in bodies} == mtimes
    if not RCLONE.exists():
        return
    host = azure.endpoint
    env = {**os.environ, "TZ": "UTC", "RCLONE_CONFIG_AZ_TYPE": "azureblob",
           "RCLONE_CONFIG_AZ_ACCOUNT": ACCOUNT, "RCLONE_CONFIG_AZ_KEY": KEY,
           "RCLONE_CONFIG_AZ_ENDPOINT": host}
    listed = subprocess.run([str(RCLONE), "lsl", "az:dst/m", "--exclude", ".pydistcp/**"],
                            env=env, capture_output=True, text=True, timeout=60, check=False)
    assert listed.returncode == 0, listed.stderr
    times = {line.split()[-1]: " ".join(line.split()[1:3])
             for line in listed.stdout.splitlines()}
    assert times == {"small.txt": "2020-09-13 12:26:40.123456789",
                     "empty": "2017-07-14 02:40:00.000000001",
                     "big.bin": "2023-11-14 22:13:20.987654321"}, listed.stdout


def test_visibility_file_commits_each_blob_as_its_task_copies_it(
        azure: AzureServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    """``--visibility file``: each blob appears whole as soon as its task copied it (one
    Put Blob for a small file, a commit at once for one of several blocks), its mtime
    kept: the driver dies before the publish step and every blob is already there,
    none pending; the rerun finishes and copies nothing."""
    files = make_tree(tmp_path / "src")
    os.utime(tmp_path / "src" / "d/big.bin", ns=(1_600_000_000_000_000_007,) * 2)
    os.utime(tmp_path / "src" / "a.bin", ns=(1_600_000_000_000_000_009,) * 2)
    crash, _ = copy(tmp_path, str(tmp_path / "src"), "az://dst/vis", "--visibility", "file",
                    env={**warm_engine_local2, "DISTCP_CRASH_AT": "before_step:1"})
    assert crash.returncode == 137, crash.stderr
    assert visible(azure, "dst", "vis/") == files
    assert azure.pending_uploads() == []
    blob = azure.client().get_container_client("dst").get_blob_client
    kept = [blob(f"vis/{n}").get_blob_properties().metadata for n in ("d/big.bin", "a.bin")]
    assert [k.get("mtime") for k in kept] == ["2020-09-13T12:26:40.000000007Z",
                                              "2020-09-13T12:26:40.000000009Z"], kept
    r, summary = copy(tmp_path, str(tmp_path / "src"), "az://dst/vis", "--visibility", "file",
                      env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert visible(azure, "dst", "vis/") == files and azure.pending_uploads() == []
    assert summary["files_copied"] == 0, summary


def test_delete_removes_the_blobs_the_source_no_longer_has_and_only_those(
        azure: AzureServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    """``--delete`` removes a blob (a file of the destination's) and a whole folder of
    blobs; names that begin as theirs do stay."""
    src = tmp_path / "src"
    for name, data in (("gone.txt", b"g"), ("gone.txt.keep", b"k"), ("old/a", b"a"),
                       ("old/b", b"b"), ("kept/c", b"c")):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    first, _ = copy(tmp_path, str(src), "az://dst/del", env=warm_engine_local2)
    assert first.returncode == 0, first.stderr
    (src / "gone.txt").unlink()
    for name in ("old/a", "old/b"):
        (src / name).unlink()
    (src / "old").rmdir()
    r, summary = copy(tmp_path, str(src), "az://dst/del", "--delete", env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert visible(azure, "dst", "del/") == {"gone.txt.keep": b"k", "kept/c": b"c"}
    assert summary["files_deleted"] >= 3, summary
