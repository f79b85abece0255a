"""Copy and publish datasets whose files to copy stayed on the executors (driver).

The thin coordinator of issue "thin coordinator": planning tasks kept each dataset's
files to copy in copy-rows files (``distcp.copying.copyrows``); here the driver packs
their chunks (never their files) into work units, runs one copy task per unit, which
writes its results to a file and answers with a UnitReport, and publishes each dataset
from those reports (``distcp.commit.publish_kept``). What the driver holds grows with
the chunks and tasks (a few hundred for a million files), not with the files.

Taken for plain copies planned on Spark (``--listing spark``), or by the driver's
paired walks with more than ``treeplans.HELD`` files to copy, where nothing asks for
every file on the driver (``keeps_copies``); any other run keeps the collected path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from distcp import request_count
from distcp.commit.publish import Publishing
from distcp.commit.publish_kept import publish_kept
from distcp.configuration import CopyConfiguration
from distcp.copying.copyrows import chunks_of
from distcp.copying.keptunit import KeptUnit, kept_runner
from distcp.copying.resultfiles import UnitReport
from distcp.copying.taskspec import TaskSpec
from distcp.copying.throttle import per_task
from distcp.errors import one_line
from distcp.planning.packing import pack_chunks, per_core, split_chunks, unit_count
from distcp.planning.plan import DatasetPlan, Plan
from distcp.summary import Tally, tally_of


@dataclass(frozen=True)
class KeptCopy:
    """What the copy of one kept dataset came to: its tasks' reports, or the job's error."""

    dataset: DatasetPlan
    reports: tuple[UnitReport, ...] = ()
    job_failed: str = ""

    @property
    def files_copied(self) -> int:
        return sum(r.files_ok for r in self.reports)

    @property
    def files_failed(self) -> int:
        return self.dataset.files_kept if self.job_failed else sum(
            r.files_failed for r in self.reports)


def split_kept(plan: Plan) -> tuple[tuple[DatasetPlan, ...], Plan]:
    """The datasets whose files to copy were kept, and the plan of the others."""
    kept = tuple(d for d in plan.datasets if d.kept)
    return kept, Plan(tuple(d for d in plan.datasets if not d.kept))


def copy_kept_datasets(spark: Any, cfg: CopyConfiguration, spec: TaskSpec,
                       datasets: Sequence[DatasetPlan], first_id: int, cores: int,
                       run: Any) -> list[KeptCopy]:
    """One Spark job copying every kept dataset; ``run(spark, items, runner)`` submits
    it with the run's progress (``job.run_polled``) and raises what Spark raised.
    Units are numbered from ``first_id`` (after the collected path's units)."""
    units: list[tuple[DatasetPlan, KeptUnit]] = []
    for d in datasets:
        cost = sum(r.bytes for r in d.kept) + d.files_kept * cfg.file_cost
        count = unit_count(d.files_kept, cfg.tasks or cores,
                           per_core(cfg.tasks, cost, cores))
        parts = split_chunks(chunks_of(d.kept), count, cfg.file_cost)
        for chunks in pack_chunks(parts, count, cfg.file_cost):
            units.append((d, KeptUnit(first_id + len(units), chunks)))
    spec = replace(spec, bwlimit=per_task(cfg.bwlimit, min(len(units), cores)))
    try:
        reports: list[UnitReport] = run(
            spark, [(u.unit_id, u) for _, u in units], partial(kept_runner, spec))
    except Exception as exc:  # noqa: BLE001 - Spark errors arrive as many types
        reason = one_line(exc)
        return [KeptCopy(d, job_failed=reason) for d in datasets]
    seen = {r.unit_id for r in reports}  # a unit no task reported: its files failed
    reports += [UnitReport(u.unit_id, "", files_failed=u.files) for _, u in units
                if u.unit_id not in seen]
    by_unit = {u.unit_id: d.urn for d, u in units}
    return [KeptCopy(d, tuple(r for r in reports if by_unit.get(r.unit_id) == d.urn))
            for d in datasets]


def publish_all_kept(copies: Sequence[KeptCopy], pub: Publishing) -> Tally:
    return tally_of(publish_kept(c.dataset, c.reports, pub, c.job_failed) for c in copies)


def requests_of(copies: Sequence[KeptCopy]) -> dict[str, int]:
    """The S3 requests of every kept dataset's copy tasks, by kind."""
    return request_count.total(r.requests for c in copies for r in c.reports)
