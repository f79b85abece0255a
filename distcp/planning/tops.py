"""The top of a tree, listed here before the rest goes to listing tasks (driver).

A local tree is listed breadth first down to about ``target`` subtrees (``balance``);
each subtree left becomes a ``ListingTask``. Spark's listing runs those tasks
(``distcp.spark.listing``); the driver's paired planning walks them itself
(``distcp.planning.treeplans``). Nothing here needs Spark.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from distcp.planning.listsplit import balance
from distcp.storage import treelisting as tl
from distcp.storage.filesystems import Skipped

#: Directories the driver lists at most to balance subtrees.
LIST_BUDGET = 64


@dataclass
class Found:
    """What the driver listed itself, and the tasks for the rest."""

    kind: str
    entries: list[tuple[str, Any]] = field(default_factory=list)
    tasks: list[tl.ListingTask] = field(default_factory=list)
    #: Spark tasks to run them in (``listing_frame``'s width; 0: one each).
    width: int = 0


def tree_tasks(url: str, root: str, links: str, options: Mapping[str, Any], target: int,
               skipped: list[Skipped]) -> Found:
    """A local tree: the top levels listed here (breadth first, ``balance``), a task for
    each subtree left."""
    found = Found(tl.TREE)
    top = os.stat(root)

    def expand(sub: tl.Subtree | None) -> list[tl.Subtree] | None:
        path, ancestors = (root, {(top.st_dev, top.st_ino)}) if sub is None \
            else (sub.path, set(sub.ancestors))
        items = tl.local_level(path, links, skipped, frozenset(ancestors), top=sub is None)
        if items is None:
            return None
        if sub is not None:
            found.entries.append((sub.path, sub.status))
        kids = [i for i in items if isinstance(i, tl.Subtree)]
        found.entries.extend(i for i in items if not isinstance(i, tl.Subtree))
        return kids

    subtrees = balance(expand(None) or [], expand, target, LIST_BUDGET)
    found.tasks = [tl.ListingTask(tl.TREE, url, root, links, start=s.path,
                                  ancestors=s.ancestors, options=dict(options))
                   for s in subtrees]
    return found
