"""Two walks in the walk's order paired by relative path (``distcp.planning.paired``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from distcp.planning.joined import Unchanged
from distcp.planning.paired import PairedItem, PairedTask, merged, task_pairs
from distcp.planning.published import Published
from distcp.storage import treelisting as tl
from distcp.storage.filesystems import local_status, scandir_entries, walk_local


def keyed(*rels: str) -> Any:
    return iter([(tl.sort_key(tl.TREE, r), {"path": r}) for r in rels])


def names(pairs: Any) -> list[tuple[str | None, str | None]]:
    return [(s["path"] if s else None, t["path"] if t else None) for s, t in pairs]


def subtree_pairs(tmp_path: Path, src_files: tuple[str, ...],
                  dst_files: tuple[str, ...]) -> list[tuple[Any, Any]]:
    """Writes both trees under ``tmp_path`` and pairs the subtree ``d`` as a Spark
    planning task would: both sides walked from ``d``, the target's own entry the
    driver's row."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    for root, files in ((src, src_files), (dst, dst_files)):
        for rel in files:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(rel)

    def task(root: Path) -> tl.ListingTask:
        return tl.ListingTask(tl.TREE, str(root), str(root), "skip", start=str(root / "d"))

    row = tl.row_of(str(dst / "d"), local_status(str(dst / "d")))
    return list(task_pairs(PairedTask("d", task(src), task(dst), target_row=row),
                           str(src), str(dst)))


def relative(tmp_path: Path, pairs: list[tuple[Any, Any]]) -> list[tuple[str | None, str | None]]:
    """The pairs of ``subtree_pairs`` as relative paths, None for a side without one."""
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    return [(s[0][len(src) + 1:] if isinstance(s, tuple) else None,
             t[0][len(dst) + 1:] if isinstance(t, tuple) else None) for s, t in pairs]


def test_entries_at_one_path_pair_and_the_rest_stand_alone() -> None:
    assert names(merged(keyed("a", "a/x", "a-b", "c"), keyed("a", "a/y", "b", "c"))) == [
        ("a", "a"), ("a/x", None), (None, "a/y"), ("a-b", None), (None, "b"), ("c", "c")]


def test_relative_paths_pair_in_the_walks_order_given_by_order() -> None:
    """The walks key entries by relative path and ``merged`` orders two that differ
    through ``order``: 'a/x' comes before 'a-b' in a depth-first walk, though '-' sorts
    before '/' as plain text, which would put 'a-b' before 'a/y'."""
    def rel(*rels: str) -> Any:
        return iter([(r, {"path": r}) for r in rels])

    expected = [("a", "a"), ("a/x", None), (None, "a/y"), ("a-b", None), (None, "b"),
                ("c", "c")]
    assert names(merged(rel("a", "a/x", "a-b", "c"), rel("a", "a/y", "b", "c"),
                        lambda r: tl.sort_key(tl.TREE, r))) == expected
    assert names(merged(rel("a", "a/x", "a-b", "c"), rel("a", "a/y", "b", "c"))) != expected


def test_a_file_on_both_sides_pairs_though_a_folder_beside_it_sorts_otherwise_as_text(
        tmp_path: Path) -> None:
    """'d/a-b' on both sides follows the folder 'd/a' in the walks, though '-' sorts
    before '/' as text: the subtree's walks are merged in the walk's order, so it pairs
    (merged by text it would stand alone on both sides, copied again)."""
    pairs = subtree_pairs(tmp_path, ("d/a/x", "d/a-b"), ("d/a/y", "d/a-b"))
    assert relative(tmp_path, pairs) == [("d", "d"), ("d/a", "d/a"), ("d/a/x", None),
                                         (None, "d/a/y"), ("d/a-b", "d/a-b")]


def test_one_side_empty() -> None:
    assert names(merged(keyed(), keyed("a", "a/b"))) == [(None, "a"), (None, "a/b")]
    assert names(merged(keyed("a"), keyed())) == [("a", None)]


def test_a_subtree_task_pairs_its_root_with_the_drivers_row_and_walks_both(
        tmp_path: Path) -> None:
    """The source walk yields the subtree's own entry; the target's is the driver's row
    (its walk's own left out), so it is paired once."""
    pairs = subtree_pairs(tmp_path, ("d/a", "d/e/b"), ("d/a", "d/z"))
    assert relative(tmp_path, pairs) == [("d", "d"), ("d/a", "d/a"), ("d/e", None),
                                         ("d/e/b", None), (None, "d/z")]
    # the walks' own values, not listing rows: a file's stat itself (its size), a
    # directory's status
    source_file, target_file = pairs[1]
    assert isinstance(source_file, tuple) and isinstance(source_file[1], os.stat_result)
    assert isinstance(target_file, tuple) and target_file[1].st_size == 3
    assert isinstance(pairs[0][1], tuple) and pairs[0][1][1].is_dir


def test_the_manifests_unchanged_files_are_counted_in_the_walk_the_rest_paired(
        tmp_path: Path) -> None:
    """``--incremental``'s walk (``Published``): a file the manifest holds at its size
    and mtime never leaves the walk, only its number (last); a changed one, a new one
    and the directories come paired as before; ``count=False`` (``-v``, ``--dry-run``:
    every decision kept) pairs them all."""
    src = tmp_path / "src"
    for rel in ("d/same", "d/e/same", "d/grown", "d/new"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(rel)

    def row(rel: str, grown: int = 0) -> tuple[int, float]:
        st = os.stat(src / rel)
        return st.st_size + grown, st.st_mtime

    rows = {"d/same": row("d/same"), "d/e/same": row("d/e/same"), "d/grown": row("d/grown", 1)}
    task = tl.ListingTask(tl.TREE, str(src), str(src), "skip", start=str(src / "d"))
    item = PairedItem(tasks=(PairedTask("d", task, None),))

    def walked(count: bool) -> list[Any]:
        out = []
        for s, t in Published(rows, str(src), "/dst", count=count).pairs(item):
            if isinstance(s, Unchanged):
                out.append(s)
            else:
                assert isinstance(s, tuple)
                out.append((s[0][len(str(src)) + 1:], t[0] if isinstance(t, tuple) else None))
        return out

    assert sorted(walked(True)[:-1]) == [
        ("d", None), ("d/e", None), ("d/grown", "/dst/d/grown"), ("d/new", None)]
    assert walked(True)[-1] == Unchanged(2)
    assert sorted(walked(False)) == [
        ("d", None), ("d/e", None), ("d/e/same", "/dst/d/e/same"),
        ("d/grown", "/dst/d/grown"), ("d/new", None), ("d/same", "/dst/d/same")]


def test_a_walks_file_value_of_none_is_left_out(tmp_path: Path) -> None:
    """``walk_local``: a file its ``files`` gives None for is accounted for there."""
    for rel in ("a.txt", "b.py", "d/c.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    walked = [p[len(str(tmp_path)) + 1:] for p, _ in walk_local(
        scandir_entries(str(tmp_path), []), "skip", [], frozenset(),
        lambda path, st: None if path.endswith(".py") else st)]
    assert walked == ["a.txt", "d"]
