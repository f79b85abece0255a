"""The pure split of a listing into tasks (distcp.planning.listsplit), on literals."""

from __future__ import annotations

import bisect
import pickle
import random
from collections.abc import Callable
from pathlib import Path

from distcp.planning.listsplit import (
    HIGH,
    KeyRange,
    balance,
    grouped,
    key_ranges,
    ranges_between,
)


def _prober(keys: list[str]) -> tuple[list[str], list[str], Callable[[str], str | None]]:
    """A sorted key list and the probe log of ``first_after`` over it."""
    keys = sorted(keys)
    log: list[str] = []

    def first_after(s: str) -> str | None:
        log.append(s)
        i = bisect.bisect_right(keys, s)
        return keys[i] if i < len(keys) else None

    return keys, log, first_after


def _covered_once(keys: list[str], ranges: list[KeyRange]) -> None:
    for k in keys:
        assert sum(r.holds(k) for r in ranges) == 1, k


def test_hashed_names_split_by_their_first_character() -> None:
    keys = [f"p/{c}{n:03d}" for c in "0123456789abcdef" for n in range(50)]
    keys, log, first_after = _prober(keys)
    ranges = key_ranges(first_after, "p/", keys[0], target=8, budget=64)
    assert len(ranges) == 16
    assert ranges[0] == KeyRange(None, "p/0" + HIGH, "p/0")
    assert ranges[-1] == KeyRange("p/e" + HIGH, None, "p/f")
    _covered_once(keys, ranges)
    assert len(log) == 16  # one probe per distinct character, one to find none left


def test_shared_stem_costs_one_probe_per_character_then_splits() -> None:
    keys = [f"data/part-{n:05d}" for n in range(3000)]
    keys, _log, first_after = _prober(keys)
    ranges = key_ranges(first_after, "data/", keys[0], target=3, budget=64)
    assert len(ranges) >= 3
    _covered_once(keys, ranges)
    sizes = [sum(r.holds(k) for k in keys) for r in ranges]
    assert all(sizes), sizes


def test_budget_bounds_the_probes_and_still_covers_every_key() -> None:
    keys = [f"x{random.Random(n).random():.12f}" for n in range(2000)]
    keys, log, first_after = _prober(keys)
    ranges = key_ranges(first_after, "", keys[0], target=1000, budget=5)
    assert len(log) <= 5
    _covered_once(keys, ranges)


def test_a_key_equal_to_a_stem_and_keys_beyond_high_are_kept() -> None:
    keys = ["p/a", "p/a/1", "p/a/2", "p/b", "p/a" + HIGH + "z"]
    keys, _log, first_after = _prober(keys)
    ranges = key_ranges(first_after, "p/", keys[0], target=10, budget=50)
    _covered_once(keys, ranges)


def test_single_key_prefix_is_one_unbounded_range() -> None:
    _keys, _log, first_after = _prober(["p/only"])
    assert key_ranges(first_after, "p/", "p/only", target=8, budget=10) == \
        [KeyRange(None, None)]


def test_ranges_between_are_contiguous() -> None:
    assert ranges_between([]) == [KeyRange(None, None)]
    assert ranges_between(["a", "b"]) == [KeyRange(None, "a" + HIGH, "a"),
                                          KeyRange("a" + HIGH, None, "b")]


def test_key_range_pickles() -> None:
    r = KeyRange("a", "b")
    assert pickle.loads(pickle.dumps(r)) == r


TREE = {"/": ["/a", "/b"], "/a": ["/a/1", "/a/2", "/a/3"], "/b": [], "/a/1": ["/a/1/x"],
        "/a/2": [], "/a/3": [], "/a/1/x": []}


def test_balance_splits_breadth_first_until_the_target() -> None:
    listed: list[str] = []

    def children(node: str) -> list[str]:
        listed.append(node)
        return TREE[node]

    assert balance(["/"], children, target=3, budget=10) == ["/b", "/a/1", "/a/2", "/a/3"]
    assert listed == ["/", "/a"]


def test_balance_stops_at_the_budget_and_drops_unreadable() -> None:
    assert balance(["/"], lambda n: TREE[n], target=100, budget=1) == ["/a", "/b"]
    assert balance(["/a", "/b"], lambda n: None if n == "/a" else TREE[n],
                   target=100, budget=2) == []


def test_balance_of_a_tree_listed_whole_on_the_driver_is_empty() -> None:
    assert balance(["/"], lambda n: TREE[n], target=100, budget=100) == []


def test_many_subtrees_are_dealt_into_a_few_tasks_each_listed_once() -> None:
    subtrees = [f"d{n:03d}" for n in range(200)]
    groups = grouped(subtrees, 8)
    assert len(groups) == 8 and {len(g) for g in groups} == {25}
    assert sorted(s for g in groups for s in g) == subtrees
    assert grouped(["a", "b"], 8) == [("a",), ("b",)]
    assert grouped([], 8) == []


def test_auto_counts_a_local_tree_by_names_up_to_its_limit(tmp_path: Path) -> None:
    """``more_entries_than``: files and directories count, the state folder and what a
    link points to do not (a link to its own tree would count forever)."""
    from distcp.spark.listing import more_entries_than

    for d in range(3):
        (tmp_path / f"d{d}").mkdir()
        for n in range(4):
            (tmp_path / f"d{d}" / f"f{n}").write_bytes(b"x")
    (tmp_path / ".pydistcp" / "staging").mkdir(parents=True)
    (tmp_path / "d0" / "loop").symlink_to(tmp_path)
    assert more_entries_than(str(tmp_path), 15)  # 3 dirs + 12 files + 1 link = 16
    assert not more_entries_than(str(tmp_path), 16)
    assert not more_entries_than(str(tmp_path / "missing"), 0)
