"""DRIVER: group task results by file set and publish each set whole, or not at all."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from distcp import fs as fsutil
from distcp.commit import CommitContext
from distcp.errors import PublishError
from distcp.model import TaskResult
from distcp.planning import DatasetPlan, Plan
from distcp.publishers.base import FileSetOutcome, Publisher
from distcp.registry import PUBLISHERS
from distcp.summary import Failure, Summary
from distcp.task import TaskSpec


def outcomes_of(dataset: DatasetPlan, results: Sequence[TaskResult]) -> list[FileSetOutcome]:
    """One outcome per file set of the dataset, including sets with nothing to copy
    (their directories and deletes still need publishing)."""
    by_set: dict[str, list[TaskResult]] = defaultdict(list)
    for r in results:
        by_set[r.file_set].append(r)
    seen = {r.guid for r in results}
    for a in dataset.copy:  # a file that came back with no result at all failed
        if a.file.guid not in seen:
            by_set[a.file.file_set].append(TaskResult(
                guid=a.file.guid, unit_id=-1, attempt="", origin=a.file.origin.url,
                destination=a.file.destination, dataset_urn=dataset.urn,
                file_set=a.file.file_set, status="failed", error_type="LostResult",
                message=f"{fsutil.display(a.file.origin.url)}: no task reported this file"))
    names = set(by_set) | {d.file_set for d in dataset.directories}
    if dataset.delete or not names:
        names.add(next(iter(sorted(names)), "all"))
    first = sorted(names)[0]
    return [FileSetOutcome(
        dataset_urn=dataset.urn, file_set=name, destination_root=dataset.destination_root,
        results=tuple(by_set.get(name, ())),
        directories=tuple(d for d in dataset.directories if d.file_set == name),
        deletes=dataset.delete if name == first else ()) for name in sorted(names)]


def publish_plan(plan: Plan, results: Sequence[TaskResult], spec: TaskSpec, summary: Summary,
                 publisher: Publisher | None = None) -> None:
    """Publish every file set whose files all succeeded; record the rest as failures."""
    publisher = publisher or PUBLISHERS.get("rename")()
    ctx = CommitContext(dst_options=dict(spec.dst_options))
    by_dataset: dict[str, list[TaskResult]] = defaultdict(list)
    for r in results:
        by_dataset[r.dataset_urn].append(r)
    for dataset in plan.datasets:
        for outcome in outcomes_of(dataset, by_dataset.get(dataset.urn, [])):
            if not outcome.ok:
                _record_failed(outcome, summary)
                continue
            try:
                publisher.sequence_for(outcome, [spec.staging_root]).run(ctx)
            except PublishError as exc:
                summary.failures.append(Failure(fsutil.display(outcome.destination_root), str(exc)))
                summary.files_not_published += sum(1 for r in outcome.results if r.staging)
                continue
            _record_published(outcome, summary)


def _record_published(outcome: FileSetOutcome, summary: Summary) -> None:
    staged = [r for r in outcome.results if r.staging]
    summary.files_copied += len(staged)
    summary.bytes_copied += sum(r.bytes_written for r in staged)
    summary.files_deleted += len(outcome.deletes)
    summary.directories_created += len(outcome.directories)


def _record_failed(outcome: FileSetOutcome, summary: Summary) -> None:
    for r in outcome.results:
        if r.ok:
            summary.files_not_published += 1 if r.staging else 0
        else:
            summary.files_failed += 1
            summary.failures.append(Failure(fsutil.display(r.origin), r.message))
