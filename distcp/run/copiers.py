"""How a run copies: one branch, or several in one job (driver).

One branch's files on Spark, collected or kept on the executors, or copied here
(``run.here``: a small plan's files, or a cold run's kept files, by processes forked
here); several branches' in one job that reads each file once (``run.fork``).

A copier fills each branch's ``results`` (or ``copies``, for files whose results stay
on the executors) and returns how many files it read, the divisor of the requests per
file, with what the copy reports to the summary (``CopyTally``). The way it copied, and why, goes to the summary (``planning.strategy``).
"""

from __future__ import annotations

from distcp.callbacks import Callback
from distcp.planning import visibility
from distcp.planning.splitting import idle_split
from distcp.run.branch import BranchRun
from distcp.run.choice import (
    copiers_here,
    copies_here,
    copy_strategies,
    cores_here,
    kept_here,
)
from distcp.run.here import copy_here, copy_kept_here
from distcp.run.report import record_strategies
from distcp.runlog import RunLog
from distcp.spark.job import Sessions, copy_kept, copy_on_spark
from distcp.spark.listing import LazySession
from distcp.summary import CopyTally


def copy_branch(run: BranchRun, sessions: Sessions, session: LazySession, callback: Callback,
                log: RunLog) -> tuple[int, CopyTally]:
    """A plain copy's one branch: the files to read as work units whose results come to
    the driver (``collected``), the kept datasets' chunks whose results stay in files on
    the executors (``kept``)."""
    cfg, spec = run.cfg, run.task
    tally = CopyTally()
    here = copies_here(cfg, run.files, len(run.kept), run.publishing.catalog is not None,
                       splits=idle_split(cfg, spec, run.files, cores_here(cfg)) is not None)
    if run.files:
        now = visibility.per_file(run.rest.files_to_copy, cfg.visibility,
                                  {d.urn for d in run.rest.datasets if d.order})
        if here is not None:
            results, tally = copy_here(cfg, spec, run.files, callback, now)
        else:
            if run.publishing.catalog is not None:
                session()  # the copy's session stays open for the registrations at publish
            results, tally = copy_on_spark(cfg, spec, run.files, sessions, callback, now)
        run.results += results
    kept_by = kept_here(cfg) if run.kept else None
    if run.kept:
        run.copies, more = copy_kept_here(cfg, spec, run.kept, callback) \
            if kept_by is not None else copy_kept(cfg, spec, run.kept, sessions, callback)
        tally = tally + more
    kept = sum(d.files_kept for d in run.kept)
    ways = copy_strategies(len(run.files), kept, run.collects, here, kept_by,
                           copiers_here([cfg]))
    return len(run.files) + kept, tally + CopyTally(strategy=tuple(record_strategies(
        log, "copy", tuple(("", s) for s in ways), cfg.destination)))
