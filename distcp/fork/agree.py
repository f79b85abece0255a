"""``--fork-policy all``: a file is published in every branch or in none (driver).

A file is published in no branch unless every branch that receives it can publish it,
so the copies never disagree.

Each branch's own commit policy decides what of its file sets it would publish
(``distcp.commit.publish``); a file that some branch would not publish is failed in
every branch, which may hold back more of another branch's sets, so the rule runs
until nothing changes (failures only grow: it ends).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from distcp.commit.publish import Publishing, publishable_guids
from distcp.model import TaskResult
from distcp.planning.plan import Plan


def agreed(names: Sequence[str], plans: Sequence[Plan],
           results: Sequence[list[TaskResult]], pubs: Sequence[Publishing]
           ) -> list[list[TaskResult]]:
    """``results`` (per branch) with every file some branch holds back failed in all."""
    current = [list(rs) for rs in results]
    while True:
        refused: dict[str, str] = {}
        for name, plan, rs, pub in zip(names, plans, current, pubs, strict=True):
            kept = publishable_guids(plan, rs, pub)
            for r in rs:
                if r.guid not in kept and r.guid not in refused:
                    refused[r.guid] = (f"branch {name!r}: " + (r.message or "its file set "
                                       "is not published"))
        changed = False
        for n, rs in enumerate(current):
            for i, r in enumerate(rs):
                why = refused.get(r.guid)
                if why is not None and r.ok:
                    rs[i] = replace(r, status="failed", error_type="ForkPolicy",
                                    message=f"not published in any branch (--fork-policy "
                                            f"all): {why}")
                    changed = True
        if not changed:
            return current
