"""What a run reports, built from what the phases returned (driver).

Its decisions, a dry run's counts, per-dataset counts, the requests per file, and how
the run ended for each dataset (kept in the state for ``pydistcp status``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from distcp import request_count
from distcp.commit.publish import Publishing
from distcp.model import TaskResult
from distcp.planning.plan import Plan
from distcp.planning.strategy import Strategy
from distcp.runlog import RunLog
from distcp.state.outcomes import OutcomeStore, outcome_of
from distcp.state.store import StateStore
from distcp.summary import Failure, Summary


def decisions(plan: Any) -> list[dict[str, str]]:
    rows = []
    for d in plan.datasets:
        for a in d.copy:
            rows.append({"action": "copy", "path": a.file.destination, "reason": a.reason})
        for a in d.skip:
            rows.append({"action": "skip", "path": a.file.destination, "reason": a.reason})
        for url in d.delete:
            rows.append({"action": "delete", "path": url, "reason": "not in source"})
    return rows


def dry_run_counts(summary: Summary, plan: Any) -> None:
    """What a dry run would copy and delete, as the summary's counts."""
    summary.files_copied = len(plan.files_to_copy)
    summary.links_copied = sum(1 for f in plan.files_to_copy if f.origin.link_target is not None)
    summary.bytes_copied = plan.bytes_to_copy
    summary.files_deleted = sum(len(d.delete) for d in plan.datasets)


def per_dataset(plan: Plan, results: list[TaskResult], pub: Publishing,
                kept_failed: Counter[str] | None = None) -> dict[str, dict[str, Any]]:
    """What this run did to each dataset: published (from the run records its commits
    wrote, so only what was published counts), skipped, failed (``kept_failed``: of
    datasets whose results stayed on the executors), a stream dataset's watermarks,
    and a table's version after the run and how many versions it is behind its source."""
    store = StateStore(pub.ctx.state_root, pub.ctx.dst_options, pub.ctx.state_cache)
    failed = Counter(r.dataset_urn for r in results if not r.ok) + (kept_failed or Counter())
    out: dict[str, dict[str, Any]] = {}
    for d in plan.datasets:
        state = store.load(d.urn)
        runs = [r for r in state.runs if r.get("job_id") == pub.job_id]
        counts: dict[str, Any] = {
            "files_transferred": sum(r.get("files", 0) for r in runs),
            "bytes_transferred": sum(r.get("bytes", 0) for r in runs),
            "files_skipped": d.files_skipped, "errors": failed[d.urn]}
        marks = {"low": state.low_watermark, "expected_high": state.expected_high_watermark,
                 "actual_high": state.actual_high_watermark}
        if any(v is not None for v in marks.values()):
            counts["watermarks"] = marks
        if d.versions is not None:  # a table: where its destination is now
            now = d.versions.after(r.get("file_set", "") for r in runs if r.get("status") == "ok")
            counts["table"] = {"version": now, "source_version": d.versions.source,
                               "versions_behind": d.versions.source - now}
        out[d.urn] = counts
    return out


def record_outcomes(root: str, options: dict[str, Any], job_id: str, urns: Iterable[str],
                    failures: Iterable[Failure]) -> None:
    """How the run ended for each dataset it was asked to copy (``urns``), written to
    the state for ``pydistcp status``: failed with the first failure of the dataset
    (its files, its publish, its earlier commit that could not finish), else ok
    (``state.outcomes``: written where an outcome is kept already)."""
    first: dict[str, str] = {}
    for f in failures:
        if f.dataset:
            first.setdefault(f.dataset, f.error)
    store = OutcomeStore(root, options)
    kept = store.names()
    for urn in dict.fromkeys(urns):
        if urn in first or store.kept_for(urn, kept):  # ok: only to clear a failure
            store.save(outcome_of(urn, job_id, first.get(urn)))


def count_requests(summary: Summary, publish: request_count.Counts, files: int) -> None:
    """Add the publish step's requests to the tasks' and divide by the files copied."""
    totals = request_count.total([tuple(summary.requests.items()), publish])
    summary.requests = {k: n for k, n in sorted(totals.items()) if n}
    summary.requests_per_file = request_count.per_file(summary.requests, files)


def record_strategies(log: RunLog, phase: str, chosen: Iterable[tuple[str, Strategy]],
                      destination: str) -> list[dict[str, str]]:
    """``chosen`` (by dataset URN; "" for the whole run to ``destination``) as the
    summary keeps them, each also a ``strategy`` event of the run's log file, which
    names its dataset's source as ``path`` or the run's ``destination``, as every
    event of that file names one or the other."""
    out = []
    for urn, strategy in chosen:
        row = {**({"dataset": urn} if urn else {}), **strategy.to_dict()}
        log.event("strategy", phase=phase, **({"path": urn} if urn else
                                              {"destination": destination}),
                  **strategy.to_dict())
        out.append(row)
    return out
