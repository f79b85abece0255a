"""Iceberg tables replicated metadata version by version (``--finder iceberg``, and
tables under ``--dataset-glob``), proven with pyiceberg on a SQL catalog over SQLite:
tables written with appends, an overwrite, a delete, a schema change and a manifest
compaction (pyiceberg 0.12 has no data-file compaction); replicated
local -> local (registered in a destination catalog) and local -> S3 (moto; read from
the metadata file); read back at every replicated snapshot (same rows, same schema,
``scan(snapshot_id=...)``), no source path left in the destination's metadata; a rerun
copies only newer snapshots' files, then nothing; a copy killed between a version's data
and its metadata leaves the catalog at the previous complete snapshot, and the rerun
completes it; a table naming a file outside itself is one line and exit 1 while the
others replicate; ``check --finder iceberg`` compares a replica at the snapshot it holds
(data files by digest, rewritten metadata by presence), names what differs (exit 1) and
says how many snapshots it is behind (exit 0)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import distcp
from tests.conftest import PYDISTCP, announced, cli_env, reported, run_cli
from tests.fixtures.s3_server import S3Server, moto_server  # noqa: F401 - the fixture

sql = pytest.importorskip("pyiceberg.catalog.sql")
pytestmark = pytest.mark.e2e


def catalog(db: Path, name: str = "default", **props: str) -> Any:
    return sql.SqlCatalog(name, uri=f"sqlite:///{db}", **props)


def write_history(root: Path, start: int = 0, name: str = "t") -> Path:
    """Snapshots of ``db.t`` in a source catalog under ``root``: two appends; then an
    overwrite, a delete, a schema change, an append and a merging append. Returns the
    table's folder."""
    from pyiceberg.expressions import EqualTo
    from pyiceberg.types import DoubleType
    cat = catalog(root / "src.db", "src", warehouse=f"file://{root}/wh")
    cat.create_namespace_if_not_exists("db")
    if start == 0:
        t = cat.create_table(f"db.{name}", schema=pa.schema([("id", pa.int64()),
                                                       ("name", pa.string())]))
        t.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}))
        t.append(pa.table({"id": [4, 5], "name": ["d", "e"]}))
    else:
        t = cat.load_table(f"db.{name}")
        t.overwrite(pa.table({"id": [10, 11, 12], "name": ["x", "y", "z"]}))
        t.delete(EqualTo("id", 11))
        with t.update_schema() as update:
            update.add_column("score", DoubleType())
        t = cat.load_table(f"db.{name}")
        t.append(pa.table({"id": [13], "name": ["m"], "score": [1.5]},
                          schema=t.schema().as_arrow()))
        # a manifest compaction: the next append merges the manifests into one, whose
        # entries for earlier files are EXISTING (pyiceberg 0.12 cannot compact data files)
        with t.transaction() as tx:
            tx.set_properties({"commit.manifest-merge.enabled": "true",
                               "commit.manifest.min-count-to-merge": "2"})
        t = cat.load_table(f"db.{name}")
        t.append(pa.table({"id": [14], "name": ["n"], "score": [2.5]},
                          schema=t.schema().as_arrow()))
        assert len(t.current_snapshot().manifests(t.io)) == 1
    return root / "wh" / "db" / name


def source(root: Path, name: str = "t") -> Any:
    return catalog(root / "src.db", "src").load_table(f"db.{name}")


def rows(table: Any, snapshot_id: int | None = None) -> list[dict[str, Any]]:
    got = table.scan(snapshot_id=snapshot_id).to_arrow().to_pylist()
    return sorted(got, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def assert_same_at_every_snapshot(src: Any, dst: Any) -> None:
    """Every snapshot of ``src`` read at ``dst`` (time travel) with the same rows and
    schema, the same current snapshot and snapshot log."""
    assert dst.current_snapshot().snapshot_id == src.current_snapshot().snapshot_id
    assert [s.snapshot_id for s in dst.metadata.snapshots] == \
        [s.snapshot_id for s in src.metadata.snapshots]
    assert dst.metadata.snapshot_log == src.metadata.snapshot_log
    for snap in src.metadata.snapshots:
        assert rows(dst, snap.snapshot_id) == rows(src, snap.snapshot_id), snap
    assert dst.schema() == src.schema()


def table_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and ".pydistcp" not in p.parts}


def referenced(root: Path, name: str = "t") -> set[str]:
    """The source table's files some snapshot references, and its metadata files (what
    a replica holds: a manifest a merging append wrote and merged away is not)."""
    table = source(root, name)
    folder = f"file://{root}/wh/db/{name}/"
    out = {p.relative_to(root / "wh" / "db" / name).as_posix()
           for p in (root / "wh" / "db" / name / "metadata").glob("*.metadata.json")}
    for snap in table.metadata.snapshots:
        out.add(snap.manifest_list.removeprefix(folder))
        for manifest in snap.manifests(table.io):
            out.add(manifest.manifest_path.removeprefix(folder))
            out.update(e.data_file.file_path.removeprefix(folder)
                       for e in manifest.fetch_manifest_entry(table.io))
    return out


def no_source_path(dst: Path, src: Path) -> None:
    for f in (dst / "metadata").iterdir():
        assert str(src).encode() not in f.read_bytes(), f


def test_a_table_replicates_into_a_catalog_then_only_newer_snapshots_then_nothing(
        spark: Any, tmp_path: Path) -> None:
    src = write_history(tmp_path)
    dst, db = tmp_path / "dst" / "lake" / "t", tmp_path / "dst.db"
    cat = f"sqlite:///{db}"
    first = distcp.copy(str(src), str(dst), finder="iceberg", iceberg_catalog=cat,
                        progress=False)
    assert first.failures == [] and first.files_copied == len(table_files(src))
    assert_same_at_every_snapshot(source(tmp_path), catalog(db).load_table("lake.t"))
    assert announced(dst) == ["version-0/commit", "version-1/commit", "version-2/commit"]
    assert first.per_dataset[str(src)]["table"] == {"version": 2, "source_version": 2,
                                                    "versions_behind": 0}
    no_source_path(dst, src)

    before = referenced(tmp_path)
    write_history(tmp_path, start=1)
    second = distcp.copy(str(src), str(dst), finder="iceberg", iceberg_catalog=cat,
                         progress=False)
    assert second.failures == []
    assert second.files_copied == len(referenced(tmp_path) - before)  # the new versions' only
    table = catalog(db).load_table("lake.t")
    assert_same_at_every_snapshot(source(tmp_path), table)
    assert table.schema().column_names == ["id", "name", "score"]
    assert table.metadata_location.startswith(f"{dst}/metadata/")
    assert announced(dst)[3:] == [f"version-{v}/commit" for v in range(3, 9)]
    no_source_path(dst, src)

    third = distcp.copy(str(src), str(dst), finder="iceberg", iceberg_catalog=cat,
                        progress=False)
    assert (third.failures, third.files_copied) == ([], 0)
    assert table_files(dst) == referenced(tmp_path)
    (merged_away,) = table_files(src) - referenced(tmp_path)  # not copied: no reader needs it
    assert merged_away.endswith("-m0.avro")


def test_a_table_replicates_to_s3_and_reads_back_through_the_catalog_and_its_metadata(
        spark: Any, tmp_path: Path, moto_server: S3Server) -> None:  # noqa: F811
    from pyiceberg.table import StaticTable
    s3 = moto_server
    s3.reset()
    src = write_history(tmp_path)
    db = tmp_path / "dst.db"
    props = {"s3.endpoint": s3.endpoint, "s3.access-key-id": s3.options["key"],
             "s3.secret-access-key": s3.options["secret"], "s3.region": "us-east-1"}
    for rest in (True, False):  # the first snapshots, then the rest
        done = distcp.copy(str(src), "s3://dst/lake/t", finder="iceberg", progress=False,
                           dst_options=s3.options, iceberg_catalog=f"sqlite:///{db}")
        assert done.failures == [] and done.files_copied > 0
        assert s3.pending_uploads() == []
        table = catalog(db, **props).load_table("lake.t")
        assert table.metadata_location.startswith("s3://dst/lake/t/metadata/")
        assert_same_at_every_snapshot(source(tmp_path), table)
        if rest:
            write_history(tmp_path, start=1)
    newest = source(tmp_path).metadata_location.rsplit("/", 1)[-1]
    static = StaticTable.from_metadata(f"s3://dst/lake/t/metadata/{newest}", props)
    assert_same_at_every_snapshot(source(tmp_path), static)
    for manifest in static.current_snapshot().manifests(static.io):
        assert manifest.manifest_path.startswith("s3://dst/lake/t/metadata/")
    again = distcp.copy(str(src), "s3://dst/lake/t", finder="iceberg", progress=False,
                        dst_options=s3.options, iceberg_catalog=f"sqlite:///{db}")
    assert (again.failures, again.files_copied) == ([], 0)


def test_a_warehouse_replicates_table_by_table_and_a_bad_table_fails_alone(
        tmp_path: Path) -> None:
    from pyiceberg.table import StaticTable
    good = write_history(tmp_path, name="good")
    bad = write_history(tmp_path, name="bad")
    (tmp_path / "wh" / "db" / "notes").mkdir()
    (tmp_path / "wh" / "db" / "notes" / "readme.txt").write_text("not a table\n")
    newest = max((bad / "metadata").glob("*.metadata.json"))
    doc = json.loads(newest.read_text())
    doc["snapshots"][-1]["manifest-list"] = "file:///etc/evil/snap.avro"
    newest.write_text(json.dumps(doc))
    dst = tmp_path / "copy"
    r = run_cli("copy", str(tmp_path / "wh" / "db"), str(dst), "--dataset-glob", "*",
                "--no-progress", "--master", "local[2]")
    assert r.returncode == 1, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if "/bad" in x]
    assert ("Iceberg table not replicated: snapshot "
            f"{doc['snapshots'][-1]['snapshot-id']} of metadata {newest.name} references "
            "file:///etc/evil/snap.avro, which is not under the table location "
            f"file://{bad}") in line
    assert not (dst / "bad").exists()
    assert (dst / "notes" / "readme.txt").read_text() == "not a table\n"
    current = max((good / "metadata").glob("*.metadata.json")).name
    table = StaticTable.from_metadata(str(dst / "good" / "metadata" / current))
    assert_same_at_every_snapshot(source(tmp_path, "good"), table)
    no_source_path(dst / "good", good)


class Reader(threading.Thread):
    """Reads the destination table through its catalog over and over: each read must be
    a snapshot the source has, complete (its rows as the source's at that snapshot)."""

    def __init__(self, db: Path, expected: dict[int, Any]) -> None:
        super().__init__(daemon=True)
        self.db, self.expected = db, expected
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.snapshots: set[int] = set()

    def run(self) -> None:
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
        while not self.stop.is_set():
            try:
                table = catalog(self.db).load_table("lake.t")
                snap = table.current_snapshot()
                # the snapshot's own schema (a schema change alone adds no snapshot)
                got = rows(table, snap.snapshot_id) if snap is not None else []
            except (NoSuchTableError, NoSuchNamespaceError):
                time.sleep(0.02)
                continue  # nothing registered yet: no table to read
            except Exception as exc:  # noqa: BLE001 - any failure of a reader is the finding
                self.errors.append(f"{type(exc).__name__}: {exc}")
                continue
            sid = snap.snapshot_id if snap is not None else 0
            self.snapshots.add(sid)
            if got != self.expected.get(sid):
                self.errors.append(f"snapshot {sid} read with other rows than the source's")


@pytest.mark.parametrize("point, visible", [
    # sequences: v0 metadata; v1 data, manifests, lists, metadata; v2 data, ...
    ("before_persist:7", 1),  # v2's data and manifests published, its list not yet
    ("after_persist:5", 0),   # v1's metadata persisted, not run: the replay publishes it
])
def test_a_copy_killed_between_a_versions_data_and_its_metadata_leaves_the_catalog_readable(
        tmp_path: Path, point: str, visible: int) -> None:
    src = write_history(tmp_path)
    dst, db = tmp_path / "dst" / "lake" / "t", tmp_path / "dst.db"
    args = ("copy", "--finder", "iceberg", str(src), str(dst), "--iceberg-catalog",
            f"sqlite:///{db}", "--no-progress", "--master", "local[2]")
    write_history(tmp_path, start=1)
    expected = {0: []} | {s.snapshot_id: rows(source(tmp_path), s.snapshot_id)
                          for s in source(tmp_path).metadata.snapshots}
    polling = Reader(db, expected)
    polling.start()
    try:
        crashed_and_rerun(tmp_path, args, point, visible)
    finally:
        polling.stop.set()
        polling.join(timeout=60)
    assert polling.errors == []
    assert len(polling.snapshots) >= 2


def crashed_and_rerun(tmp_path: Path, args: tuple[str, ...], point: str, visible: int
                      ) -> None:
    """A copy killed at ``point`` leaves the catalog at metadata version ``visible``;
    one killed at a random instant later, then a rerun, complete the table."""
    db = tmp_path / "dst.db"
    crash = run_cli(*args, env={"DISTCP_CRASH_AT": point})
    assert crash.returncode == 137, crash.stderr
    reader = catalog(db).load_table("lake.t")
    src = tmp_path / "wh" / "db" / "t"
    versions = sorted((src / "metadata").glob("*.metadata.json"))
    assert reader.metadata_location.endswith(versions[visible].name)
    expected = source(tmp_path).metadata.snapshots[:visible]
    assert [s.snapshot_id for s in reader.metadata.snapshots] == \
        [s.snapshot_id for s in expected]
    for snap in expected:
        assert rows(reader, snap.snapshot_id) == rows(source(tmp_path), snap.snapshot_id)
    # a SIGKILL of the whole command at a random instant of its publishing
    proc = subprocess.Popen([*PYDISTCP, *args], env=cli_env(None), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not any(v.name.startswith("00003-") for v in
                  (Path(args[4]) / "metadata").glob("*.metadata.json")) \
            and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    assert_same_at_every_snapshot(source(tmp_path), catalog(db).load_table("lake.t"))
    assert "pending commits: 0" in run_cli("status", args[4]).stdout
    time.sleep(0.5)  # the reader reads the finished table too


def test_a_fork_replicates_a_table_to_two_destinations_each_with_its_own_paths(
        tmp_path: Path) -> None:
    from pyiceberg.table import StaticTable
    src = write_history(tmp_path)
    a, b = tmp_path / "a" / "t", tmp_path / "b" / "t"
    first = run_cli("copy", "--finder", "iceberg", str(src), str(a), "--no-progress",
                    "--master", "local[2]")
    assert first.returncode == 0, first.stderr
    write_history(tmp_path, start=1)
    # a has the first versions, b nothing: each branch plans from its own destination
    r = run_cli("copy", "--finder", "iceberg", str(src), str(a), "--fork", str(b),
                "--no-progress", "--master", "local[2]")
    assert r.returncode == 0, r.stderr
    newest = source(tmp_path).metadata_location.rsplit("/", 1)[-1]
    for dst, other in ((a, b), (b, a)):
        table = StaticTable.from_metadata(str(dst / "metadata" / newest))
        assert table.location() == str(dst)
        assert_same_at_every_snapshot(source(tmp_path), table)
        no_source_path(dst, src)
        no_source_path(dst, other)
        assert table_files(dst) == referenced(tmp_path)


def current(root: Path, name: str = "t") -> tuple[list[str], list[str]]:
    """The source table's current snapshot as a check of it compares it: (its data files;
    its metadata file, manifest list and manifests, rewritten at the destination),
    relative to the table."""
    table = source(root, name)
    folder = f"file://{root}/wh/db/{name}/"
    snap = table.current_snapshot()
    manifests = snap.manifests(table.io)
    data = sorted(e.data_file.file_path.removeprefix(folder) for m in manifests
                  for e in m.fetch_manifest_entry(table.io))
    return data, [table.metadata_location.removeprefix(folder),
                  snap.manifest_list.removeprefix(folder),
                  *sorted(m.manifest_path.removeprefix(folder) for m in manifests)]


def lag_line(root: Path, holds: tuple[int, int], behind: int, name: str = "t") -> str:
    """check's line for a destination holding ``holds`` (snapshot, metadata version)
    when the source is at its current snapshot."""
    table = source(root, name)
    version = int(table.metadata_location.rsplit("/", 1)[-1].split("-")[0])
    return (f"table {root / 'wh' / 'db' / name}: the destination holds snapshot {holds[0]} "
            f"(metadata version {holds[1]}), the source is at snapshot "
            f"{table.current_snapshot().snapshot_id} (metadata version {version}): {behind} "
            "snapshots behind (compared at the destination's)")


def test_check_compares_a_replica_at_the_snapshot_its_catalog_holds_and_names_what_differs(
        tmp_path: Path) -> None:
    src = write_history(tmp_path)
    source(tmp_path).append(pa.table({"id": [6], "name": ["f"]}))  # a third data file
    dst, db = tmp_path / "dst" / "lake" / "t", tmp_path / "dst.db"
    cat = ("--iceberg-catalog", f"sqlite:///{db}", "--no-progress", "--master", "local[2]")
    assert run_cli("copy", "--finder", "iceberg", str(src), str(dst), *cat).returncode == 0
    check = ("check", "--finder", "iceberg", str(src), str(dst), *cat)
    combined = tmp_path / "combined.txt"
    r = run_cli(*check, "--combined", str(combined))
    assert r.returncode == 0, r.stdout + r.stderr
    data, rewritten = current(tmp_path)
    assert len(data) == 3 and len(rewritten) == 5  # metadata, list, a manifest per append
    assert sorted(combined.read_text().splitlines()) == sorted(
        f"= {f}" for f in data + rewritten)
    held = (source(tmp_path).current_snapshot().snapshot_id, 3)
    assert r.stdout.splitlines() == [
        lag_line(tmp_path, held, 0),
        r.stdout.splitlines()[-1]]
    assert r.stdout.splitlines()[-1].startswith(
        "8 matching, 0 differing, 0 missing on destination, 0 missing on source, 0 errors "
        # the 3 data files read at the destination, the copy's digests for the source's
        "(3 files read, 3 stored digests used, ")

    before = len(source(tmp_path).metadata.snapshots)
    write_history(tmp_path, start=1)  # newer snapshots, not replicated: said, not failed
    r = run_cli(*check)
    assert r.returncode == 0, r.stdout + r.stderr
    behind = len(source(tmp_path).metadata.snapshots) - before
    assert behind >= 4
    assert lag_line(tmp_path, held, behind) in r.stdout.splitlines()
    assert "8 matching, 0 differing, 0 missing on destination" in r.stdout

    changed, cut, gone = data
    manifest = rewritten[-1]
    body = (dst / changed).read_bytes()
    (dst / changed).write_bytes(body[:100] + bytes([body[100] ^ 1]) + body[101:])
    size = (dst / cut).stat().st_size
    (dst / cut).write_bytes((dst / cut).read_bytes()[:-1])
    os.remove(dst / gone)
    os.remove(dst / manifest)
    r = run_cli(*check)
    assert r.returncode == 1
    assert reported(r.stdout) == {changed: "*", cut: "*", gone: "-", manifest: "-"}
    assert f"* {changed}  (contents differ (digest " in r.stdout
    assert f"* {cut}  (sizes differ: source {size} bytes, destination {size - 1})" in r.stdout
    assert f"- {gone}  (missing on destination)" in r.stdout
    assert f"- {manifest}  (missing on destination)" in r.stdout
    assert "4 matching, 2 differing, 2 missing on destination, 0 missing on source, 0 errors" \
        in r.stdout

    os.remove(src / gone)  # gone from the source too: named, not compared
    r = run_cli(*check, "--size-only")
    assert r.returncode == 1
    assert reported(r.stdout)[str(src / gone)] == "!"
    assert (f"in snapshot {held[0]} (metadata version 3) of Iceberg table {src} but no "
            "longer at the source (expired snapshots' files removed?): not compared") \
        in r.stdout


def test_check_without_a_catalog_reads_the_newest_metadata_and_a_missing_replica_is_all_missing(
        tmp_path: Path) -> None:
    src = write_history(tmp_path)
    data, rewritten = current(tmp_path)
    r = run_cli("check", "--finder", "iceberg", str(src), str(tmp_path / "none"),
                "--no-progress", "--size-only")
    assert r.returncode == 1
    assert reported(r.stdout) == dict.fromkeys(data + rewritten, "-")
    assert "table " not in r.stdout  # a destination that holds nothing is not "behind"

    dst = tmp_path / "copy" / "t"
    assert run_cli("copy", "--finder", "iceberg", str(src), str(dst), "--no-progress",
                   "--master", "local[2]").returncode == 0
    report = tmp_path / "report.json"
    r = run_cli("check", "--finder", "iceberg", str(src), str(dst), "--no-progress",
                "--master", "local[2]", "--summary-json", str(report))
    assert r.returncode == 0, r.stdout + r.stderr
    snap = source(tmp_path).current_snapshot().snapshot_id
    assert lag_line(tmp_path, (snap, 2), 0) in r.stdout.splitlines()
    got = json.loads(report.read_text())
    assert got["ok"] is True and got["differences"] == []
    assert got["counts"]["match"] == len(data + rewritten)
    assert got["tables"] == [{"table": str(src), "behind": 0, "unit": "snapshots",
                              "destination": f"snapshot {snap} (metadata version 2)",
                              "source": f"snapshot {snap} (metadata version 2)"}]
