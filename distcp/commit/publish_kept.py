"""Publish a dataset whose files to copy and results stayed on the executors (driver).

The coordinator's share of a thin run (``distcp.spark.keptcopy``): from the copy
tasks' reports (counts and sums, the first failures, the results files' names) it
builds the file set's commit sequence with the same steps and order as ``publish``
does, except that the renames and the manifest segment are the kept steps
(``distcp.commit.kept_steps``), which read the results files. The sequence is
persisted before its first step and removed after its last, as every other.

The plain-copy rules hold as in ``publish``: every file is its own unit (``PER_FILE``),
so the good files of a set with failures are published, without its deletions; a set
where nothing was copied publishes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from distcp.commit.kept_steps import AppendManifestKept, PublishKept
from distcp.commit.outcome import FileSetOutcome
from distcp.commit.publish import Publishing, run_logged, sequence_id
from distcp.commit.state_steps import AdvanceWatermark, CompactManifest, EmitEvent, RecordRun
from distcp.commit.steps import CommitSequence, CommitStep, DeletePaths, MakeDirectories
from distcp.copying.resultfiles import UnitReport, read_once
from distcp.datasets.recursive import PER_FILE
from distcp.errors import PublishError, StateError
from distcp.planning.plan import DatasetPlan
from distcp.registry import PUBLISHERS
from distcp.storage import filesystems as fsutil
from distcp.summary import Failure, Tally


def publish_kept(dataset: DatasetPlan, reports: Sequence[UnitReport], pub: Publishing,
                 job_failed: str = "") -> Tally:
    """Publish what the copy tasks of ``dataset`` staged; ``job_failed``: the copy job's
    error (nothing was copied: every file of the dataset failed)."""
    failed = _failures(dataset, reports, job_failed)
    copied = sum(r.files_ok for r in reports)
    if not copied:  # nothing to publish: no directory or deletion either, as in publish
        return failed
    complete = not failed.files_failed
    outcome = FileSetOutcome(
        dataset.urn, PER_FILE, dataset.destination_root, (), dataset.directories,
        dataset.delete if complete else (),
        pub.ctx.storage(dataset.destination_root).capabilities)
    sequence = _sequence(outcome, reports, pub, complete)
    try:
        with read_once():  # the renames, then the manifest segment: each file read once
            run_logged(sequence, pub)
    except (PublishError, StateError) as exc:
        return failed + Tally(
            failures=(Failure(fsutil.display(dataset.destination_root),
                              f"{exc}; the next run retries it", dataset.urn,
                              files=copied),),
            files_not_published=copied)
    return failed + Tally(
        files_copied=copied, links_copied=sum(r.links for r in reports),
        bytes_copied=sum(r.bytes_written for r in reports),
        files_deleted=len(outcome.deletes), directories_created=len(outcome.directories))


def _sequence(outcome: FileSetOutcome, reports: Sequence[UnitReport], pub: Publishing,
              complete: bool) -> CommitSequence:
    """``publish``'s sequence for a plain copy's file set, with the kept steps: the
    publisher's (deletions, directories, then the renames, then directory attributes),
    the manifest, watermark, run record and event."""
    sid = sequence_id(pub.job_id, outcome.dataset_urn, outcome.file_set)
    results = tuple(sorted((r.url, r.files_ok) for r in reports if r.url and r.files_ok))
    base = list(PUBLISHERS.get("rename")().sequence_for(outcome, []).steps)
    at = max((n + 1 for n, s in enumerate(base)
              if isinstance(s, (DeletePaths, MakeDirectories))), default=0)
    files = sum(n for _, n in results)
    nbytes = sum(r.bytes_written for r in reports)
    newest = max((r.newest_mtime for r in reports if r.newest_mtime is not None),
                 default=None)
    steps: list[CommitStep] = [
        *base[:at], PublishKept(results), *base[at:],
        AppendManifestKept(sid, outcome.dataset_urn, results, tuple(outcome.deletes)),
        CompactManifest(outcome.dataset_urn),
        AdvanceWatermark(sid, outcome.dataset_urn, newest),
        RecordRun(sid, outcome.dataset_urn, pub.job_id, outcome.file_set,
                  "ok" if complete else "partial", files, nbytes, pub.started),
        EmitEvent(sid, outcome.dataset_urn, outcome.file_set, outcome.destination_root,
                  files, nbytes, pub.job_id, pub.destination, pub.branch)]
    return CommitSequence(outcome.dataset_urn, outcome.file_set, tuple(steps), sid)


def _failures(dataset: DatasetPlan, reports: Sequence[UnitReport], job_failed: str
              ) -> Tally:
    """The failed files: each the tasks reported whole, and a line for the rest."""
    if job_failed:
        return Tally(failures=(Failure(
            fsutil.display(dataset.destination_root),
            f"{dataset.files_kept} file(s) not copied: Spark job failed: {job_failed}",
            dataset.urn, files=dataset.files_kept),))
    listed = tuple(Failure(fsutil.display(r.origin), r.message, dataset.urn)
                   for report in reports for r in report.failures)
    count = sum(r.files_failed for r in reports)
    more = (Failure(fsutil.display(dataset.destination_root),
                    f"{count - len(listed)} more file(s) failed (the first {len(listed)} "
                    "are listed)", dataset.urn, files=count - len(listed)),
            ) if count > len(listed) else ()
    return Tally(failures=listed + more)
