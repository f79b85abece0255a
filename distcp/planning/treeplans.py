"""Plans of plain trees as the planning tasks make them, and the driver's own (driver).

Two local trees are planned by walking both side by side (``distcp.planning.paired``):
``paired_items`` cuts them into the planning tasks' items; ``DriverPairs`` (``--listing
driver``, and ``auto`` below its cut) walks those items in this process without Spark.
Either way the decided values become the driver planner's ``DatasetPlan``
(``assembled``). A plain copy of more than ``HELD`` files is written to a copy-rows file
(``distcp.copying.copyrows``) instead of being held, so the copy and the publish take the
thin path (``distcp.spark.keptcopy``); ``kept_walked`` does the same for a plan the
driver's own walk made. Nothing here needs Spark (``distcp.spark.planning`` runs the
same items and joins on it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from distcp import timeline
from distcp.configuration import CopyConfiguration
from distcp.copying.copyrows import CHUNK, CopyRows, CopyRowsWriter
from distcp.datasets.recursive import RecursiveCopyableDataset
from distcp.errors import PlanningError
from distcp.model import CopyableDirectory
from distcp.planning import beside
from distcp.planning import joined as jp
from distcp.planning import paired as pp
from distcp.planning.listing import keeps_mtimes, target_links, target_root
from distcp.planning.listsplit import grouped
from distcp.planning.plan import Action, DatasetPlan, Plan, skips_same
from distcp.planning.published import Published
from distcp.planning.strategy import DRIVER_PAIRED_WALK, Strategy
from distcp.planning.tops import Found, tree_tasks
from distcp.state.store import StateStore, urn_key
from distcp.storage import filesystems as fsutil
from distcp.storage import spec_for, storage_for
from distcp.storage import treelisting as tl
from distcp.storage.base import Tree


@dataclass(frozen=True)
class JoinedPlan:
    """A dataset planned on Spark or by the driver's paired walks: its plan (skips
    counted, kept only when asked), the entries not copied, files seen at the source,
    and rows the driver collected from Spark."""

    plan: DatasetPlan
    skipped: tuple[fsutil.Skipped, ...]
    seen: int
    rows: int
    strategy: Strategy
    #: Listings of the destination it made: none when the manifest stood for it.
    listings: int = 1


#: Pairs of the trees' tops sent with the planning tasks at most (they travel in the
#: job's closure); a tree whose top holds more is planned by the join.
TOP_PAIRS = 10_000


def copies_folder(copies_to: str, ds: RecursiveCopyableDataset) -> str:
    """Where a dataset's files to copy are kept ("": collected), a folder each, under
    the run's ``copies_to`` ("": nowhere)."""
    if not copies_to or ds.whole:  # a whole file set is published all or nothing
        return ""
    return fsutil.join(copies_to, urn_key(ds.urn)[:16])


class DriverPairs:
    """``plan_all``'s planner of two local trees under ``--listing driver`` (and
    ``auto`` where it leaves a tree to the driver): the same paired walks as the
    planning tasks (``distcp.planning.paired``), run in this process, without Spark. The
    files skipped are counted where they are decided (kept only when every decision is
    shown), so a file identical to its target costs two ``stat`` calls and no object
    (``plan.skips_same``). With ``copies_to`` (the thin path allowed:
    ``run.choice.keeps_copies``) a dataset with more than ``HELD`` files to copy writes them to
    a copy-rows file as the planning tasks do, a chunk at a time, so the driver holds a
    chunk, not every file, and the copy stays on the executors (``spark.keptcopy``).
    With ``state`` it also plans ``--incremental`` (without ``--delete``): the source
    walked alone, each entry paired with the manifest's row (``planning.published``).
    None (the driver's own walk plans it) when a side is not a local tree or the top is
    too wide to pair (``TOP_PAIRS``)."""

    def __init__(self, keep_skips: bool = False, copies_to: str = "",
                 why: Callable[[Tree], str] = lambda tree: "two local trees",
                 held: int | None = None, state: StateStore | None = None) -> None:
        """``why``: what made the run plan a source tree here rather than on Spark;
        ``held``: files to copy held before the rest are kept (None: ``HELD``)."""
        self.keep_skips, self.copies_to, self.why = keep_skips, copies_to, why
        self.held, self.state = held, state

    def plans(self, ds: Any, cfg: CopyConfiguration) -> bool:
        if not jp.plannable(ds, cfg, manifest=self.state is not None):
            return False
        src = storage_for(ds.root, dict(cfg.src_options)).tree(ds.root)
        dst = storage_for(ds.destination_root, dict(cfg.dst_options)).tree(ds.destination_root)
        return src.kind == tl.TREE == dst.kind

    def __call__(self, ds: RecursiveCopyableDataset, cfg: CopyConfiguration
                 ) -> JoinedPlan | None:
        root_dir = ds.root_directory(cfg)  # the source exists (else the usual error)
        source = storage_for(ds.root, dict(cfg.src_options)).tree(ds.root)
        src = source.path.rstrip("/") or "/"
        published = self._published(ds, cfg, src)
        found_target = target_root(ds, cfg, ds.destination_root) if published is None \
            else None
        target = found_target[0] if found_target is not None else None
        if target is not None and target.kind != tl.TREE:
            return None
        skipped: list[fsutil.Skipped] = []
        found = replace(tree_tasks(source.url_of(src), src, cfg.links,
                                   cfg.src_options, DRIVER_CUT, skipped), width=WALKERS)
        items = paired_items(found, src, target, target_links(cfg))
        if items is None:
            return None
        # the manifest holds the sources' own mtimes
        rule = jp.JoinRule(ds, cfg, tl.TREE, tl.TREE, self.keep_skips,
                           mtimes_kept=published is not None
                           or keeps_mtimes(ds.destination_root, cfg))
        roots = (src, (target.path.rstrip("/") or "/") if target is not None else "")
        walk = partial(_pairs_of, roots=roots, published=published)
        folder, options = copies_folder(self.copies_to, ds), dict(cfg.dst_options)
        kept = _Held(folder, options, self.held)

        def beside_walk() -> tuple[list[tuple[str, str, Any]], _Held]:
            theirs = _Held(folder, options, self.held, BESIDE_ROWS)
            walked = _walked(rule, items[-1:], walk, theirs), theirs.finished()
            timeline.mark("walked beside")
            return walked

        if len(items) > 2:  # the top's pairs and a group here, the last group beside
            with beside.shared(beside_walk) as wait:
                values = _walked(rule, items[:-1], walk, kept)
                timeline.mark("walked here")
                theirs = wait()
            if theirs is None:  # no child could walk it
                values += _walked(rule, items[-1:], walk, kept)
            else:
                values += theirs[0]
                values += kept.joined(theirs[1])
        else:
            values = _walked(rule, items, walk, kept)
        values += kept.close()
        if published is None:
            return assembled(ds, cfg, rule, root_dir, values, skipped, 0,
                             Strategy(DRIVER_PAIRED_WALK, self.why(source)))
        return replace(assembled(ds, cfg, rule, root_dir, values, skipped, 0, Strategy(
            DRIVER_PAIRED_WALK, "--incremental: the source walked, the state's manifest "
            "for the target")), listings=0)

    def _published(self, ds: RecursiveCopyableDataset, cfg: CopyConfiguration, src: str
                   ) -> Published | None:
        """The manifest as the target, under ``--incremental`` (else None)."""
        if self.state is None or not cfg.incremental or cfg.delete:
            return None
        dst = storage_for(ds.destination_root, dict(cfg.dst_options)).tree(ds.destination_root)
        rows = self.state.sizes_of(self.state.load(ds.urn), dst.path, keep=not cfg.dry_run)
        timeline.mark("manifest read")
        return Published(rows, src, dst.path, skips_same(cfg.overwrite, cfg.compare),
                         count=not self.keep_skips)


#: Files to copy a dataset planned on the driver holds before it writes them to a
#: copy-rows file and takes the thin path: one chunk. A copy that small costs less
#: collected than written, read back and reported through files.
HELD = CHUNK


def _walked(rule: jp.JoinRule, items: Sequence[pp.PairedItem],
            walk: Callable[[pp.PairedItem], Iterable[jp.Joined]], kept: _Held
            ) -> list[tuple[str, str, Any]]:
    """The plan rows of ``items``' paired walks; the files to copy that ``kept`` takes
    are left out."""
    values: list[tuple[str, str, Any]] = []
    for item in items:
        for kind, sort, value, size in jp.plan_rows(rule, walk(item)):
            if kind == jp.COPY:
                beside.copies_ahead()  # the run's parent may import what copying needs
                if kept.add(sort, value, size):
                    continue
            values.append((kind, sort, value))
    return values


def _pairs_of(item: pp.PairedItem, roots: tuple[str, str], published: Published | None
              ) -> Iterable[jp.Joined]:
    """One item's pairs: both trees walked, or the source's paired with the manifest."""
    return pp.item_pairs(item, *roots) if published is None else published.pairs(item)


#: The copy-rows file of the group of subtrees a forked child walks (``WALKERS``).
BESIDE_ROWS = "driver-beside.parquet"


class _Held:
    """A driver-planned dataset's files to copy: held until there are more than
    ``HELD``, then written to ``folder``'s copy-rows file (``name``) as they come (a
    chunk held at most); ``folder`` "": always held."""

    def __init__(self, folder: str, options: dict[str, Any], most: int | None = None,
                 name: str = "driver.parquet") -> None:
        self.most = HELD if most is None else max(HELD, most)
        self.writer = CopyRowsWriter(fsutil.join(folder, name), options) if folder else None
        self.held: list[tuple[str, Action, int]] = []
        self.spilled = False
        self.rows: CopyRows | None = None

    def add(self, sort: str, action: Action, size: int) -> bool:
        """Whether ``action`` was taken (False: the caller keeps it as a value)."""
        if self.writer is None:
            return False
        self.held.append((sort, action, size))
        if self.spilled or len(self.held) > self.most:
            self._spill()
        return True

    def _spill(self) -> None:
        assert self.writer is not None
        self.spilled = True
        for _, each, _ in self.held:  # copy tasks read files, not actions
            self.writer.add(each.file)
        self.held.clear()

    def finished(self) -> _Held:
        """This, its file (if written) closed: what a child sends back (the writer,
        holding an open file, stays in the child)."""
        if self.spilled:
            assert self.writer is not None
            self.rows = self.writer.close()
        self.writer = None
        return self

    def joined(self, other: _Held) -> list[tuple[str, str, Any]]:
        """``other``'s files (a child's share, ``finished``) taken as if they had come
        here: kept in its file if it wrote one, and then this one's too, so that a
        dataset's files are all kept or all held, as one walk would have left them."""
        if other.spilled and self.writer is not None and not self.spilled:
            self._spill()
        values: list[tuple[str, str, Any]] = []
        for sort, action, size in other.held:
            if not self.add(sort, action, size):
                values.append((jp.COPY, sort, action))
        return values + ([(jp.KEPT, "", other.rows)] if other.rows is not None else [])

    def close(self) -> list[tuple[str, str, Any]]:
        """The values left: the files held as copies, or the copy-rows file written."""
        if self.spilled:
            assert self.writer is not None
            rows = self.writer.close()
            return [(jp.KEPT, "", rows)] if rows is not None else []
        return [(jp.COPY, sort, action) for sort, action, _ in self.held]


def kept_walked(plan: Plan, datasets: Sequence[Any], cfg: CopyConfiguration,
                copies_to: str, held: int | None = None) -> Plan:
    """``plan`` with each plain dataset the driver's own walk planned (an object store
    on a side, or a top too wide to pair) that has more than ``HELD`` files to copy
    written to a copy-rows file, as ``DriverPairs`` writes its own: the copy then takes
    the thin path, its results never collected (``held``: more than that many, as
    ``DriverPairs``'s). Not where staging is a multipart
    upload: completing uploads read back from results files cost more than it saves
    (docs/guide/object-stores.md)."""
    if not copies_to or spec_for(cfg.destination, dict(cfg.dst_options)).capabilities.multipart:
        return plan
    by_urn = {ds.urn: ds for ds in datasets}
    out: list[DatasetPlan] = []
    for d in plan.datasets:
        ds = by_urn.get(d.urn)
        folder = copies_folder(copies_to, ds) if ds is not None and jp.plannable(ds, cfg) else ""
        if d.kept or len(d.copy) <= (HELD if held is None else max(HELD, held)) \
                or not folder:
            out.append(d)
            continue
        rows = _Held(folder, dict(cfg.dst_options))
        for action in d.copy:
            rows.add("", action, action.file.origin.size)
        out.append(replace(d, copy=(), kept=tuple(v for _, _, v in rows.close())))
    return Plan(tuple(out))


#: Subtrees the driver's paired planning cuts a tree into: only where the walk starts
#: pairing (``WALKERS`` processes walk them).
DRIVER_CUT = 4
#: How many groups of those subtrees the driver's paired walk deals: the last one is
#: walked by a forked child while this process walks the others (``beside.shared``),
#: the two cores' stat calls and comparisons at once. A no-op rerun of 300,000 files
#: planned in 2.84 s on one core (benchmarks/RESULTS.md, 2026-11-29). Where this
#: process may not fork, it walks all the groups.
WALKERS = 2


def paired_items(found: Found, src_root: str, dst: Tree | None, dst_links: str
                 ) -> list[pp.PairedItem] | None:
    """The planning tasks of two local trees: the source's top (``found``, listed by
    the driver) paired with the target's (``dst``, None: no target yet) down to the
    same cut, and a task per subtree of either (``distcp.planning.paired``), dealt into
    ``found.width`` tasks; None when the top holds more than ``TOP_PAIRS`` names."""
    src_cut = len(src_root.rstrip("/")) + 1
    starts = {t.start[src_cut:]: t for t in found.tasks if t.start is not None}
    expanded = {p[src_cut:] for p, st in found.entries if st.is_dir}
    top = _TargetTop(dst, dst_links, starts)
    if dst is not None:
        top.list(expanded)
    top_s = {p[src_cut:]: tl.row_of(p, st) for p, st in found.entries}
    # a source file where only the target has a directory: paired in that one's task
    beside = {top.rel(sub): top_s.pop(top.rel(sub), None) for sub in top.only}
    names = sorted(top_s.keys() | top.rows.keys(), key=lambda r: tl.sort_key(tl.TREE, r))
    if len(names) > TOP_PAIRS:
        return None
    tasks = [pp.PairedTask(rel, t, top.task(top.under[rel]) if rel in top.under else None,
                           top.at_start.get(rel)) for rel, t in starts.items()]
    tasks += [pp.PairedTask(top.rel(sub), None, top.task(sub), source_row=beside[top.rel(sub)])
              for sub in top.only]
    pairs = tuple((top_s.get(rel), top.rows.get(rel)) for rel in names)
    groups = grouped(tasks, found.width or len(tasks)) if tasks else []
    return [pp.PairedItem(pairs)] + [pp.PairedItem(tasks=g) for g in groups]


class _TargetTop:
    """The target's top as ``paired_items`` pairs it with the source's: its rows down
    to the source's cut (``rows``), the rows and subtrees at the source's task starts
    (``at_start``, ``under``: paired in those tasks), and the subtrees only the target
    has (``only``: listed whole by a task of their own)."""

    def __init__(self, dst: Tree | None, links: str, starts: Mapping[str, Any]) -> None:
        self.dst, self.links, self.starts = dst, links, starts
        self.root = (dst.path.rstrip("/") or "/") if dst is not None else ""
        self.cut = len(self.root.rstrip("/")) + 1
        self.rows: dict[str, dict[str, Any]] = {}
        self.under: dict[str, tl.Subtree] = {}
        self.at_start: dict[str, dict[str, Any]] = {}
        self.only: list[tl.Subtree] = []

    def rel(self, sub: tl.Subtree) -> str:
        return sub.path[self.cut:]

    def list(self, expanded: set[str]) -> None:
        """Walk the target's top, level by level, down to where the source's stops
        (``expanded``: the source's directories the driver listed)."""
        root_st = os.stat(self.root)
        frontier = [(self.root, frozenset({(root_st.st_dev, root_st.st_ino)}))]
        while frontier:
            path, ancestors = frontier.pop()
            for item in tl.local_level(path, self.links, [], ancestors,
                                       top=path == self.root) or ():
                below = self._take(item, expanded)
                if below is not None:
                    frontier.append((below.path, frozenset(below.ancestors)))

    def _take(self, item: tl.Subtree | tuple[str, Any], expanded: set[str]
              ) -> tl.Subtree | None:
        """File one entry of the target's top; a subtree to list further, else None."""
        entry = (item.path, item.status) if isinstance(item, tl.Subtree) else item
        rel = entry[0][self.cut:]
        if rel in self.starts:  # paired in the subtree's task
            self.at_start[rel] = tl.row_of(*entry)
            if isinstance(item, tl.Subtree):
                self.under[rel] = item
            return None
        if isinstance(item, tl.Subtree) and rel not in expanded:
            self.only.append(item)  # listed whole by a task, its own entry included
            return None
        self.rows[rel] = tl.row_of(*entry)
        return item if isinstance(item, tl.Subtree) else None

    def task(self, sub: tl.Subtree) -> tl.ListingTask:
        """The listing task of one of the target's subtrees."""
        assert self.dst is not None
        return tl.ListingTask(tl.TREE, self.dst.url_of(self.root), self.root, self.links,
                              start=sub.path, ancestors=sub.ancestors,
                              options=dict(self.dst.storage.options))


def assembled(ds: RecursiveCopyableDataset, cfg: CopyConfiguration, rule: jp.JoinRule,
               root_dir: CopyableDirectory, values: list[tuple[str, str, Any]],
               skipped: list[fsutil.Skipped], collected: int, strategy: Strategy
               ) -> JoinedPlan:
    """The planned values as the driver planner's DatasetPlan (its order: the walk's
    for entries, deepest first for deletions); the first conflict raised as it would.
    ``collected``: the rows they came in from Spark (0: planned in this process)."""
    by_kind: dict[str, list[tuple[str, Any]]] = {}
    for kind, sort, value in values:
        by_kind.setdefault(kind, []).append((sort, value))

    def ordered(kind: str) -> list[Any]:
        return [value for _, value in sorted(by_kind.get(kind, []), key=lambda e: e[0])]

    errors = sorted(by_kind.get(jp.ERROR, []), key=lambda e: (e[1][0], e[0]))
    if errors:
        _, (_, message, path) = errors[0]
        raise PlanningError(message, path=path)
    counts = [value for _, value in by_kind.get(jp.COUNT, [])]
    copy: list[Action] = ordered(jp.COPY)
    doomed = sorted((u for _, u in by_kind.get(jp.DELETE, [])),
                    key=lambda u: (-u.count("/"), u))
    kept = tuple(sorted((r for _, r in by_kind.get(jp.KEPT, [])), key=lambda r: r.url))
    plan = DatasetPlan(ds.urn, ds.destination_root, tuple(copy), tuple(ordered(jp.SKIP)),
                       tuple(doomed), (root_dir, *ordered(jp.DIRECTORY)),
                       skips_counted=sum(s for _, s in counts), kept=kept)
    return JoinedPlan(plan, (*skipped, *ordered(jp.NOT_COPIED)),
                      sum(f for f, _ in counts), collected, strategy)
