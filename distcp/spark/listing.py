"""List a tree as one Spark job, the driver listing only its top (driver and executor).

``listing_frame`` returns the listing as a DataFrame (rows of
``treelisting.ROW_SCHEMA``), never collected here: the next stage (planning as a
join) takes it as it is. Until then ``entries`` adapts it to the walk's
``(path, FileStatus)`` pairs for today's planner, which collects it.

``--listing`` chooses: ``driver`` (the walk, in this process), ``spark`` (this
module wherever the storage can be cut: local trees by subtree, S3 by key range),
``auto``, the default (Spark for a local tree of more than LOCAL_FROM entries when the
run's session opens cheaply, and for an object-store prefix of more than KEYS_FROM keys;
the walk otherwise: measured in benchmarks/bench_scale.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack
from dataclasses import replace
from typing import Any

from distcp.copying.taskenv import applied_environment, task_environment
from distcp.planning.listsplit import grouped, key_ranges, task_target
from distcp.planning.tops import Found, tree_tasks
from distcp.spark.arrow import frame_of
from distcp.spark.schemas import local_frame
from distcp.storage import filesystems as fsutil
from distcp.storage import treelisting as tl
from distcp.storage.base import Tree
from distcp.storage.filesystems import Skipped

#: Probes at most per prefix.
PROBE_BUDGET = 64
#: Keys in one ListObjectsV2 page of a listing task.
PAGE = 1000
#: ``auto``: entries of a local tree from which it is listed and planned on Spark, when
#: the session opens cheaply (``session.opens_cheaply``) and its tasks have more cores
#: than the driver's walk (``run.choice.walks_every_core``). Below, the driver's paired walk
#: is faster (a no-op of 100,000 files: 1.25 s); above, Spark's tasks plan on every core
#: (a million files on the warm engine: no-op 6.8 s against 9.7 s, first copy 113.5 s
#: against 133.2 s).
LOCAL_FROM = 250_000
#: ``auto``: keys under an object-store prefix from which it is listed on Spark. Up to
#: here the driver's listing, read ahead, was faster (100,000 keys: 2.46 s, against
#: 3.52 s by key ranges on Spark; s5cmd 3.04 s), and a copy of more than a chunk of
#: files leaves the driver after planning (``treeplans.kept_walked``); past it, the
#: listing the driver would hold grows with the keys. The driver lists that many keys to
#: tell (kept for the walk when the prefix ends there).
KEYS_FROM = 100_000


def key_tasks(tree: Tree, target: int, first_page: Mapping[str, Any] | None = None,
              page_keys: int = PAGE) -> Found:
    """An object-store prefix: key ranges between probed characters (``key_ranges``)."""
    fs, root, url, options = tree.handle, tree.path, tree.url, tree.storage.options
    found = Found(tl.KEYS)
    page = first_page if first_page is not None else tl.list_page(fs, root, None, page_keys)
    contents = page.get("Contents", [])
    _, stem = tl._bucket_key(fs, root)

    def first_after(key: str) -> str | None:
        got = tl.list_page(fs, root, key, 1).get("Contents", [])
        return str(got[0]["Key"]) if got else None

    ranges = key_ranges(first_after, stem, contents[0]["Key"], target, PROBE_BUDGET) \
        if page.get("IsTruncated") and contents else [None]
    found.tasks = [tl.ListingTask(tl.KEYS, url, root, after=r.after if r else None,
                                  upto=r.upto if r else None, stem=r.stem if r else None,
                                  page=page_keys,
                                  options=dict(options))
                   for r in ranges]
    return found


def listing_frame(spark: Any, tasks: list[tl.ListingTask], width: int | None = None) -> Any:
    """The rows of every task, a DataFrame of ``ROW_SCHEMA``: one Spark task per listing
    task, or per group of them when there are more than ``width``."""
    env = task_environment()
    groups = grouped([replace(t, env=env) for t in tasks], width or len(tasks))
    return frame_of(spark, groups, run_listings, tl.ROW_SCHEMA)


def run_listings(tasks: tuple[tl.ListingTask, ...]) -> Iterator[Any]:
    """Listing tasks, one after another, on an executor, with the client's task
    variables applied."""
    for task in tasks:
        with applied_environment(task.env):
            yield from tl.arrow_batches(task)


class Lister:
    """``plan_all``'s lister, listing by ``--listing``: ``(tree, links, skipped)`` ->
    ``(path, FileStatus)`` pairs in the walk's order, what is not copied appended to
    ``skipped``, as ``Storage.walk`` gives them (trees are keyed by their ``path``).

    ``session`` opens the run's Spark session the first time a listing needs it (it
    then stays open for the copy: the run pays Spark's start once).
    """

    def __init__(self, mode: str, session: Callable[[], Any], target: int | None = None,
                 page: int = PAGE, local_from: int | None = None,
                 cheap: Callable[[], bool] = lambda: True, keys_from: int | None = None
                 ) -> None:
        """``cheap``: whether the run's session opens cheaply (``auto`` lists a local
        tree on Spark only then: a JVM's start costs more than the driver's walk saves)."""
        self.mode, self.session, self.cheap = mode, session, cheap
        #: Tasks to aim for (default: a few per core), keys per listing page and the
        #: entries of a local tree ``auto`` lists on Spark; tests set them small so that
        #: small trees are treated as big ones are.
        self.target, self.page = target, page
        self.local_from = LOCAL_FROM if local_from is None else local_from
        self.keys_from = KEYS_FROM if keys_from is None else keys_from
        #: First pages ``joins`` probed, by tree URL, for the listing that follows.
        self._pages: dict[str, Mapping[str, Any]] = {}
        #: ``auto``'s verdict on each tree probed (it is asked twice per tree), and the
        #: walk of each prefix its probe listed whole, with what the walk skipped.
        self._big: dict[str, bool] = {}
        self._walked: dict[str, tuple[list[tuple[str, Any]], list[Skipped]]] = {}

    def __call__(self, tree: Tree, links: str, skipped: list[Skipped]
                 ) -> Iterable[tuple[str, Any]]:
        kind, first = self._placed(tree)
        if kind is None:
            if tree.path in self._walked:
                walked, walk_skipped = self._walked.pop(tree.path)
                skipped.extend(walk_skipped)
                return iter(walked)
            return tree.storage.walk(tree.url, links, skipped)
        return self._on_spark(tree, kind, links, first, skipped)

    def on_spark(self, tree: Tree) -> bool:
        """Whether ``tree`` was (or is) listed on Spark: ``auto``'s verdict, asked after
        the listing, never listing again."""
        kind = tree.kind if self.mode != "driver" else None
        if kind is None:
            return False
        return self._big.get(tree.path, False) if self.mode == "auto" else True

    def reason(self, tree: Tree) -> str:
        """The fact that put ``tree`` on Spark or on the driver."""
        if self.mode != "auto":
            return f"--listing {self.mode}"
        kind = tree.kind
        if kind is None:
            return "--listing auto: a store whose listing cannot be cut into tasks"
        big = self._big.get(tree.path, False)
        if kind == tl.KEYS:
            return f"--listing auto: {'more than' if big else 'at most'} {self.keys_from:,} keys"
        if big:
            return (f"--listing auto: more than {self.local_from:,} entries, and the "
                    "session opens cheaply")
        return (f"--listing auto: at most {self.local_from:,} entries, a session that "
                "does not open cheaply, or a local master whose cores the driver's walk "
                "uses")

    def _placed(self, tree: Tree) -> tuple[str | None, Mapping[str, Any] | None]:
        """Where a tree is listed: its listing kind when on Spark, None for the driver's
        walk; and an object store's first page, which the tasks' key ranges start from
        (a probe ``joins`` made is taken, not listed again)."""
        kind = tree.kind if self.mode != "driver" else None
        root = tree.path
        if self.mode == "auto":
            if kind is None:
                return None, None
            if root not in self._big:
                if kind == tl.KEYS:
                    self._big[root] = self._more_keys(tree)
                else:
                    # a session that is not cheap keeps the tree here at any size:
                    # counting its entries first cost 0.4 s at 300,000
                    self._big[root] = self.cheap() and more_entries_than(
                        root.rstrip("/") or "/", self.local_from)
            return (kind if self._big[root] else None), None
        if kind != tl.KEYS:
            return kind, None
        first = self._pages.pop(tree.url, None)
        if first is None:  # the key ranges start from the first key
            first = tl.list_page(tree.handle, root, None, 1)
        return kind, first

    def _more_keys(self, tree: Tree) -> bool:
        """Whether the prefix holds more than ``keys_from`` keys: the driver's walk, which
        stops there; the walk of a prefix that ends before is kept for ``__call__``."""
        from distcp.storage.s3.listing import MoreKeys

        skipped: list[Skipped] = []
        try:
            self._walked[tree.path] = (list(tree.storage.walk(
                tree.url, "follow", skipped, most=self.keys_from)), skipped)
        except MoreKeys:
            return True
        return False

    def _on_spark(self, tree: Tree, kind: str, links: str, first: Mapping[str, Any] | None,
                  skipped: list[Skipped]) -> Iterator[tuple[str, Any]]:
        spark = self.session()
        found = self.found(spark, tree, kind, links, first, skipped)
        rows = listing_frame(spark, found.tasks, found.width).collect() if found.tasks else []
        yield from entries(found, rows, skipped)

    def found(self, spark: Any, tree: Tree, kind: str, links: str,
              first: Mapping[str, Any] | None, skipped: list[Skipped]) -> Found:
        """The top of the tree listed here, the listing tasks for the rest."""
        from distcp.spark.session import default_parallelism

        target = self.target or task_target(default_parallelism(spark))
        found = tree_tasks(tree.url, tree.path.rstrip("/") or "/", links,
                           tree.storage.options, target, skipped) \
            if kind == tl.TREE else key_tasks(tree, target, first, self.page)
        return replace(found, width=target)

    def frame(self, tree: Tree, links: str, skipped: list[Skipped]) -> tuple[Any, str]:
        """The whole tree as one DataFrame of ``ROW_SCHEMA`` (the driver's top entries
        and every task's rows), never collected, and its listing kind; entries the
        driver itself could not list go to ``skipped``, the tasks' stay rows."""
        kind = tree.kind
        assert kind is not None, "frame() of a filesystem that cannot be cut"
        spark = self.session()
        first = self._pages.pop(tree.url, None)
        found = self.found(spark, tree, kind, links, first, skipped)
        top = local_frame(spark, [tuple(tl.row_of(p, st)[name] for name, _ in tl.ROW_COLUMNS)
                                  for p, st in found.entries], tl.ROW_SCHEMA)
        if not found.tasks:
            return top, kind
        return listing_frame(spark, found.tasks, found.width).unionByName(top), kind

    def joins(self, tree: Tree) -> bool:
        """Whether ``tree`` is listed on Spark (hence planned there too); its first
        page, if probed, is kept for ``frame``."""
        kind, first = self._placed(tree)
        if first is not None:
            self._pages[tree.url] = first
        return kind is not None


def more_entries_than(root: str, limit: int) -> bool:
    """Whether the local tree at ``root`` holds more than ``limit`` entries: a walk by
    names alone (no stat, links not followed) that stops at the limit, so ``auto`` pays
    at most ``limit`` directory entries (about 0.05 s per 100,000 here) to decide. What
    cannot be read is not counted: the listing itself reports it."""
    count, stack = 0, [root]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    if entry.name == fsutil.STATE_DIR_NAME:
                        continue
                    count += 1
                    if count > limit:
                        return True
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return False


def entries(found: Found, rows: Iterable[Mapping[str, Any]], skipped: list[Skipped]
            ) -> Iterator[tuple[str, Any]]:
    """The driver's entries and the collected rows, merged in the walk's order."""
    out = list(found.entries)
    extra: list[Skipped] = []
    for row in rows:
        entry = tl.entry_of(row)
        if isinstance(entry, Skipped):
            extra.append(entry)
        else:
            out.append(entry)
    skipped.extend(sorted(extra, key=lambda s: tl.sort_key(found.kind, s.path)))
    out.sort(key=lambda e: tl.sort_key(found.kind, e[0]))
    return iter(out)


class LazySession:
    """The run's Spark session, opened on first use and kept until ``close``."""

    def __init__(self, opener: Callable[[], AbstractContextManager[Any]]) -> None:
        self._opener = opener
        self._stack = ExitStack()
        self._spark: Any = None

    def __call__(self) -> Any:
        if self._spark is None:
            self._spark = self._stack.enter_context(self._opener())
        return self._spark

    @property
    def started(self) -> bool:
        return self._spark is not None

    def close(self) -> None:
        self._stack.close()
