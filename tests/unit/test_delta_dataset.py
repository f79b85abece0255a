"""Delta tables found and planned on the driver, without Spark: ``--finder delta`` and
tables under ``--dataset-glob``; the destination's own log says where the plan starts;
what the plan refuses is one failure line of its table (tables written by deltalake)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from distcp.configuration import CopyConfiguration
from distcp.datasets.delta import DeltaDataset
from distcp.datasets.deltaplan import CHECKPOINT_SET, LAST_CHECKPOINT_SET, commit_set, data_set
from distcp.errors import PlanningError
from distcp.planning.listing import find_datasets, plan_all

deltalake = pytest.importorskip("deltalake")


def table(path: Path, versions: int = 3, checkpoint: bool = False) -> Path:
    for v in range(versions):
        deltalake.write_deltalake(str(path), pa.table({"id": [v]}),
                                  mode="append" if v else "error")
    if checkpoint:
        deltalake.DeltaTable(str(path)).create_checkpoint()
    return path


def log(path: Path, version: int) -> Path:
    return path / "_delta_log" / f"{version:020d}.json"


def added(path: Path, version: int) -> list[str]:
    return [json.loads(line)["add"]["path"] for line in log(path, version).read_text()
            .splitlines() if "add" in json.loads(line)]


def replica_at(src: Path, dst: Path, version: int) -> None:
    """``dst`` as a finished copy of ``src`` up to ``version`` (files and mtimes)."""
    for v in range(version + 1):
        for rel in [*added(src, v), f"_delta_log/{v:020d}.json"]:
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, dst / rel)


def plan(src: Path, dst: Path, **opts: object):  # type: ignore[no-untyped-def]
    cfg = CopyConfiguration.build([str(src)], str(dst), finder="delta", **opts)
    return plan_all(cfg, lambda _m: None)


def test_finder_delta_takes_each_source_as_a_table(tmp_path: Path) -> None:
    a, b = table(tmp_path / "a", 1), table(tmp_path / "b", 1)
    cfg = CopyConfiguration.build([str(a)], str(tmp_path / "copy"), finder="delta")
    (ds,) = find_datasets(cfg)
    assert isinstance(ds, DeltaDataset) and ds.destination_root == str(tmp_path / "copy")
    cfg = CopyConfiguration.build([str(a), str(b)], str(tmp_path / "out"), finder="delta")
    assert [d.destination_root for d in find_datasets(cfg)] == [
        str(tmp_path / "out" / "a"), str(tmp_path / "out" / "b")]
    (tmp_path / "plain").mkdir()
    cfg = CopyConfiguration.build([str(tmp_path / "plain")], str(tmp_path / "c"),
                                  finder="delta")
    with pytest.raises(PlanningError, match="plain is not a Delta table"):
        find_datasets(cfg)


def test_a_glob_copies_tables_as_tables_and_folders_as_folders(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    table(wh / "db" / "t1", 1)
    (wh / "db" / "notes").mkdir(parents=True)
    found = find_datasets(CopyConfiguration.build([str(wh)], str(tmp_path / "c"),
                                                  dataset_glob="*/*"))
    assert [(type(d).__name__, d.destination_root) for d in found] == [
        ("RecursiveCopyableDataset", str(tmp_path / "c" / "db" / "notes")),
        ("DeltaDataset", str(tmp_path / "c" / "db" / "t1"))]
    # a table's log matched on its own is no folder to copy: it would show a commit
    # before its data
    with pytest.raises(PlanningError, match="no directory under .* matches"):
        find_datasets(CopyConfiguration.build([str(wh / "db")], str(tmp_path / "c"),
                                              dataset_glob="*/_delta_log"))
    below = find_datasets(CopyConfiguration.build([str(wh)], str(tmp_path / "c"),
                                                  dataset_glob="**"))
    assert [(type(d).__name__, d.root.removeprefix(str(wh))) for d in below] == [
        ("RecursiveCopyableDataset", ""), ("RecursiveCopyableDataset", "/db"), ("RecursiveCopyableDataset", "/db/notes"),
        ("DeltaDataset", "/db/t1")]
    only = find_datasets(CopyConfiguration.build([str(wh)], str(tmp_path / "c"),
                                                 dataset_glob="*/*", finder="delta"))
    assert [type(d) for d in only] == [DeltaDataset]
    with pytest.raises(PlanningError, match="no Delta table .* matches --dataset-glob"):
        find_datasets(CopyConfiguration.build([str(wh)], str(tmp_path / "c"),
                                              dataset_glob="*/notes", finder="delta"))


def test_the_plan_starts_after_the_destinations_last_commit(tmp_path: Path) -> None:
    src, dst = table(tmp_path / "src", 4, checkpoint=True), tmp_path / "dst"
    replica_at(src, dst, 1)
    (dst / "stray.parquet").write_bytes(b"not the source's")
    done = plan(src, dst, delete=False)
    (d,) = done.plan.datasets
    assert d.order == (data_set(2), commit_set(2), data_set(3), commit_set(3), CHECKPOINT_SET,
                       LAST_CHECKPOINT_SET)
    got = sorted((a.file.file_set, a.file.destination.removeprefix(str(dst) + "/"))
                 for a in d.copy)
    assert got == sorted([(data_set(2), added(src, 2)[0]), (data_set(3), added(src, 3)[0]),
                          (commit_set(2), "_delta_log/00000000000000000002.json"),
                          (commit_set(3), "_delta_log/00000000000000000003.json"),
                          (CHECKPOINT_SET, "_delta_log/00000000000000000003.checkpoint.parquet"),
                          (LAST_CHECKPOINT_SET, "_delta_log/_last_checkpoint")])
    assert done.skipped == ()
    assert d.versions is not None and (d.versions.destination, d.versions.source) == (1, 3)
    assert d.versions.after([]) == 1
    assert d.versions.after([data_set(2), commit_set(2), data_set(3)]) == 2
    assert d.versions.after([commit_set(3), CHECKPOINT_SET]) == 3


def test_delete_never_removes_what_a_tables_plan_does_not_list(tmp_path: Path) -> None:
    src, dst = table(tmp_path / "src", 2), tmp_path / "dst"
    replica_at(src, dst, 0)
    table_ds = DeltaDataset(str(src), str(src), str(dst))  # a table under --dataset-glob
    done = plan_all(CopyConfiguration.build([str(src)], str(dst), delete=True),
                    lambda _m: None, [table_ds])
    assert done.plan.datasets[0].delete == ()
    assert len(done.plan.datasets[0].copy) == 2  # v1's data and commit


def test_an_up_to_date_destination_plans_nothing_to_copy(tmp_path: Path) -> None:
    src, dst = table(tmp_path / "src", 3), tmp_path / "dst"
    replica_at(src, dst, 2)
    (d,) = plan(src, dst).plan.datasets
    assert d.copy == ()


def test_a_hostile_path_refuses_the_table_in_one_line_and_plans_nothing(tmp_path: Path) -> None:
    src = table(tmp_path / "src", 2)
    line = json.dumps({"add": {"path": "..%2F..%2Fetc%2Fcron.d%2Fx", "size": 1,
                               "modificationTime": 0, "dataChange": True}})
    log(src, 1).write_text(log(src, 1).read_text().rstrip("\n") + "\n" + line + "\n")
    done = plan(src, tmp_path / "dst")
    assert done.plan.datasets[0].copy == ()
    (refused,) = done.skipped
    assert refused.failure and refused.path == str(src)
    assert refused.reason == ("Delta table not replicated: commit 1 references "
                              "'..%2F..%2Fetc%2Fcron.d%2Fx', which has an empty, '.' or '..' "
                              "component: not a file of the table")


def test_a_destination_that_is_not_a_copy_of_the_table_is_refused(tmp_path: Path) -> None:
    src, dst = table(tmp_path / "src", 3), tmp_path / "dst"
    replica_at(src, dst, 1)
    log(dst, 1).write_text(log(dst, 1).read_text() + "\n")
    (refused,) = plan(src, dst).skipped
    assert refused.reason == ("Delta table not replicated: the destination's commit 1 differs "
                              "from the source's: the destination table is not a copy of "
                              "this one")


def test_a_vacuumed_file_plans_the_versions_before_it_and_names_it(tmp_path: Path) -> None:
    src, dst = table(tmp_path / "src", 4), tmp_path / "dst"
    (src / added(src, 2)[0]).unlink()
    done = plan(src, dst)
    (d,) = done.plan.datasets
    assert d.order == (data_set(0), commit_set(0), data_set(1), commit_set(1))
    (line,) = done.skipped
    assert line.failure and line.path == str(src / added(src, 2)[0])
    assert line.reason == (f"referenced (add) by version 2 of Delta table {src} but no longer "
                           "at the source (vacuumed?): the destination table is replicated up "
                           "to version 1 only")


def test_the_runs_filters_do_not_apply_to_a_tables_files(tmp_path: Path) -> None:
    wh, dst = tmp_path / "wh", tmp_path / "dst"
    src = table(wh / "t", 2)
    replica_at(src, dst / "t", 0)
    done = plan_all(CopyConfiguration.build([str(wh)], str(dst), dataset_glob="*",
                                            include=("*.txt",)), lambda _m: None)
    (d,) = done.plan.datasets
    assert [a.file.file_set for a in d.copy] == [data_set(1), commit_set(1)]  # not filtered
    replica_at(src, dst / "t", 1)  # up to date: nothing selected, and no "no file matched"
    (d,) = plan_all(CopyConfiguration.build([str(wh)], str(dst), dataset_glob="*",
                                            include=("*.txt",)), lambda _m: None).plan.datasets
    assert d.copy == ()
