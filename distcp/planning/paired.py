"""Plan a local tree by walking source and target side by side (driver and executor).

Each subtree of the source and of the target is walked side by side, their entries
paired by relative path (no listing DataFrames, no join): in planning tasks on Spark,
or in this process for the driver's paired walk (``treeplans``).

Both walks yield the same order (depth first, names sorted: ``treelisting.sort_key``),
so pairing them is a merge, as rclone's march does it: one Spark job of planning tasks
instead of two listings shuffled into a sort-merge join and a planning stage after it.
The pairs are what the join gives (``distcp.spark.planning._joined``): a source entry
with the target entry at its relative path, either alone where the other side has
nothing, and a source entry not copied alone; they go through the same ``plan_rows``.
The walks' entries reach it as they are, never made listing rows and read back (a
tenth of a no-op's planning time).

The driver lists the top of both trees (``distcp.planning.treeplans.paired_items``): the
source's top down to its subtrees, and the target's down to the same cut. A subtree's
own entry is paired in its task (its source walk yields it only when it can be listed,
as the driver's walk does) with the target entry at that path, which the driver
found; the target's walk of the subtree leaves its own first entry out.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from distcp import collection
from distcp.copying.taskenv import applied_environment
from distcp.planning import joined as jp
from distcp.storage import filesystems as fsutil
from distcp.storage import treelisting as tl

Row = Mapping[str, Any]
V = TypeVar("V")
Pair = tuple[jp.Entry | None, jp.Entry | None]
#: A pair of the trees' tops as the driver listed them (listing rows: they travel).
RowPair = tuple[Row | None, Row | None]


@dataclass(frozen=True)
class PairedTask:
    """One subtree at ``rel`` below both roots: its source listing task (None: only the
    target has a directory there), its target listing task (None: the target has no
    directory there), and what the driver listed at ``rel`` itself: for a source
    subtree, the target's entry there (its walk's own then left out); for a target
    subtree, a source file there (a conflict the plan must see)."""

    rel: str
    source: tl.ListingTask | None
    target: tl.ListingTask | None
    target_row: dict[str, Any] | None = None
    source_row: dict[str, Any] | None = None


@dataclass(frozen=True)
class PairedItem:
    """What one planning task plans: pairs the driver made of the trees' tops, and
    subtrees to walk."""

    top: tuple[RowPair, ...] = ()
    tasks: tuple[PairedTask, ...] = ()


def run_paired(rule: jp.JoinRule, roots: tuple[str, str], item: PairedItem
               ) -> Iterator[Any]:
    """``frame_of`` runner: the item's plan rows (``jp.OUT_SCHEMA`` batches), with the
    client's task variables applied and the cyclic collector paused."""
    with applied_environment(rule.env), collection.paused():
        yield from jp.planned_batches(rule, item_pairs(item, *roots))


def item_pairs(item: PairedItem, src_root: str, dst_root: str) -> Iterator[Pair]:
    for s, t in item.top:
        yield _entry(s), _entry(t)
    for task in item.tasks:
        yield from task_pairs(task, src_root, dst_root)


def task_pairs(task: PairedTask, src_root: str, dst_root: str) -> Iterator[Pair]:
    """The subtree's pairs in the walk's order, then the source's entries not copied
    (each alone, as the join leaves them); the target's unreadable entries count as
    absent, as in the target's listing."""
    skipped: list[fsutil.Skipped] = []
    yield from merged(_side(task.source, task.source_row, task.rel, src_root, skipped),
                      _side(task.target, task.target_row, task.rel, dst_root, []),
                      _walk_order)
    yield from ((s, None) for s in skipped)


def source_entries(item: PairedItem,
                   files: Callable[[str, os.stat_result], os.stat_result | None]
                   = fsutil.raw_stat) -> Iterator[jp.Entry]:
    """The source's entries of an item whose target is not walked (the driver listed
    no target top: ``--incremental``), in no particular order: the top's, then each
    subtree's, its entries not copied last. A regular file's value is its stat, or
    nothing where ``files`` accounts for it (``fsutil.walk_local``)."""
    for s, _t in item.top:
        if s is not None:
            yield tl.entry_of(s)
    for task in item.tasks:
        skipped: list[fsutil.Skipped] = []
        if task.source is not None:
            yield from tl.tree_entries(task.source, skipped, files)
        yield from skipped


def _entry(row: Row | None) -> jp.Entry | None:
    """A listing row of the driver's as the walk's value."""
    return tl.entry_of(row) if row is not None else None


def _side(walk: tl.ListingTask | None, row: dict[str, Any] | None, rel: str, root: str,
          skipped: list[fsutil.Skipped]) -> Iterator[tuple[str, jp.Entry]]:
    """One side's entries in the walk's order, each with its path relative to ``root``:
    the driver's ``row`` at ``rel``, then the walk of the subtree (its own entry left out
    where ``row`` stands for it)."""
    if row is not None:
        yield rel, tl.entry_of(row)
    if walk is not None:
        walked = _relative(tl.tree_entries(walk, skipped, fsutil.raw_stat), root)
        if row is not None:
            next(walked, None)  # the subtree's own entry: the driver's row has it
        yield from walked


def _relative(entries: Iterator[tuple[str, Any]], root: str
              ) -> Iterator[tuple[str, jp.Entry]]:
    cut = len(root.rstrip("/")) + 1
    for entry in entries:
        yield entry[0][cut:], entry


def _walk_order(rel: str) -> str:
    return tl.sort_key(tl.TREE, rel)


def merged(left: Iterator[tuple[str, V]], right: Iterator[tuple[str, V]],
           order: Callable[[str], str] = str) -> Iterator[tuple[V | None, V | None]]:
    """Two walks in one order merged into pairs by key; an entry alone where the other
    walk has nothing at its key. ``order``: what makes two keys that differ comparable
    in the walks' order (by default the keys themselves). Keys are first compared as they
    are, so two trees alike, a no-op rerun's, make no ordering key at all (each side's
    ``tl.sort_key`` was a copy of every path): a cold no-op rerun of 300,000 files took
    1.23 s instead of 1.38 s (benchmarks/RESULTS.md, 2026-12-04, "The paired walk")."""
    a, b = next(left, None), next(right, None)
    while a is not None and b is not None:
        if a[0] == b[0]:
            yield a[1], b[1]
            a, b = next(left, None), next(right, None)
        elif order(a[0]) < order(b[0]):
            yield a[1], None
            a = next(left, None)
        else:
            yield None, b[1]
            b = next(right, None)
    while a is not None:
        yield a[1], None
        a = next(left, None)
    while b is not None:
        yield None, b[1]
        b = next(right, None)
