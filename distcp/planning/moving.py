"""Which sources a ``move`` deletes, decided from the plan; pure, no I/O (driver).

A copied file's source goes once its file set is published (distcp.commit.move_steps).
A skipped one goes too when the destination already holds the same file (rclone move
does the same): same size and mtime or checksum as planning compared them. Never a
file skipped by ``--ignore-existing`` (the destination may differ), a converted one
(its expansion cannot be compared with the archive) or a symbolic link (left as is).
"""

from __future__ import annotations

from collections.abc import Iterable

from distcp.errors import PlanningError
from distcp.model import CopyableFile
from distcp.planning.plan import Action, DatasetPlan


def movable(f: CopyableFile) -> bool:
    """Whether ``move`` may delete this file's source (links and archive expansions stay)."""
    return f.origin.link_target is None and not f.destination.endswith("/")


def identical_skips(plan: DatasetPlan, compare: str) -> tuple[Action, ...]:
    """The skipped files whose destination is the same file: their sources go too."""
    if compare == "ignore-existing":
        return ()
    return tuple(a for a in plan.skip if movable(a.file) and not a.file.converters)


def sources_to_delete(plans: Iterable[DatasetPlan], compare: str) -> int:
    plans = list(plans)
    return (sum(1 for p in plans for a in p.copy if movable(a.file))
            + sum(len(identical_skips(p, compare)) for p in plans))


def check_max_move(plans: Iterable[DatasetPlan], limit: int | None, compare: str) -> None:
    """--max-delete for ``move``: refuse the run, before any change, when it would delete
    more than ``limit`` entries (source files plus --delete's destination extras)."""
    plans = list(plans)
    count = sources_to_delete(plans, compare) + sum(len(p.delete) for p in plans)
    if limit is not None and count > limit:
        raise PlanningError(f"--max-delete {limit}: the move would delete {count} source "
                            "files and extras; nothing was changed")
