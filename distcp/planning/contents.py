"""Which copies wait on ``--checksum``'s comparison of contents; the plan it settles (driver).

Pure, no I/O.

rclone ``-c`` decides by checksum. Between two trees where no digest is known for both
sides (a destination made by ``cp -a``, or one pydistcp never wrote to), planning
reads nothing: a file of its target's size stays among the copies, holding the
target's status (``plan.CONTENTS``). Before anything is copied the run settles each
such pair (``distcp.run.contents``) the way ``pydistcp check`` does, with the same
rules and the same digest tasks:

- two empty files are the same; a checksum both stores keep, in the same algorithm (an S3 ETag of a single-part
  upload is an MD5: ``Storage.stored_checksum``), decides without reading;
- else the destination is read, and the source too unless the manifest's digest
  stands in for it (``checking.compare.stored_digest``: the source still has the size
  and mtime it had when that digest was recorded);
- the same digests move the file to the skips; different ones, or a side that could
  not be read, leave it a copy (never skip on a guess).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from distcp.checking.compare import Outcome, Pair, stored_digest
from distcp.model import FileStatus
from distcp.planning.plan import Action, DatasetPlan, Plan

#: The reasons --dry-run and -v show once the contents were compared.
SAME = "same contents (--checksum)"
DIFFERENT = "contents differ (--checksum)"


def waiting(plan: Plan) -> list[tuple[str, Action]]:
    """(dataset URN, action) of every copy that waits on a comparison of contents."""
    return [(d.urn, a) for d in plan.datasets for a in d.copy if a.existing is not None]


def pairs_of(actions: Sequence[tuple[str, Action]],
             manifests: Mapping[str, Mapping[str, Sequence[Any]]]) -> list[Pair]:
    """The check's pair of each waiting action (``path``: its destination URL), with
    the digest its dataset's manifest recorded when that still describes the source."""
    return [Pair(a.file.destination, a.file.origin, a.existing,
                 stored_digest(a.file.origin, manifests.get(urn, {}).get(a.file.destination)))
            for urn, a in actions]


def judge_unread(p: Pair, checksum: Callable[[FileStatus, str], str | None]) -> Outcome | None:
    """The verdict given without a read: two empty files, or the checksums both stores
    keep (``checksum(status, side)``) when they are of one algorithm; None: the bytes
    must be read."""
    assert p.src is not None and p.dst is not None
    if p.src.size == 0 == p.dst.size:
        return Outcome(p.path, "=", "both empty")
    src, dst = checksum(p.src, "src"), checksum(p.dst, "dst")
    if not (src and dst) or src.split(":", 1)[0] != dst.split(":", 1)[0]:
        return None
    if src == dst:
        return Outcome(p.path, "=", f"same checksum in both stores ({src})")
    return Outcome(p.path, "*", f"checksums differ: {src} at the source, {dst} at the "
                                "destination")


def resolved(plan: Plan, outcomes: Mapping[str, Outcome]) -> Plan:
    """``plan`` with each waiting copy settled by its outcome (by destination URL): the
    same contents skipped, the rest copied with the reason it is copied."""
    return Plan(tuple(_resolved(d, outcomes) for d in plan.datasets))


def _resolved(d: DatasetPlan, outcomes: Mapping[str, Outcome]) -> DatasetPlan:
    copy: list[Action] = []
    skip: list[Action] = []
    for a in d.copy:
        outcome = outcomes.get(a.file.destination) if a.existing is not None else None
        if outcome is None:
            copy.append(a)
        elif outcome.verdict == "=":
            skip.append(Action(a.file, f"{SAME}: {outcome.reason}"))
        elif outcome.verdict == "*":
            copy.append(Action(a.file, DIFFERENT))
        else:
            copy.append(Action(a.file, f"contents not compared ({outcome.reason})"))
    counted = None if d.skips_counted is None else d.skips_counted + len(skip)
    return replace(d, copy=tuple(copy), skip=d.skip + tuple(skip), skips_counted=counted)
