"""An Iceberg table's metadata registered in a pyiceberg SQL catalog on SQLite, without
Spark: registered the first time, then swapped by the catalog's compare-and-set; the
step is idempotent (verify after execute, execute twice), survives the commit log's
JSON, and refuses a table that someone else moved on (it stays where it was)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from distcp.commit.iceberg_steps import RegisterIcebergMetadata
from distcp.commit.steps import CommitContext, CommitStep
from distcp.datasets.icebergcatalog import CATALOG_NAME, current_location, open_catalog
from distcp.errors import PublishError

pyiceberg_sql = pytest.importorskip("pyiceberg.catalog.sql")


def source_table(tmp_path: Path) -> list[str]:
    """A table with three metadata versions; their locations, oldest first."""
    cat = pyiceberg_sql.SqlCatalog("src", uri=f"sqlite:///{tmp_path}/src.db",
                                   warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
    locations = [t.metadata_location]
    for i in range(2):
        t.append(pa.table({"id": [i]}))
        locations.append(t.metadata_location)
    return locations


def test_a_table_is_registered_then_swapped_and_each_step_is_idempotent(
        tmp_path: Path) -> None:
    v0, v1, v2 = source_table(tmp_path)
    uri = f"sqlite:///{tmp_path}/dst.db"
    ctx = CommitContext()
    previous = ""
    for location in (v0, v1, v2):
        step = RegisterIcebergMetadata(uri, "lake.t", location, previous)
        back = CommitStep.from_dict(json.loads(json.dumps(step.to_dict())))
        assert back == step
        assert not step.verify(ctx)
        step.execute(ctx)
        assert step.verify(ctx)
        previous = location
    reader = pyiceberg_sql.SqlCatalog(CATALOG_NAME, uri=uri)
    table = reader.load_table("lake.t")
    assert table.metadata_location == v2
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [0, 1]


def test_a_table_moved_on_by_someone_else_is_refused_and_left_where_it_is(
        tmp_path: Path) -> None:
    v0, v1, v2 = source_table(tmp_path)
    uri = f"sqlite:///{tmp_path}/dst.db"
    ctx = CommitContext()
    RegisterIcebergMetadata(uri, "lake.t", v0).execute(ctx)
    RegisterIcebergMetadata(uri, "lake.t", v2, v0).execute(ctx)   # someone else's swap
    stale = RegisterIcebergMetadata(uri, "lake.t", v1, v0)        # planned at v0
    with pytest.raises(PublishError, match="table lake.t not moved to .*: the catalog's "
                                           "table is at .*, not .* as planned"):
        stale.execute(ctx)
    assert current_location(open_catalog(uri), "lake.t") == v2
    with pytest.raises(PublishError, match="already exists"):      # not new after all
        RegisterIcebergMetadata(uri, "lake.t", v1).execute(ctx)
