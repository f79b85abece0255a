"""``--checksum``'s comparison of contents, between the plan and the copy (driver).

Planning leaves each file of its target's size whose digests are not both known among
the copies, waiting on its contents (``distcp.planning.contents`` says how they are
settled). Here the waiting pairs are settled before anything is copied: those the
stores' own checksums decide without a read, the rest read by the check's digest
tasks: in this process where ``choice.reads_here`` says, else in one Spark job on the
run's session; the plan then skips what is the same. A dry run compares too: it reads,
it changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from distcp.callbacks import DEFAULT_CALLBACK, Callback
from distcp.checking.compare import Outcome, Pair
from distcp.checking.reads import digest_jobs, judge_read
from distcp.configuration import CopyConfiguration
from distcp.model import FileStatus
from distcp.planning.contents import judge_unread, pairs_of, resolved, waiting
from distcp.run.branch import BranchRun
from distcp.run.choice import reads_here
from distcp.run.here import read_here
from distcp.spark.check import digests_on
from distcp.spark.listing import LazySession
from distcp.state.store import StateStore
from distcp.storage import storage_for
from distcp.summary import Tally


def compare_contents(run: BranchRun, session: LazySession, callback: Callback) -> Tally:
    """Settle the branch's copies that wait on their contents (its plan then skips what
    is the same); what was compared (none waiting: nothing done, an empty Tally)."""
    actions = waiting(run.plan)
    if not actions:
        return Tally()
    cfg = run.cfg
    read = 0
    pairs = pairs_of(actions, _manifests(run, {urn for urn, _ in actions}))
    outcomes = _stored_outcomes(pairs, cfg)
    unread = [p for p in pairs if p.path not in outcomes]
    if unread:
        callback.message(f"comparing the contents of {len(unread)} files of the same size "
                         "(--checksum)")
        jobs = digest_jobs(unread, cfg.src_options, cfg.dst_options)
        results = read_here(cfg, jobs, "", DEFAULT_CALLBACK) \
            if reads_here(cfg, len(jobs)) is not None \
            else digests_on(session(), cfg, jobs, "", DEFAULT_CALLBACK)
        outcomes.update((p.path, o) for p, o in zip(unread, judge_read(unread, results),
                                                      strict=True))
        read = sum(r.size for r in results)
    run.plan = resolved(run.plan, outcomes)
    return Tally(files_compared=len(pairs), bytes_compared=read,
                 files_compared_same=sum(1 for o in outcomes.values() if o.verdict == "="))


def _manifests(run: BranchRun, urns: set[str]) -> dict[str, Mapping[str, Sequence[Any]]]:
    """The manifests of the datasets with waiting copies (their digests may stand in for
    the sources)."""
    store = StateStore(run.root, dict(run.cfg.dst_options))
    return {urn: store.load(urn).manifest for urn in urns}


def _stored_outcomes(pairs: list[Pair], cfg: CopyConfiguration) -> dict[str, Outcome]:
    """The verdicts the checksums both stores keep give, by destination URL."""
    src_opts, dst_opts = dict(cfg.src_options), dict(cfg.dst_options)

    def checksum(status: FileStatus, side: str) -> str | None:
        options = src_opts if side == "src" else dst_opts
        return storage_for(status.url, options).stored_checksum(status)

    out = {}
    for p in pairs:
        outcome = judge_unread(p, checksum)
        if outcome is not None:
            out[p.path] = outcome
    return out
