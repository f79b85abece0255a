"""Two sources whose outputs land on one file: both refused before anything publishes (driver).

Planning refuses two sources that map to one destination (``plan.check_duplicates``),
but it cannot see inside an archive: two archives expanded into one folder
(``--expand-into-parent``) that hold the same member, or a member that lands where a
plain file of the source also goes, are known only once their outputs are staged. The
last one published used to win and the other's member was lost without a word. Before
any file set publishes, ``refuse_collisions`` fails each source whose output shares a
file with another source's (or with a file this run left in place as unchanged), whole
and by name: an archive is published complete or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from distcp.model import TaskResult
from distcp.planning.plan import Plan
from distcp.storage.filesystems import display

#: The ``error_type`` of a source refused for a collision.
COLLISION = "DestinationCollision"


def refuse_collisions(results: Sequence[TaskResult], plan: Plan) -> list[TaskResult]:
    """``results`` with every source whose outputs collide replaced by one failed result
    naming the file and the other source. Directories may be shared; files may not."""
    owner: dict[str, str] = {}  # destination file -> the guid writing (or holding) it
    origin: dict[str, str] = {}
    kept: set[str] = set()  # guids whose copy this run leaves in place (skipped)
    for d in plan.datasets:
        for a in d.skip:
            if not a.file.destination.endswith("/"):
                owner[a.file.destination] = a.file.guid
                origin[a.file.guid] = a.file.origin.url
                kept.add(a.file.guid)
    clash: dict[str, str] = {}  # guid -> why it is refused
    for r in results:
        if r.destination.endswith("/") or r.status == "failed":
            continue
        origin.setdefault(r.guid, r.origin)
        other = owner.setdefault(r.destination, r.guid)
        if other == r.guid:
            continue
        clash.setdefault(r.guid, _why(r.destination, origin[other], other in kept))
        if other not in kept:
            clash.setdefault(other, _why(r.destination, r.origin, False))
    if not clash:
        return list(results)
    return _collapsed(results, clash, origin)


def _why(destination: str, other: str, published: bool) -> str:
    if published:
        return (f"{display(destination)} is already published from {display(other)}, which "
                "this run leaves in place")
    return f"{display(other)} also writes {display(destination)}, and neither is published"


def _collapsed(results: Sequence[TaskResult], clash: dict[str, str], origin: dict[str, str]
               ) -> list[TaskResult]:
    """Each refused source's results as one failed result (its staged outputs are
    swept with the job), the others unchanged, in order."""
    out: list[TaskResult] = []
    done: set[str] = set()
    for r in results:
        why = clash.get(r.guid)
        if why is None:
            out.append(r)
        elif r.guid not in done:
            done.add(r.guid)
            out.append(replace(
                r, status="failed", staging="", records="", error_type=COLLISION,
                message=f"cannot publish {display(origin[r.guid])}: {why}; rename one "
                        "at the source, or expand the archive into its own folder"))
    return out
