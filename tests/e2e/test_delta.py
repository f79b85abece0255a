"""Delta Lake tables replicated version by version (``--finder delta``, and tables under
``--dataset-glob``), proven with delta-rs (``deltalake``): tables written with appends,
an overwrite, a delete, a schema change, a compaction and a checkpoint; replicated
local -> local and local -> S3 (moto); read back at every replicated version (same
rows, same schema, time travel); a rerun copies only newer versions; a copy killed
between a version's data and its commit leaves a destination a reader reads whole, and
the rerun completes it; a bad table (absolute paths, a vacuumed file) is one line and
exit 1 while the others replicate."""

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
from tests.unit.test_metrics_file import samples

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.e2e


def rows(table: Any) -> list[dict[str, Any]]:
    """A table's rows, sorted (row order is no property of a Delta table)."""
    return sorted(table.to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def snapshot(uri: str, version: int | None = None, **options: Any) -> tuple[Any, Any]:
    """(rows, schema) of the table at ``uri`` at ``version`` (None: the newest)."""
    dt = deltalake.DeltaTable(uri, version=version, storage_options=options or None)
    table = dt.to_pyarrow_table()
    return rows(table), table.schema


def write_history(path: Path, start: int = 0) -> None:
    """Versions ``start``.. of a table: appends, an overwrite, a delete, a schema change
    (merge), a compaction and a checkpoint, each a new version."""
    w = deltalake.write_deltalake
    uri = str(path)
    if start == 0:
        w(uri, pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}))                   # v0
        w(uri, pa.table({"id": [4, 5], "name": ["d", "e"]}), mode="append")            # v1
        w(uri, pa.table({"id": [6], "name": ["f"]}), mode="append")                    # v2
        return
    w(uri, pa.table({"id": [10, 11, 12], "name": ["x", "y", "z"]}), mode="overwrite")  # v3
    deltalake.DeltaTable(uri).delete("id = 11")                                          # v4
    w(uri, pa.table({"id": [13], "name": ["m"], "score": [1.5]}), mode="append",
      schema_mode="merge")                                                               # v5
    w(uri, pa.table({"id": [14], "name": ["n"], "score": [2.5]}), mode="append")       # v6
    deltalake.DeltaTable(uri).optimize.compact()                                         # v7
    deltalake.DeltaTable(uri).create_checkpoint()


def assert_same_at_every_version(src: str, dst: str, upto: int, **options: Any) -> None:
    assert deltalake.DeltaTable(dst, storage_options=options or None).version() == upto
    for v in range(upto + 1):
        assert snapshot(dst, v, **options) == snapshot(src, v), f"version {v} differs"


def data_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and ".pydistcp" not in p.parts}


def test_a_table_replicates_by_version_then_only_newer_versions_then_nothing(
        spark: Any, tmp_path: Path) -> None:
    src, dst = tmp_path / "src" / "sales", tmp_path / "dst" / "sales"
    write_history(src)
    first = distcp.copy(str(src), str(dst), finder="delta", progress=False)
    assert first.failures == [] and first.files_copied == len(data_files(src))
    assert_same_at_every_version(str(src), str(dst), 2)
    assert announced(dst) == ["version-0/commit", "version-1/commit", "version-2/commit"]
    assert first.per_dataset[str(src)]["table"] == {"version": 2, "source_version": 2,
                                                    "versions_behind": 0}

    before = data_files(src)
    write_history(src, start=3)
    second = distcp.copy(str(src), str(dst), finder="delta", progress=False)
    assert second.failures == []
    assert second.files_copied == len(data_files(src) - before)  # the new versions' only
    assert_same_at_every_version(str(src), str(dst), 7)
    assert announced(dst)[3:] == [f"version-{v}/commit" for v in range(3, 8)]
    assert snapshot(str(dst))[1].names == ["id", "name", "score"]  # the merged schema
    assert snapshot(str(dst), 2)[1].names == ["id", "name"]        # time travel keeps it
    assert (dst / "_delta_log" / "_last_checkpoint").read_bytes() == \
        (src / "_delta_log" / "_last_checkpoint").read_bytes()
    assert (dst / "_delta_log" / "00000000000000000007.checkpoint.parquet").exists()

    third = distcp.copy(str(src), str(dst), finder="delta", progress=False)
    assert (third.failures, third.files_copied) == ([], 0)
    assert data_files(dst) == data_files(src)


def test_a_table_replicates_to_s3_and_reads_back_there_at_every_version(
        spark: Any, tmp_path: Path, moto_server: S3Server) -> None:  # noqa: F811
    s3 = moto_server
    s3.reset()
    src = tmp_path / "src" / "events"
    write_history(src)
    write_history(src, start=3)
    reader = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": s3.options["key"],
              "AWS_SECRET_ACCESS_KEY": s3.options["secret"], "AWS_REGION": "us-east-1",
              "AWS_ALLOW_HTTP": "true"}
    polling = Reader("s3://dst/lake/events", {v: snapshot(str(src), v)[0] for v in range(8)},
                     **reader)
    polling.start()  # a reader of the bucket during the copy: a whole version, or no table
    try:
        done = distcp.copy(str(src), "s3://dst/lake/events", finder="delta", progress=False,
                           dst_options=s3.options)
        time.sleep(0.5)
    finally:
        polling.stop.set()
        polling.join(timeout=60)
    assert polling.errors == [] and 7 in polling.versions
    assert done.failures == [] and done.files_copied == len(data_files(src))
    assert s3.pending_uploads() == []
    assert_same_at_every_version(str(src), "s3://dst/lake/events", 7, **reader)
    again = distcp.copy(str(src), "s3://dst/lake/events", finder="delta", progress=False,
                        dst_options=s3.options)
    assert (again.failures, again.files_copied) == ([], 0)


def commit_file(table: Path, version: int) -> Path:
    return table / "_delta_log" / f"{version:020d}.json"


def test_a_warehouse_replicates_table_by_table_and_a_bad_table_fails_alone(
        tmp_path: Path) -> None:
    src, dst = tmp_path / "warehouse", tmp_path / "copy"
    write_history(src / "good")
    (src / "notes").mkdir(parents=True)
    (src / "notes" / "readme.txt").write_text("not a table\n")
    # a shallow clone: its commit adds a file by an absolute path
    write_history(src / "clone")
    commit = commit_file(src / "clone", 1)
    actions = [json.loads(line) for line in commit.read_text().splitlines()]
    for a in actions:
        if "add" in a:
            a["add"]["path"] = "s3://elsewhere/table/" + a["add"]["path"]
    commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
    # a vacuumed file: version 2's data is gone from the source
    write_history(src / "vacuumed")
    (gone,) = [json.loads(line)["add"]["path"]
               for line in commit_file(src / "vacuumed", 2).read_text().splitlines()
               if "add" in json.loads(line)]
    os.remove(src / "vacuumed" / gone)

    prom = tmp_path / "metrics.prom"
    r = run_cli("copy", str(src), str(dst), "--dataset-glob", "*", "--no-progress",
                "--master", "local[2]", "--metrics-file", str(prom))
    assert r.returncode == 1, r.stderr
    got = samples(prom)
    assert {urn.rsplit("/", 1)[-1]: (v, got[("pydistcp_table_versions_behind", labels)])
            for (name, labels), v in got.items() if name == "pydistcp_table_version"
            for urn in [dict(labels)["dataset"]]} == {"good": (2, 0), "vacuumed": (1, 1)}
    assert_same_at_every_version(str(src / "good"), str(dst / "good"), 2)
    assert (dst / "notes" / "readme.txt").read_text() == "not a table\n"
    assert not (dst / "clone").exists()
    assert_same_at_every_version(str(src / "vacuumed"), str(dst / "vacuumed"), 1)
    assert not commit_file(dst / "vacuumed", 2).exists()
    clone_lines = [line for line in r.stderr.splitlines() if "/clone" in line]
    assert len(clone_lines) == 1
    assert ("Delta table not replicated: commit 1 references the absolute path "
            "s3://elsewhere/table/part-") in clone_lines[0]
    assert "(a shallow clone?)" in clone_lines[0]
    vacuum_lines = [line for line in r.stderr.splitlines() if gone in line]
    assert len(vacuum_lines) == 1
    assert ("referenced (add) by version 2 of Delta table " in vacuum_lines[0]
            and "the destination table is replicated up to version 1 only" in vacuum_lines[0])
    # pydistcp status: each table's last run, the bad ones failed with their line
    status = run_cli("status", str(dst)).stdout.splitlines()
    last = {line.split(":")[0].strip(): line.rsplit(" ", 1)[-1] for line in status
            if line.startswith(f"  {src}/")}
    assert last == {f"{src}/{t}": "failed" if t in ("clone", "vacuumed") else "ok"
                    for t in ("clone", "good", "vacuumed", "notes")}


class Reader(threading.Thread):
    """Reads the destination table with delta-rs over and over: each read must be a
    version the source has, complete (its rows as the source's at that version)."""

    def __init__(self, dst: Path | str, expected: dict[int, Any], **options: str) -> None:
        super().__init__(daemon=True)
        self.dst, self.expected, self.options = str(dst), expected, options or None
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.versions: set[int] = set()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                dt = deltalake.DeltaTable(self.dst, storage_options=self.options)
                got = rows(dt.to_pyarrow_table())
                version = dt.version()
            except deltalake.exceptions.TableNotFoundError:
                time.sleep(0.02)
                continue  # no commit published yet: no table to read
            except Exception as exc:  # noqa: BLE001 - any failure of a reader is the finding
                self.errors.append(f"{type(exc).__name__}: {exc}")
                continue
            self.versions.add(version)
            if got != self.expected[version]:
                self.errors.append(f"version {version} read with other rows than the source's")


@pytest.mark.parametrize("point, visible", [
    # sequences: v0 data, v0 commit, v1 data, v1 commit, v2 data, v2 commit, ...
    ("before_persist:6", 1),  # v2's data published, its commit not yet persisted
    ("after_persist:4", 0),   # v1's commit persisted, not run: the replay publishes it
    ("mid_publish:3", 0),     # inside publishing v1's data (one file per set passes once)
])
def test_a_copy_killed_between_a_versions_data_and_its_commit_leaves_a_readable_table(
        tmp_path: Path, point: str, visible: int) -> None:
    src, dst = tmp_path / "src" / "t", tmp_path / "dst" / "t"
    write_history(src)
    write_history(src, start=3)
    expected = {v: snapshot(str(src), v)[0] for v in range(8)}
    reader = Reader(dst, expected)
    reader.start()
    try:
        crash = run_cli("copy", "--finder", "delta", str(src), str(dst), "--no-progress",
                        "--master", "local[2]", env={"DISTCP_CRASH_AT": point})
        assert crash.returncode == 137, crash.stderr
        assert deltalake.DeltaTable(str(dst)).version() == visible
        assert snapshot(str(dst)) == snapshot(str(src), visible)
        assert not commit_file(dst, visible + 1).exists()
        if point.startswith("before_persist"):
            added = [json.loads(line)["add"]["path"]
                     for line in commit_file(src, 2).read_text().splitlines()
                     if "add" in json.loads(line)]
            assert all((dst / p).exists() for p in added)  # published, not yet referenced

        # a SIGKILL of the whole command at a random instant of its publishing, then
        # the rerun that completes the table
        proc = subprocess.Popen([*PYDISTCP, "copy", "--finder", "delta", str(src), str(dst),
                                 "--no-progress", "--master", "local[2]"], env=cli_env(None),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        deadline = time.monotonic() + 120
        while not commit_file(dst, 3).exists() and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)

        done = run_cli("copy", "--finder", "delta", str(src), str(dst), "--no-progress",
                       "--master", "local[2]")
        assert done.returncode == 0, done.stderr
        assert_same_at_every_version(str(src), str(dst), 7)
        status = run_cli("status", str(dst))
        assert "pending commits: 0" in status.stdout, status.stdout
        time.sleep(0.5)  # the reader reads the finished table too
    finally:
        reader.stop.set()
        reader.join(timeout=60)
    assert reader.errors == []
    assert {visible, 7} <= reader.versions


def test_a_fork_replicates_a_table_to_two_destinations_each_from_its_own_version(
        tmp_path: Path) -> None:
    src, a, b = tmp_path / "src" / "t", tmp_path / "a" / "t", tmp_path / "b" / "t"
    write_history(src)
    first = run_cli("copy", "--finder", "delta", str(src), str(a), "--no-progress",
                    "--master", "local[2]")
    assert first.returncode == 0, first.stderr
    write_history(src, start=3)
    # a is at version 2, b has nothing: each branch plans from its own destination's log
    r = run_cli("copy", "--finder", "delta", str(src), str(a), "--fork", str(b),
                "--no-progress", "--master", "local[2]")
    assert r.returncode == 0, r.stderr
    for dst in (a, b):
        assert_same_at_every_version(str(src), str(dst), 7)
    assert data_files(a) == data_files(b) == data_files(src)


def live_files(table: Path, version: int | None = None) -> list[str]:
    """The data files delta-rs reads at ``version`` (None: the newest), relative."""
    uris = deltalake.DeltaTable(str(table), version=version).file_uris()
    return [Path(u.removeprefix("file://")).relative_to(table).as_posix() for u in uris]


def test_check_compares_a_replica_with_the_version_it_holds_and_names_what_differs(
        tmp_path: Path) -> None:
    src, dst = tmp_path / "src" / "sales", tmp_path / "dst" / "sales"
    write_history(src)
    assert run_cli("copy", str(src), str(dst), "--finder", "delta", "--no-progress",
                   "--master", "local[2]").returncode == 0
    write_history(src, start=3)  # the source moves on to version 7: not the replica's
    (dst / "part-next.parquet").write_bytes(b"the next version's data, copied first")
    combined = tmp_path / "combined.txt"
    check = ("check", str(src), str(dst), "--finder", "delta", "--no-progress",
             "--master", "local[2]")
    r = run_cli(*check, "--combined", str(combined))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (f"table {src}: the destination holds version 2, the source is at version 7: "
            "5 versions behind (compared at the destination's)") in r.stdout
    live = live_files(src, 2)
    assert sorted(combined.read_text().splitlines()) == sorted(
        [f"= _delta_log/{v:020d}.json" for v in range(3)] + [f"= {f}" for f in live])

    changed, cut, gone = sorted(live)
    data = (dst / changed).read_bytes()
    (dst / changed).write_bytes(bytes([data[0] ^ 1]) + data[1:])  # same size, one bit
    (dst / cut).write_bytes((dst / cut).read_bytes()[:-1])
    os.remove(dst / gone)
    r = run_cli(*check)
    assert r.returncode == 1
    assert reported(r.stdout) == {changed: "*", cut: "*", gone: "-"}
    assert f"* {cut}  (sizes differ: source " in r.stdout
    assert f"* {changed}  (contents differ (digest " in r.stdout
    assert "3 matching, 2 differing, 1 missing on destination, 0 missing on source" in r.stdout

    os.remove(src / gone)  # vacuumed at the source: named, not compared
    r = run_cli(*check, "--size-only")
    assert r.returncode == 1
    assert reported(r.stdout)[str(src / gone)] == "!"
    assert (f"in version 2 of Delta table {src} (add) but no longer at the source "
            "(vacuumed?): not compared") in r.stdout


def test_check_of_a_table_the_destination_does_not_hold_is_every_file_missing_and_a_bad_log_one_line(
        tmp_path: Path) -> None:
    src = tmp_path / "src" / "sales"
    write_history(src)
    r = run_cli("check", str(src), str(tmp_path / "none"), "--finder", "delta",
                "--no-progress", "--size-only")
    assert r.returncode == 1
    live = live_files(src)
    assert reported(r.stdout) == {**{f"_delta_log/{v:020d}.json": "-" for v in range(3)},
                                  **dict.fromkeys(live, "-")}
    os.remove(commit_file(src, 1))  # a gap: the snapshot cannot be replayed
    r = run_cli("check", str(src), str(tmp_path / "none"), "--finder", "delta",
                "--no-progress", "--size-only")
    assert r.returncode == 1
    assert reported(r.stdout) == {str(src): "!"}
    assert ("Delta table not checked: the log has no commit 1 (it goes on at 2): a gap "
            "in the log") in r.stdout


def test_check_of_a_warehouse_compares_each_table_at_its_version_and_folders_file_by_file(
        tmp_path: Path) -> None:
    src, dst = tmp_path / "warehouse", tmp_path / "copy"
    write_history(src / "sales")
    (src / "notes").mkdir(parents=True)
    (src / "notes" / "readme.txt").write_text("not a table\n")
    assert run_cli("copy", str(src), str(dst), "--dataset-glob", "*", "--no-progress",
                   "--master", "local[2]").returncode == 0
    write_history(src / "sales", start=3)           # the table moves on: not a difference
    (dst / "notes" / "extra.txt").write_text("x")   # a folder's extra file: a difference
    r = run_cli("check", str(src), str(dst), "--dataset-glob", "*", "--no-progress",
                "--size-only")
    assert r.returncode == 1
    assert reported(r.stdout) == {"notes/extra.txt": "+"}
    assert f"{3 + len(live_files(src / 'sales', 2)) + 1} matching" in r.stdout
