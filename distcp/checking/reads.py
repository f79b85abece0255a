"""Which sides of which pairs are read, and the verdicts of what was read (driver).

Shared by ``pydistcp check`` (``distcp.run.check``) and ``copy --checksum``'s comparison
of contents (``distcp.run.contents``): both pair a source file with its destination,
read what no stored digest stands in for on the executors (``checking.digests``), and
judge the digests that come back with ``checking.compare.judge_digests``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from distcp.checking.compare import SRC, Outcome, Pair, judge_digests, sides_to_read
from distcp.checking.digests import DigestJob, DigestResult
from distcp.storage import spec_for


def digest_jobs(pairs: Sequence[Pair], src_options: Mapping[str, Any],
                dst_options: Mapping[str, Any]) -> list[DigestJob]:
    """One job per side to read of each pair (its key: the pair's index); every pair
    has both sides (the listings decided those missing one)."""
    src_opts, dst_opts = dict(src_options), dict(dst_options)
    jobs = []
    for key, p in enumerate(pairs):
        for side in sides_to_read(p):
            st = p.src if side == SRC else p.dst
            assert st is not None
            opts = src_opts if side == SRC else dst_opts
            jobs.append(DigestJob(key, side, st.url, st.size, spec_for(st.url, opts)))
    return jobs


def judge_read(pairs: Sequence[Pair], results: Sequence[DigestResult]) -> list[Outcome]:
    """Each pair's verdict from the digests read (``digest_jobs``' keys), in order; a
    side that was not read is an error (``!``)."""
    digests: dict[int, dict[str, str]] = {}
    errors: dict[int, dict[str, str]] = {}
    for r in results:
        (errors if r.error else digests).setdefault(r.key, {})[r.side] = r.error or r.digest
    out = []
    for key, p in enumerate(pairs):
        got = digests.get(key, {})
        missing = {s: "not read" for s in sides_to_read(p) if s not in got}
        out.append(judge_digests(p, got, {**missing, **errors.get(key, {})}))
    return out
