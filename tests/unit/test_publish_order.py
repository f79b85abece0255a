"""A dataset that orders its file sets (a Delta table): published in that order, each
only once every set before it was published whole; a set that fails holds back all the
sets after it, on real disk through the commit log, without Spark."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from distcp.planning.plan import DatasetPlan
from distcp.planning.visibility import per_file
from tests.unit.test_publish import World

ORDER = ("version-9/data", "version-9/commit", "version-10/data", "version-10/commit",
         "checkpoints")


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def table(world: World, bad: str | None = None) -> DatasetPlan:
    """Version 9 and 10 of a table: each's data, then its commit; then a checkpoint.
    The names sort otherwise ("version-10" < "version-9"): only the order counts."""
    world.add("p9.parquet", b"nine", "version-9/data", ok=bad != "p9.parquet")
    world.add("_delta_log/9.json", b"{9}", "version-9/commit")
    world.add("p10.parquet", b"ten", "version-10/data", ok=bad != "p10.parquet")
    world.add("_delta_log/10.json", b"{10}", "version-10/commit")
    world.add("_delta_log/10.checkpoint.parquet", b"cp", "checkpoints")
    return replace(world.plan(), order=ORDER)


def announced(world: World) -> list[str]:
    """The file sets whose COMPLETE events were sent, in the order they were."""
    lines = (Path(world.state) / "events" / "events.jsonl").read_text().splitlines()
    return [json.loads(line)["run"]["facets"]["pydistcp_copy"]["file_set"] for line in lines]


def test_sets_are_published_in_the_datasets_order_not_by_name(world: World) -> None:
    summary = world.publish((table(world),))
    assert summary.failures == []
    assert announced(world) == list(ORDER)
    assert sorted(world.published()) == ["_delta_log/10.checkpoint.parquet",
                                         "_delta_log/10.json", "_delta_log/9.json",
                                         "p10.parquet", "p9.parquet"]


def test_a_failed_data_set_holds_back_its_commit_and_every_later_set(world: World) -> None:
    summary = world.publish((table(world, bad="p10.parquet"),))
    assert announced(world) == ["version-9/data", "version-9/commit"]
    assert world.published() == {"p9.parquet": b"nine", "_delta_log/9.json": b"{9}"}
    lines = [f.error for f in summary.failures]
    assert lines[0].startswith("cannot read ") and lines[0].endswith("p10.parquet: "
                                                                      "Input/output error")
    assert lines[1] == ("file set version-10/data was not published whole: the 2 file "
                        "set(s) after it (later versions, checkpoints) wait for the next run")
    assert summary.files_failed == 1
    assert summary.files_not_published == 2  # the good copies kept for the next run


def test_under_commit_policy_partial_the_good_part_lands_but_no_commit_after_it(
        world: World) -> None:
    world.add("q9.parquet", b"q", "version-9/data")
    summary = world.publish((table(world, bad="p9.parquet"),), policy="partial")
    assert world.published() == {"q9.parquet": b"q"}  # a data file alone is never read
    assert announced_or_none(world) == ["version-9/data"]
    assert summary.failures[-1].error.startswith("file set version-9/data was not published "
                                                 "whole: the 4 file set(s) after it")


def announced_or_none(world: World) -> list[str]:
    events = Path(world.state) / "events" / "events.jsonl"
    return announced(world) if events.exists() else []


def test_only_the_sets_a_dataset_names_are_announced(world: World) -> None:
    plan = replace(table(world), announced=frozenset({"version-9/commit", "version-10/commit"}))
    assert world.publish((plan,)).failures == []
    assert announced(world) == ["version-9/commit", "version-10/commit"]  # one per version
    assert len(world.published()) == 5


def test_other_datasets_publish_whatever_a_table_holds_back(world: World) -> None:
    plan = table(world, bad="p9.parquet")
    world.add("x.txt", b"x", "all", urn="urn:b")
    summary = world.publish((plan, world.plan("urn:b")))
    assert world.published() == {"x.txt": b"x"}
    assert {f.dataset for f in summary.failures} == {"urn:a"}


def test_no_file_of_an_ordered_dataset_is_published_by_its_task(world: World) -> None:
    table(world)
    files = list(world.files.values())
    # a set of one file is published by its task when it is copied, unless its dataset
    # orders its sets: a commit must not appear before its data
    assert len(per_file(files, "file-set")) == 5
    assert per_file(files, "file-set", {"urn:a"}) == frozenset()
    assert per_file(files, "file", {"urn:a"}) == frozenset()
