"""Lists as input (issue 11, point 5): ``--files-from`` and ``--files-from-manifest`` through
the real CLI (and the API), on a local tree and on the moto S3 server.

The source tree is not walked: a file present but not listed is not copied, and a
tree that a walk would fail on (a dangling link and a loop under ``--links follow``)
copies cleanly. A listed file the source lacks is one named failure (exit 1); a path
above the root is refused (exit 2). A manifest row with size and mtime costs no request
at planning: a listed object that does not exist is planned as a copy and fails only
in its task. Dry runs plan without Spark, so most cases here cost no Spark start.
"""

from __future__ import annotations

import gzip
import io
import json
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import distcp
from tests.conftest import PYDISTCP, cli_env, run_cli, tree
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures
from tests.fixtures.trees import wild_tree

pytestmark = pytest.mark.e2e


def run_with_stdin(text: str, *args: str, env: dict[str, str] | None = None
                   ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PYDISTCP, *args], input=text, capture_output=True, text=True,
                          env=cli_env(env), timeout=300, check=False)


def test_files_from_stdin_copies_only_listed_files_and_never_walks_the_tree(
        tmp_path: Path) -> None:
    src = wild_tree(tmp_path)  # a dangling link and a loop: a walk under --links follow fails
    (src / "unlisted.txt").write_bytes(b"not listed")
    (src / "d" / "e").mkdir()
    (src / "d" / "e" / "deep.txt").write_bytes(b"deep")
    walked = run_cli("copy", "--dry-run", "--links", "follow", str(src), str(tmp_path / "w"))
    assert walked.returncode == 1, walked.stderr  # the control: walking this tree fails
    listing = "# wanted\n\na\n  /d/e/deep.txt  \n;d/b is not wanted\nd/./e/../../a\n"
    r = run_with_stdin(listing, "copy", "--no-progress", "--master", "local[2]",
                       "--links", "follow", "--files-from", "-", str(src),
                       str(tmp_path / "dst"))
    assert r.returncode == 0, r.stderr
    got = {rel: data for rel, (data, _mode, _mtime) in tree(tmp_path / "dst").items()}
    assert got == {"a": b"inside", "d": None, "d/e": None, "d/e/deep.txt": b"deep"}
    assert "copied 2 files" in r.stdout


def test_a_listed_file_the_source_lacks_fails_alone_and_dotdot_is_refused(
        tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_bytes(b"a")
    (src / "sub" / "b.txt").write_bytes(b"bb")
    listing = tmp_path / "list.txt"
    listing.write_text("a.txt\nsub\nmissing.txt\nsub/b.txt\n")
    r = run_cli("copy", "--dry-run", "--files-from", str(listing), str(src),
                str(tmp_path / "dst"))
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines()[:2] == [f"copy   {tmp_path}/dst/a.txt  (new)",
                                         f"copy   {tmp_path}/dst/sub/b.txt  (new)"]
    assert "would copy 2 files (3 B), skipped 0, failed 2" in r.stdout
    assert r.stderr.splitlines() == [
        (f"pydistcp: FAILED {src}/sub: a directory (listed in --files-from {listing}, "
         "line 2): a list names files, one per line"),
        (f"pydistcp: FAILED {src}/missing.txt: not found at the source (listed in "
         f"--files-from {listing}, line 3)")]

    listing.write_text("a.txt\n# fine so far\n../outside\n")
    r = run_cli("copy", "--dry-run", "--files-from", str(listing), str(src),
                str(tmp_path / "dst"))
    assert r.returncode == 2
    assert r.stderr == (f"pydistcp: error: --files-from {listing} line 3: '../outside' "
                        "climbs above the source root ('..'); list paths relative to SRC\n")

    r = run_cli("copy", "--dry-run", "--files-from", str(tmp_path / "nope.txt"), str(src),
                str(tmp_path / "dst"))
    assert (r.returncode, r.stderr) == (
        2, f"pydistcp: error: --files-from {tmp_path}/nope.txt: no such file\n")


def test_the_api_takes_files_from_and_a_local_manifest(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "x").mkdir(parents=True)
    (src / "x" / "one.txt").write_bytes(b"1")
    (src / "two.txt").write_bytes(b"22")
    listing = tmp_path / "list.txt"
    listing.write_text("x/one.txt\n")
    summary = distcp.copy(str(src), str(tmp_path / "dst"), files_from=str(listing),
                          dry_run=True)
    assert [(r["action"], r["path"]) for r in summary.plan] == [
        ("copy", f"{tmp_path}/dst/x/one.txt")]
    # a manifest with an empty bucket names paths relative to SRC; a header row names
    # the columns
    manifest = tmp_path / "m.csv"
    manifest.write_text("bucket,key\n,two.txt\n,x/one.txt\n")
    summary = distcp.copy(str(src), str(tmp_path / "dst"), files_from_manifest=str(manifest),
                          dry_run=True)
    assert sorted(r["path"] for r in summary.plan) == [
        f"{tmp_path}/dst/two.txt", f"{tmp_path}/dst/x/one.txt"]
    assert summary.ok and summary.files_copied == 2 and summary.bytes_copied == 3


OBJECTS = {"data/a.bin": bytes(range(256)) * 40, "data/sp ace+plus=.txt": b"x" * 10,
           "data/d/e.txt": b"hello\n", "data/unlisted.txt": b"not listed"}


def inventory_rows(s3srv: S3Server, keys: list[str]) -> list[dict[str, Any]]:
    """What S3 Inventory reports for ``keys``: bucket, key, size, mtime, bare ETag."""
    client = s3srv.client()
    rows = []
    for key in keys:
        head = client.head_object(Bucket="src", Key=key)
        rows.append({"bucket": "src", "key": key, "size": head["ContentLength"],
                     "last_modified_date": head["LastModified"],
                     "e_tag": head["ETag"].strip('"')})
    return rows


def inventory_csv_gz(rows: list[dict[str, Any]]) -> bytes:
    """Inventory's CSV: every field quoted, no header, keys URL-encoded, gzip'd."""
    text = "".join(
        f'"{r["bucket"]}","{quote_plus(r["key"], safe="/")}","{r["size"]}",'
        f'"{r["last_modified_date"].strftime("%Y-%m-%dT%H:%M:%S.000Z")}","{r["e_tag"]}"\n'
        for r in rows)
    return gzip.compress(text.encode())


def test_s3_inventory_csv_on_s3_is_the_listing_and_costs_no_head_at_planning(
        s3: S3Server, tmp_path: Path, warm_engine_local2: dict[str, str]) -> None:  # noqa: F811
    client = s3.client()
    for key, data in OBJECTS.items():
        client.put_object(Bucket="src", Key=key, Body=data)
    rows = inventory_rows(s3, ["data/a.bin", "data/sp ace+plus=.txt", "data/d/e.txt"])
    # listed with size and mtime, but not there: only a request would find that out
    ghost = {**rows[0], "key": "data/ghost.bin"}
    client.put_object(Bucket="src", Key="inventory/data.csv.gz",
                      Body=inventory_csv_gz([*rows, ghost]))
    args = ["copy", "--files-from-manifest", "s3://src/inventory/data.csv.gz",
            "s3://src/data", str(tmp_path / "dst")]
    dry = run_cli(*args, "--dry-run", env=s3.env)
    assert dry.returncode == 0, dry.stderr  # the ghost is planned: nothing was asked
    assert sorted(line[len("copy   "):].rsplit("  (", 1)[0] for line in dry.stdout.splitlines()
                  if line.startswith("copy ")) == sorted(
        f"{tmp_path}/dst/{k.removeprefix('data/')}" for k in [*OBJECTS][:3] + ["ghost.bin"])

    report = tmp_path / "summary.json"
    r = run_cli(*args, "--no-progress", "--master", "local[2]", "--summary-json", str(report),
                env={**s3.env, **warm_engine_local2})
    assert r.returncode == 1, r.stderr
    got = {rel: data for rel, (data, _m, _t) in tree(tmp_path / "dst").items() if data}
    assert got == {k.removeprefix("data/"): v for k, v in OBJECTS.items()
                   if k != "data/unlisted.txt"}
    summary = json.loads(report.read_text())
    assert summary["files_copied"] == 3 and summary["files_failed"] == 1
    assert [f["path"] for f in summary["failures"]] == ["s3://src/data/ghost.bin"]
    assert "source vanished since listing: s3://src/data/ghost.bin" in r.stderr


def test_s3_parquet_manifest_plans_in_a_dry_run_and_rows_outside_src_are_refused(
        s3: S3Server, tmp_path: Path) -> None:  # noqa: F811
    client = s3.client()
    for key, data in OBJECTS.items():
        client.put_object(Bucket="src", Key=key, Body=data)
    rows = inventory_rows(s3, ["data/d/e.txt", "data/sp ace+plus=.txt"])
    table = pa.table({"bucket": [r["bucket"] for r in rows], "key": [r["key"] for r in rows],
                      "size": pa.array([r["size"] for r in rows], pa.int64()),
                      "last_modified_date": pa.array([r["last_modified_date"] for r in rows],
                                                     pa.timestamp("ms", tz="UTC")),
                      "e_tag": [r["e_tag"] for r in rows]})
    manifest = tmp_path / "inventory.parquet"
    out = io.BytesIO()
    pq.write_table(table, out)
    manifest.write_bytes(out.getvalue())
    r = run_cli("copy", "--dry-run", "--files-from-manifest", str(manifest), "s3://src/data",
                "s3://dst/copy", env=s3.env)
    assert r.returncode == 0, r.stderr
    assert [line.split()[:2] for line in r.stdout.splitlines() if line.startswith("copy")] \
        == [["copy", "s3://dst/copy/d/e.txt"], ["copy", "s3://dst/copy/sp"]]
    assert "would copy 2 files (16 B)" in r.stdout

    r = run_cli("copy", "--dry-run", "--files-from-manifest", str(manifest), "s3://src/data/d",
                "s3://dst/copy", env=s3.env)
    assert r.returncode == 2
    assert r.stderr == (f"pydistcp: error: --files-from-manifest {manifest} row 2: "
                        "src/data/sp ace+plus=.txt is not under the source src/data/d; give "
                        "SRC as the bucket (or prefix) the manifest lists\n")


def test_an_inventory_manifest_json_on_s3_reads_every_data_file_in_a_dry_run(
        s3: S3Server, tmp_path: Path) -> None:  # noqa: F811
    client = s3.client()
    for key, data in OBJECTS.items():
        client.put_object(Bucket="src", Key=key, Body=data)
    rows = inventory_rows(s3, ["data/a.bin", "data/d/e.txt", "data/sp ace+plus=.txt"])
    for i, part in enumerate((rows[:2], rows[1:])):  # e.txt in both: planned once
        client.put_object(Bucket="dst", Key=f"inv/data/{i}.csv.gz", Body=inventory_csv_gz(part))
    manifest = {"sourceBucket": "src", "destinationBucket": "arn:aws:s3:::dst",
                "fileFormat": "CSV",
                "fileSchema": "Bucket, Key, Size, LastModifiedDate, ETag",
                "files": [{"key": "inv/data/0.csv.gz"}, {"key": "inv/data/1.csv.gz"}]}
    client.put_object(Bucket="dst", Key="inv/manifest.json", Body=json.dumps(manifest).encode())
    r = run_cli("copy", "--dry-run", "--files-from-manifest", "s3://dst/inv/manifest.json",
                "s3://src/data", str(tmp_path / "dst"), env=s3.env)
    assert r.returncode == 0, r.stderr
    assert [line.rsplit("  (", 1)[0] for line in r.stdout.splitlines()
            if line.startswith("copy")] == [
        f"copy   {tmp_path}/dst/{rel}" for rel in ("a.bin", "d/e.txt", "sp ace+plus=.txt")]
