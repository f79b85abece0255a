"""Iceberg tables found and planned on the driver, without Spark: ``--finder iceberg``
and tables under ``--dataset-glob``; each metadata version's files in order with its
catalog swap; the destination's newest metadata says where the plan starts; options
that do not fit a table are refused (tables written by pyiceberg on SQLite)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from distcp.configuration import CopyConfiguration
from distcp.datasets.deltaplan import commit_set, data_set
from distcp.datasets.iceberg import IcebergDataset, table_name
from distcp.datasets.icebergplan import lists_set, manifests_set
from distcp.errors import ConfigurationError, PlanningError
from distcp.planning.listing import find_datasets, plan_all

sql = pytest.importorskip("pyiceberg.catalog.sql")


def table(root: Path, appends: int = 2, name: str = "t") -> Path:
    """``db.<name>`` with ``appends`` snapshots under ``root/wh``: metadata versions
    0 (no snapshot) to ``appends``."""
    cat = sql.SqlCatalog("src", uri=f"sqlite:///{root}/src.db", warehouse=f"file://{root}/wh")
    cat.create_namespace_if_not_exists("db")
    t = cat.create_table(f"db.{name}", schema=pa.schema([("id", pa.int64())]))
    for i in range(appends):
        t.append(pa.table({"id": [i]}))
    return root / "wh" / "db" / name


def plan(src: Path, dst: Path, **opts: Any) -> Any:
    cfg = CopyConfiguration.build([str(src)], str(dst), finder="iceberg", **opts)
    return plan_all(cfg, lambda _m: None)


def test_finder_iceberg_takes_a_table_and_refuses_a_folder(tmp_path: Path) -> None:
    src = table(tmp_path)
    (ds,) = find_datasets(CopyConfiguration.build([str(src)], str(tmp_path / "c"),
                                                  finder="iceberg"))
    assert isinstance(ds, IcebergDataset) and ds.destination_root == str(tmp_path / "c")
    (tmp_path / "plain").mkdir()
    with pytest.raises(PlanningError, match="plain is not an Iceberg table"):
        find_datasets(CopyConfiguration.build([str(tmp_path / "plain")], str(tmp_path / "d"),
                                              finder="iceberg"))
    found = find_datasets(CopyConfiguration.build([str(tmp_path / "wh")], str(tmp_path / "e"),
                                                  dataset_glob="*/*"))
    assert [type(d).__name__ for d in found] == ["IcebergDataset"]


def test_each_version_publishes_its_data_manifests_lists_then_metadata_and_swap(
        tmp_path: Path) -> None:
    src, dst = table(tmp_path), tmp_path / "dst" / "lake.db" / "t"
    done = plan(src, dst, iceberg_catalog=f"sqlite:///{tmp_path}/dst.db")
    (d,) = done.plan.datasets
    assert d.order == (commit_set(0),
                       data_set(1), manifests_set(1), lists_set(1), commit_set(1),
                       data_set(2), manifests_set(2), lists_set(2), commit_set(2))
    by_set: dict[str, list[str]] = {}
    for a in d.copy:
        by_set.setdefault(a.file.file_set, []).append(
            a.file.destination.removeprefix(f"{dst}/"))
    assert all(p.startswith("data/") for p in by_set[data_set(1)] + by_set[data_set(2)])
    assert all(p.startswith("metadata/") and p.endswith(".metadata.json")
               for v in range(3) for p in by_set[commit_set(v)])
    # rewritten files come from the run's scratch folder, the data from the source
    assert all(a.file.origin.url.startswith(str(src)) for a in d.copy
               if a.file.file_set.endswith("/data"))
    assert not any(a.file.origin.url.startswith(str(src)) for a in d.copy
                   if not a.file.file_set.endswith("/data"))
    swaps = [(r.file_set, r.table, r.previous.rsplit("/", 1)[-1], r.location.rsplit("/", 1)[-1])
             for r in d.registrations]
    names = [by_set[commit_set(v)][0].rsplit("/", 1)[-1] for v in range(3)]
    assert swaps == [(commit_set(0), "lake.t", "", names[0]),
                     (commit_set(1), "lake.t", names[0], names[1]),
                     (commit_set(2), "lake.t", names[1], names[2])]


def test_the_plan_starts_after_the_destinations_newest_metadata(tmp_path: Path) -> None:
    src, dst = table(tmp_path), tmp_path / "dst"
    first = plan(src, dst)
    (d,) = first.plan.datasets
    for a in d.copy:  # a finished copy of versions 0 and 1
        if a.file.file_set in (commit_set(0), data_set(1), manifests_set(1), lists_set(1),
                               commit_set(1)):
            Path(a.file.destination).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(a.file.origin.url, a.file.destination)
    again = plan(src, dst)
    (d,) = again.plan.datasets
    assert d.order == (data_set(2), manifests_set(2), lists_set(2), commit_set(2))
    assert d.versions is not None and (d.versions.destination, d.versions.source) == (1, 2)


def test_a_check_lists_the_snapshot_the_destination_holds_and_how_far_behind_it_is(
        tmp_path: Path) -> None:
    from distcp.datasets.versions import TableLag
    src, dst = table(tmp_path), tmp_path / "dst"
    cfg = CopyConfiguration.build([str(src)], str(dst), finder="iceberg")
    (ds,) = find_datasets(cfg)
    t = sql.SqlCatalog("src", uri=f"sqlite:///{tmp_path}/src.db").load_table("db.t")
    first, second = t.metadata.snapshots
    folder = f"file://{src}/"

    def files_of(snap: Any) -> tuple[list[str], list[str]]:
        """(data files, manifest list and manifests) of ``snap``, relative."""
        manifests = snap.manifests(t.io)
        data = [e.data_file.file_path.removeprefix(folder) for m in manifests
                for e in m.fetch_manifest_entry(t.io)]
        return sorted(data), [snap.manifest_list.removeprefix(folder),
                              *sorted(m.manifest_path.removeprefix(folder) for m in manifests)]

    def metadata(version: int) -> str:
        (name,) = (src / "metadata").glob(f"{version:05d}-*.metadata.json")
        return f"metadata/{name.name}"

    empty = ds.check_listing(cfg)  # nothing at the destination: the source's newest
    data, rewritten = files_of(second)
    assert [f.destination for f in empty.files] == [f"{dst}/{r}" for r in data]
    assert [f.origin.url for f in empty.files] == [str(src / r) for r in data]
    assert empty.expected == tuple(f"{dst}/{r}" for r in [metadata(2), *rewritten])
    assert empty.lag is None and empty.skipped == ()

    for a in plan(src, dst).plan.datasets[0].copy:  # a finished copy of versions 0 and 1
        if a.file.file_set in (commit_set(0), data_set(1), manifests_set(1), lists_set(1),
                               commit_set(1)):
            Path(a.file.destination).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(a.file.origin.url, a.file.destination)
    held = ds.check_listing(cfg)
    data, rewritten = files_of(first)
    assert [f.destination for f in held.files] == [f"{dst}/{r}" for r in data]
    assert held.expected == tuple(f"{dst}/{r}" for r in [metadata(1), *rewritten])
    assert held.lag == TableLag(str(src), f"snapshot {first.snapshot_id} (metadata version 1)",
                                f"snapshot {second.snapshot_id} (metadata version 2)", 1,
                                "snapshots")

    (src / data[0]).unlink()  # expired at the source: named, not compared
    gone = ds.check_listing(cfg)
    assert gone.files == ()
    (skipped,) = gone.skipped
    assert skipped.failure and skipped.reason == (
        f"in snapshot {first.snapshot_id} (metadata version 1) of Iceberg table {src} but no "
        "longer at the source (expired snapshots' files removed?): not compared")


def test_options_that_do_not_fit_a_table_are_refused() -> None:
    for opts, message in [
        ({"finder": "iceberg", "delete": True}, "--finder iceberg copies a table's new"),
        ({"iceberg_catalog": "sqlite:///c.db"}, "--iceberg-catalog and --iceberg-table need"),
        ({"finder": "iceberg", "iceberg_table": "db.t"}, "--iceberg-table needs --iceberg"),
        ({"finder": "iceberg", "iceberg_catalog": "sqlite:///c.db", "iceberg_table": "t"},
         "--iceberg-table: not NAMESPACE.TABLE: 't'"),
    ]:
        with pytest.raises(ConfigurationError, match=message):
            CopyConfiguration.build(["/src"], "/dst", **opts)


def test_the_catalog_name_comes_from_the_option_else_from_the_folders() -> None:
    cfg = CopyConfiguration.build(["/src"], "/dst", finder="iceberg")
    assert table_name(cfg, "s3://b/wh/sales.db/orders") == "sales.orders"
    assert table_name(cfg, "/copy/orders/") == "copy.orders"
    named = CopyConfiguration.build(["/src"], "/dst", finder="iceberg",
                                    iceberg_catalog="sqlite:///c.db", iceberg_table="a.b")
    assert table_name(named, "/copy/orders") == "a.b"
