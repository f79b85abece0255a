"""A Delta table's log read as values and planned, without Spark or storage: versions in
order, the files each commit adds (percent-decoded, deletion vectors), paths from the
log checked to stay in the table, and the publishing order of the plan."""

from __future__ import annotations

import json

import pytest

from distcp.datasets.deltalog import (
    LogError,
    checkpoint_version,
    commit_name,
    commit_version,
    last_checkpoint_version,
    last_version,
    referenced,
    snapshot_files,
    table_path,
    versions_after,
)
from distcp.datasets.deltaplan import (
    CHECKPOINT_SET,
    LAST_CHECKPOINT_SET,
    SIDECAR_SET,
    Vacuumed,
    commit_set,
    data_set,
    plan_table,
)
from distcp.datasets.deltasnapshot import table_snapshot


def commit(*actions: dict[str, object]) -> bytes:
    return "\n".join(json.dumps(a) for a in actions).encode() + b"\n"


def add(path: str, **extra: object) -> dict[str, object]:
    return {"add": {"path": path, "size": 1, "modificationTime": 0, "dataChange": True,
                    **extra}}


def log(*rels: str) -> list[str]:
    return [f"_delta_log/{r}" for r in rels]


def test_versions_are_read_from_names_and_only_commits_count() -> None:
    names = [commit_name(2), commit_name(0), commit_name(1), "00000000000000000001.crc",
             "00000000000000000002.checkpoint.parquet", "_last_checkpoint", "x.json"]
    assert commit_name(3) == "00000000000000000003.json"
    assert [commit_version(n) for n in names[:3]] == [2, 0, 1]
    assert commit_version("00000000000000000002.checkpoint.parquet") is None
    assert last_version(names) == 2
    assert last_version(["_last_checkpoint"]) == -1


@pytest.mark.parametrize("name, version", [
    ("00000000000000000010.checkpoint.parquet", 10),
    ("00000000000000000010.checkpoint.0000000001.0000000002.parquet", 10),
    ("00000000000000000010.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json", 10),
    ("00000000000000000007.crc", 7),
    ("00000000000000000007.json", None),
    ("_last_checkpoint", None),
])
def test_checkpoints_of_every_kind_and_checksums_have_their_version(name: str,
                                                                    version: int | None
                                                                    ) -> None:
    assert checkpoint_version(name) == version


def test_newer_versions_come_in_order_and_a_gap_is_refused() -> None:
    names = [commit_name(v) for v in (3, 1, 0, 2)]
    assert versions_after(names, 0) == [1, 2, 3]
    assert versions_after(names, 3) == []
    with pytest.raises(LogError, match="no commit 2 .*goes on at 3.*a gap"):
        versions_after([commit_name(v) for v in (0, 1, 3)], 1)
    with pytest.raises(LogError, match="no commit 0 .*cleaned up"):
        versions_after([commit_name(v) for v in (10, 11)], -1)


def test_added_and_change_data_paths_are_percent_decoded_relative_paths() -> None:
    doc = commit({"commitInfo": {"operation": "WRITE"}}, {"protocol": {"minReaderVersion": 1}},
                 add("part%3D1/a%20b.parquet"), {"remove": {"path": "old.parquet"}},
                 {"cdc": {"path": "_change_data/c%25.parquet", "size": 3}},
                 add("x.parquet"))
    assert [(r.path, r.kind) for r in referenced(doc, 4)] == [
        ("part=1/a b.parquet", "add"), ("_change_data/c%.parquet", "cdc"),
        ("x.parquet", "add")]


def test_a_deletion_vector_file_is_named_as_the_protocol_says() -> None:
    # The Delta protocol's own example: storageType u, a prefix "ab" and a Z85 UUID.
    doc = commit(add("a.parquet", deletionVector={
        "storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 1,
        "sizeInBytes": 36, "cardinality": 2}),
        add("b.parquet", deletionVector={"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", "sizeInBytes": 40, "cardinality": 6}),
        add("c.parquet", deletionVector={"storageType": "u", "pathOrInlineDv": "^-aqEH.-t@S}K{vb[*k^", "sizeInBytes": 1, "cardinality": 1}))
    assert [r.path for r in referenced(doc, 1)] == [
        "a.parquet", "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin",
        "b.parquet", "c.parquet", "deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"]


@pytest.mark.parametrize("uri", ["s3://bucket/table/part-0.parquet", "/data/part-0.parquet",
                                 "file:/data/part-0.parquet", "abfss://c@a.dfs/x.parquet"])
def test_an_absolute_path_is_refused_naming_it_and_the_commit(uri: str) -> None:
    with pytest.raises(LogError) as exc:
        referenced(commit(add(uri)), 6)
    assert str(exc.value) == (f"commit 6 references the absolute path {uri} (a shallow "
                              "clone?): tables whose files live elsewhere are not replicated")


@pytest.mark.parametrize("uri, why", [
    ("../other/part.parquet", "'..'"), ("a/../../x", "'..'"), ("%2E%2E/x.parquet", "'..'"),
    ("a/..%2F..%2Fx", "'..'"), ("a//b.parquet", "empty"), ("./a.parquet", "'.'"),
    ("_delta_log/00000000000000000009.json", "lies in _delta_log/"),
    (".pydistcp/commits/x.json", "lies in .pydistcp/"), ("a%00b", "NUL"),
    ("a\\..\\b", "backslash"),
])
def test_a_path_that_leaves_the_table_or_enters_its_log_or_state_is_refused(uri: str,
                                                                            why: str) -> None:
    with pytest.raises(LogError, match=f"commit 2 references .*{why}.*not a file of the table"):
        table_path(uri, 2)


def test_a_malformed_commit_is_refused_with_its_line() -> None:
    with pytest.raises(LogError, match="commit 3 line 2 is not JSON"):
        referenced(b'{"commitInfo": {}}\n{"add": \n', 3)
    with pytest.raises(LogError, match="commit 3 has an action without a path"):
        referenced(commit({"add": {"size": 1}}), 3)
    with pytest.raises(LogError, match="deletion vector of unknown kind 'q'"):
        referenced(commit(add("a", deletionVector={"storageType": "q",
                                                   "pathOrInlineDv": "x" * 20})), 3)


def test_last_checkpoint_version_is_read_or_none() -> None:
    assert last_checkpoint_version(b'{"version":12,"size":40}') == 12
    assert last_checkpoint_version(b"not json") is None
    assert last_checkpoint_version(b"[1]") is None


def test_the_plan_publishes_each_versions_data_then_its_commit_then_checkpoints_last() -> None:
    present = {"a.parquet", "b.parquet", "c.parquet", "ab/deletion_vector_x.bin",
               *log(commit_name(0), commit_name(1), commit_name(2), commit_name(3),
                    "00000000000000000002.checkpoint.parquet", "00000000000000000002.crc",
                    "00000000000000000009.checkpoint.parquet", "_last_checkpoint",
                    "_sidecars/s1.parquet")}
    commits = {1: commit(add("a.parquet"), add("b.parquet")),
               2: commit({"remove": {"path": "a.parquet"}}),  # no data: its commit only
               3: commit(add("c.parquet"), add("b.parquet"))}
    plan = plan_table(present, 0, commits, last_checkpoint=2)
    assert plan.order == (data_set(1), commit_set(1), commit_set(2), data_set(3), commit_set(3),
                          SIDECAR_SET, CHECKPOINT_SET, LAST_CHECKPOINT_SET)
    sets = dict(plan.sets)
    assert sets[data_set(1)] == ("a.parquet", "b.parquet")
    assert sets[data_set(3)] == ("c.parquet",)  # b is v1's: copied once, before v1's commit
    assert sets[commit_set(3)] == ("_delta_log/00000000000000000003.json",)
    # checkpoints of versions the plan publishes; never one of a version after its last
    assert sets[CHECKPOINT_SET] == ("_delta_log/00000000000000000002.checkpoint.parquet",
                                    "_delta_log/00000000000000000002.crc")
    assert sets[LAST_CHECKPOINT_SET] == ("_delta_log/_last_checkpoint",)
    assert (plan.last, plan.vacuumed) == (3, None)
    assert plan.announced == {commit_set(1), commit_set(2), commit_set(3)}


def test_a_vacuumed_file_stops_the_table_at_the_version_before_it() -> None:
    present = {"a.parquet", "c.parquet",
               *log("00000000000000000001.checkpoint.parquet",
                    "00000000000000000003.checkpoint.parquet", "_last_checkpoint")}
    commits = {1: commit(add("a.parquet")), 2: commit(add("gone.parquet")),
               3: commit(add("c.parquet"))}
    plan = plan_table(present, 0, commits, last_checkpoint=3)
    assert plan.order == (data_set(1), commit_set(1), CHECKPOINT_SET)
    assert dict(plan.sets)[CHECKPOINT_SET] == ("_delta_log/00000000000000000001.checkpoint.parquet",)
    assert (plan.last, plan.vacuumed) == (1, Vacuumed(2, "gone.parquet", "add"))


def test_an_up_to_date_table_plans_only_what_summarises_its_versions() -> None:
    present = {"a.parquet", *log(commit_name(0), "00000000000000000000.checkpoint.parquet")}
    plan = plan_table(present, 0, {})
    assert plan.order == (CHECKPOINT_SET,)  # the diff against the destination skips it
    assert plan_table(set(), -1, {}).sets == ()


def remove(path: str) -> dict[str, object]:
    return {"remove": {"path": path, "deletionTimestamp": 0, "dataChange": True}}


def test_a_snapshot_is_the_log_replayed_adds_then_removes_and_a_replaced_deletion_vector(
        ) -> None:
    dv = {"storageType": "u", "pathOrInlineDv": "^-aqEH.-t@S}K{vb[*k^", "sizeInBytes": 1,
          "cardinality": 1}
    commits = {0: commit(add("a.parquet"), add("b%20c.parquet")),
               1: commit(remove("a.parquet"), add("d.parquet")),
               # a delete by deletion vector: the same path removed and added with its DV
               2: commit(add("b%20c.parquet", deletionVector=dv), remove("b%20c.parquet"))}
    assert sorted(r.path for r in snapshot_files(commits)) == [
        "b c.parquet", "d.parquet", "deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"]
    assert sorted(r.path for r in snapshot_files({0: commits[0]})) == ["a.parquet",
                                                                        "b c.parquet"]


def test_a_versions_snapshot_holds_its_live_files_commits_and_checkpoints_and_names_the_gone(
        ) -> None:
    commits = {0: commit(add("a.parquet"), add("b.parquet")),
               1: commit(remove("a.parquet"), add("c.parquet"))}
    present = {"b.parquet", "a.parquet", "later.parquet",
               *log(commit_name(0), commit_name(1), commit_name(2), "_last_checkpoint",
                    "00000000000000000001.checkpoint.parquet",
                    "00000000000000000002.checkpoint.parquet")}
    snap = table_snapshot(present, 1, commits, last_checkpoint=1)
    assert snap.files == ("_delta_log/00000000000000000000.json",
                          "_delta_log/00000000000000000001.checkpoint.parquet",
                          "_delta_log/00000000000000000001.json",
                          "_delta_log/_last_checkpoint", "b.parquet")
    assert [(r.path, r.kind) for r in snap.missing] == [("c.parquet", "add")]
    # the source's pointer names a later checkpoint: the destination's may be older
    assert "_delta_log/_last_checkpoint" not in table_snapshot(present, 1, commits, 2).files
