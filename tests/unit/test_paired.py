"""Two walks in the walk's order paired by relative path (``distcp.planning.paired``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from distcp.planning.paired import PairedTask, merged, task_pairs
from distcp.storage import treelisting as tl
from distcp.storage.filesystems import local_status


def keyed(*rels: str) -> Any:
    return iter([(tl.sort_key(tl.TREE, r), {"path": r}) for r in rels])


def names(pairs: Any) -> list[tuple[str | None, str | None]]:
    return [(s["path"] if s else None, t["path"] if t else None) for s, t in pairs]


def test_entries_at_one_path_pair_and_the_rest_stand_alone() -> None:
    assert names(merged(keyed("a", "a/x", "a-b", "c"), keyed("a", "a/y", "b", "c"))) == [
        ("a", "a"), ("a/x", None), (None, "a/y"), ("a-b", None), (None, "b"), ("c", "c")]


def test_one_side_empty() -> None:
    assert names(merged(keyed(), keyed("a", "a/b"))) == [(None, "a"), (None, "a/b")]
    assert names(merged(keyed("a"), keyed())) == [("a", None)]


def test_a_subtree_task_pairs_its_root_with_the_drivers_row_and_walks_both(
        tmp_path: Path) -> None:
    """The source walk yields the subtree's own entry; the target's is the driver's row
    (its walk's own left out), so it is paired once."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    for root, files in ((src, ("d/a", "d/e/b")), (dst, ("d/a", "d/z"))):
        for rel in files:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(rel)

    def task(root: Path) -> tl.ListingTask:
        return tl.ListingTask(tl.TREE, str(root), str(root), "skip", start=str(root / "d"))

    row = tl.row_of(str(dst / "d"), local_status(str(dst / "d")))
    pairs = list(task_pairs(PairedTask("d", task(src), task(dst), target_row=row),
                            str(src), str(dst)))
    got = [(s[0][len(str(src)) + 1:] if isinstance(s, tuple) else None,
            t[0][len(str(dst)) + 1:] if isinstance(t, tuple) else None) for s, t in pairs]
    assert got == [("d", "d"), ("d/a", "d/a"), ("d/e", None), ("d/e/b", None), (None, "d/z")]
    # the walks' own values, not listing rows: a file's stat itself (its size), a
    # directory's status
    source_file, target_file = pairs[1]
    assert isinstance(source_file, tuple) and isinstance(source_file[1], os.stat_result)
    assert isinstance(target_file, tuple) and target_file[1].st_size == 3
    assert isinstance(pairs[0][1], tuple) and pairs[0][1][1].is_dir
