"""How a run copies: one branch, or several in one job (driver).

One branch's files on Spark, collected or kept on the executors; several branches' in
one job that reads each file once (``run.fork``).

A copier fills each branch's ``results`` (or ``copies``, for files whose results stay
on the executors) and returns how many files it read, the divisor of the requests per
file. The way it copied, and why, goes to the summary (``planning.strategy``).
"""

from __future__ import annotations

from distcp.callbacks import Callback
from distcp.planning import visibility
from distcp.run.branch import BranchRun
from distcp.run.choice import copy_strategies
from distcp.run.report import record_strategies
from distcp.runlog import RunLog
from distcp.spark.job import copy_kept, copy_on_spark
from distcp.spark.listing import LazySession


def copy_branch(run: BranchRun, session: LazySession, callback: Callback, log: RunLog
                ) -> int:
    """A plain copy's one branch: the files to read as work units whose results come to
    the driver (``collected``), the kept datasets' chunks whose results stay in files on
    the executors (``kept``)."""
    cfg, spec, summary = run.cfg, run.task, run.summary
    if run.files:
        now = visibility.per_file(run.rest.files_to_copy, cfg.visibility)
        if run.publishing.catalog is not None:
            session()  # the copy's session stays open for the registrations at publish
        run.results += copy_on_spark(cfg, spec, run.files, callback, summary, now)
    if run.kept:
        run.copies = copy_kept(cfg, spec, run.kept, callback, summary)
    kept = sum(d.files_kept for d in run.kept)
    summary.strategy["copy"] = record_strategies(log, "copy", tuple(
        ("", s) for s in copy_strategies(len(run.files), kept, run.collects)), cfg.destination)
    return len(run.files) + kept
