"""How a branch plans: one choice, from stated facts, for every dataset of it (driver).

A fork's branches plan on the driver (their files to copy come to it: one read serves
them all). A plain copy's planner is chosen from ``--listing``, the trees' sizes and
kinds and how cheaply the session opens: Spark's planning tasks (a paired walk of two
local trees, or both listings joined) for what ``Lister`` puts on Spark, the driver's
paired walk of two local trees, or the driver's own listing; the two ways on the
driver may run in a forked child while the command imports PySpark's client
(``planning.beside``). Each planner names itself and why (``planning.strategy``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from distcp import collection
from distcp.planning import beside
from distcp.planning.beside import plan_beside, refused_session
from distcp.planning.listing import FirstPlanner, Planned, plan_all
from distcp.planning.treeplans import DriverPairs, kept_walked
from distcp.run.branch import BranchRun
from distcp.run.choice import (
    BESIDE,
    PAIRED_HERE,
    collects_because,
    every_decision,
    held_here,
    plans_beside,
    session_cheap,
    walks_every_core,
)
from distcp.spark.listing import LazySession, Lister
from distcp.spark.planning import JoinPlanner
from distcp.spark.session import client_modules
from distcp.state.layout import StateLayout
from distcp.state.store import StateStore

#: What every copy imports when it publishes (the manifest's Parquet segments, ~0.1 s),
#: imported while the run plans, once its plan copies a file: first in the parent while
#: a run plans beside, else in a thread (``preload``). A small plan, copied in this
#: process (``run.here``), never imports the Spark client after them; a plan with
#: nothing to copy imports neither.
PUBLISH_MODULES = ("pyarrow.parquet",)



def planned(run: BranchRun, session: LazySession, message: Callable[[str], None]
            ) -> Planned:
    """The branch's plan (each dataset planned once, by the planner chosen for it)."""
    cfg = run.cfg
    store = StateStore(run.root, dict(cfg.dst_options))
    if run.forked:
        run.collects = "a fork's files come to the driver, read once for every branch"
        return plan_all(cfg, message, run.datasets, store)
    run.collects = collects_because(cfg, run.publishing.recovery)
    copies_to = (StateLayout(run.root).kept_plan(run.publishing.job_id)
                 if run.collects is None else "")
    held = held_here(cfg)  # a plan auto would copy here is held, not kept for Spark

    def planned_with(spark: Callable[[], Any]) -> Planned:
        lister = Lister(cfg.listing, spark, cheap=lambda: (
            session.started or session_cheap(cfg)) and not walks_every_core(cfg)) \
            if cfg.listing != "driver" else None
        pairs = DriverPairs(every_decision(cfg), copies_to,
                            lister.reason if lister is not None else lambda tree: PAIRED_HERE,
                            held, store)
        with collection.paused():
            return plan_all(cfg, message, run.datasets, store, lister,
                            FirstPlanner(JoinPlanner(lister, every_decision(cfg), copies_to),
                                         pairs) if lister else pairs)

    done = None
    if plans_beside(cfg, run.collects) and not session.started:
        done = plan_beside(partial(planned_with, refused_session),
                           PUBLISH_MODULES + client_modules(cfg.master, cfg.engine))
        if done is not None:
            done = replace(done, strategies=tuple(
                (urn, s.besides(BESIDE)) for urn, s in done.strategies))
    if done is None:  # publishing's imports start once the plan copies a file (else never)
        beside.when_copying(partial(beside.preload, PUBLISH_MODULES))
        try:
            done = planned_with(session)
        finally:
            beside.when_copying(None)
        if any(d.copy or d.kept or d.delete for d in done.plan.datasets):
            beside.preload(PUBLISH_MODULES)  # planned on Spark, or deletions only
    return replace(done, plan=kept_walked(done.plan, run.datasets, cfg, copies_to, held))
