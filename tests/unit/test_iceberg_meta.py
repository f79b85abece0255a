"""An Iceberg table's metadata read as values and planned, without Spark or storage:
metadata versions from file names, the current version (newest, or version-hint),
paths checked to stay under the table location and moved to the destination's, and
the publishing order of the plan (data, manifests, lists, then metadata)."""

from __future__ import annotations

from typing import Any

import pytest

from distcp.datasets.icebergmeta import (
    IcebergError,
    current_version,
    metadata_files,
    metadata_version,
    moved,
    relative,
    rewritten_metadata,
    snapshot_ids,
)
from distcp.datasets.icebergplan import VersionFiles, lists_set, manifests_set, plan_table

SRC = "file:///wh/db/t"
DST = "s3://bucket/copy/t"


def test_metadata_versions_are_read_from_both_naming_schemes() -> None:
    assert metadata_version("00003-0a1b-2c.metadata.json") == 3
    assert metadata_version("v12.metadata.json") == 12
    assert metadata_version("v2.gz.metadata.json") == 2
    assert metadata_version("snap-1-0-x.avro") is None
    assert metadata_version("version-hint.text") is None
    assert metadata_files(["v1.metadata.json", "x-m0.avro", "v2.metadata.json"]) == {
        1: "v1.metadata.json", 2: "v2.metadata.json"}


def test_two_metadata_files_of_one_version_are_refused() -> None:
    with pytest.raises(IcebergError, match="two metadata files of version 1"):
        metadata_files(["00001-a.metadata.json", "00001-b.metadata.json"])


def test_the_current_version_is_the_hints_when_it_names_a_file_else_the_newest() -> None:
    files = {1: "v1.metadata.json", 2: "v2.metadata.json", 3: "v3.metadata.json"}
    assert current_version(files) == 3
    assert current_version(files, b"2\n") == 2
    assert current_version(files, b"9") == 3        # names no file: the newest
    assert current_version(files, b"junk") == 3
    assert current_version({}) == -1


def test_a_path_under_the_location_is_relative_to_it() -> None:
    assert relative(f"{SRC}/data/a.parquet", SRC, "manifest m") == "data/a.parquet"
    assert moved(f"{SRC}/metadata/m.avro", SRC, DST, "x") == f"{DST}/metadata/m.avro"


@pytest.mark.parametrize("path, why", [
    ("s3://elsewhere/t/data/a.parquet", "is not under the table location file:///wh/db/t"),
    ("file:///wh/db/t2/data/a.parquet", "is not under the table location"),
    (f"{SRC}/data/../../other/a.parquet", "has an empty, '.' or '..' component"),
    (f"{SRC}/data//a.parquet", "has an empty, '.' or '..' component"),
    (f"{SRC}/.pydistcp/datasets/x.json", "lies in .pydistcp/"),
    (f"{SRC}/data/a\\b.parquet", "holds a NUL or a backslash"),
])
def test_a_path_that_leaves_the_table_is_refused_in_one_line_naming_it(
        path: str, why: str) -> None:
    with pytest.raises(IcebergError) as err:
        relative(path, SRC, "manifest metadata/m0.avro")
    message = str(err.value)
    assert message.startswith(f"manifest metadata/m0.avro references {path}, which {why}")
    assert "\n" not in message


def metadata(**extra: Any) -> dict[str, Any]:
    return {
        "format-version": 2, "location": SRC,
        "snapshots": [{"snapshot-id": 1, "manifest-list": f"{SRC}/metadata/snap-1.avro"},
                      {"snapshot-id": 2, "manifest-list": f"{SRC}/metadata/snap-2.avro"}],
        "metadata-log": [{"timestamp-ms": 1, "metadata-file": f"{SRC}/metadata/v1.metadata.json"}],
        "snapshot-log": [{"timestamp-ms": 1, "snapshot-id": 1}],
        "properties": {"owner": "me"}, **extra}


def test_every_path_of_a_metadata_document_is_moved_to_the_destination() -> None:
    doc = metadata(statistics=[{"snapshot-id": 2, "statistics-path": f"{SRC}/metadata/s.puffin"}],
                   properties={"write.data.path": f"{SRC}/data", "owner": "me"})
    out = rewritten_metadata(doc, DST + "/", "v2.metadata.json")
    assert out["location"] == DST
    assert [s["manifest-list"] for s in out["snapshots"]] == [
        f"{DST}/metadata/snap-1.avro", f"{DST}/metadata/snap-2.avro"]
    assert out["metadata-log"][0]["metadata-file"] == f"{DST}/metadata/v1.metadata.json"
    assert out["statistics"][0]["statistics-path"] == f"{DST}/metadata/s.puffin"
    assert out["properties"] == {"write.data.path": f"{DST}/data", "owner": "me"}
    assert out["snapshot-log"] == doc["snapshot-log"]   # history kept: time travel
    assert SRC not in repr(out)
    assert doc["location"] == SRC                        # the input is left as it was
    assert snapshot_ids(out) == {1, 2}


def test_a_metadata_document_naming_a_file_elsewhere_is_refused() -> None:
    doc = metadata(properties={"write.data.path": "s3://other/data"})
    with pytest.raises(IcebergError, match="metadata v2.metadata.json references "
                                           "s3://other/data, which is not under"):
        rewritten_metadata(doc, DST, "v2.metadata.json")
    bad = metadata()
    bad["snapshots"][1]["manifest-list"] = "/tmp/evil/snap.avro"
    with pytest.raises(IcebergError, match="references /tmp/evil/snap.avro"):
        rewritten_metadata(bad, DST, "v2.metadata.json")
    with pytest.raises(IcebergError, match="has no location"):
        rewritten_metadata({"snapshots": []}, DST, "v2.metadata.json")


def test_the_plan_publishes_each_versions_data_manifests_lists_then_metadata() -> None:
    plan = plan_table([
        VersionFiles(4, "metadata/v4.metadata.json", ("data/b.parquet", "data/a.parquet"),
                     ("metadata/m2.avro",), ("metadata/snap-4.avro",)),
        VersionFiles(3, "metadata/v3.metadata.json", ("data/a.parquet",),
                     ("metadata/m1.avro",), ("metadata/snap-3.avro",)),
        VersionFiles(5, "metadata/v5.metadata.json"),  # a schema change: metadata only
    ], after=2)
    assert plan.sets == (
        ("version-3/data", ("data/a.parquet",)),
        (manifests_set(3), ("metadata/m1.avro",)),
        (lists_set(3), ("metadata/snap-3.avro",)),
        ("version-3/commit", ("metadata/v3.metadata.json",)),
        ("version-4/data", ("data/b.parquet",)),  # a.parquet came with version 3
        ("version-4/manifests", ("metadata/m2.avro",)),
        ("version-4/manifest-lists", ("metadata/snap-4.avro",)),
        ("version-4/commit", ("metadata/v4.metadata.json",)),
        ("version-5/commit", ("metadata/v5.metadata.json",)),
    )
    assert plan.last == 5
    assert plan.announced == {"version-3/commit", "version-4/commit", "version-5/commit"}


def test_a_destination_up_to_date_plans_nothing() -> None:
    plan = plan_table([], after=7)
    assert (plan.sets, plan.last) == ((), 7)


def test_plan_values_survive_pickle_and_cloudpickle() -> None:
    import pickle

    from pyspark import cloudpickle

    from distcp.datasets.icebergplan import CatalogSwap
    for value in (CatalogSwap("version-3/commit", "sqlite:///c.db", "db.t",
                              f"{DST}/metadata/v3.metadata.json", f"{DST}/metadata/v2.metadata.json"),
                  VersionFiles(3, "metadata/v3.metadata.json", ("data/a.parquet",))):
        assert pickle.loads(pickle.dumps(value)) == value
        assert cloudpickle.loads(cloudpickle.dumps(value)) == value


def test_s3fs_options_become_pyiceberg_file_io_properties() -> None:
    from distcp.datasets.icebergcatalog import file_io_properties
    assert file_io_properties({"key": "k", "secret": "s", "client_kwargs": {
        "endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1"}}) == {
        "s3.access-key-id": "k", "s3.secret-access-key": "s",
        "s3.endpoint": "http://127.0.0.1:9000", "s3.region": "eu-west-1"}
    assert file_io_properties({"endpoint_url": "http://e", "token": "t"}) == {
        "s3.endpoint": "http://e", "s3.session-token": "t"}
    assert file_io_properties({}) == {}
