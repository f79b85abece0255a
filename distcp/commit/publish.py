"""Group task results by file set and publish each through the commit log (driver).

For each publishable file set: build its CommitSequence (the publisher's steps,
then state, run record and event), persist it, run it, remove it. A crash at any
point leaves either nothing (not yet persisted: the copies go to the recovery
area on the next run) or a persisted sequence that the next run replays.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from distcp.commit.catalog_steps import (
    CatalogTarget,
    RegisterPartitions,
    partitions_of,
    registered_in,
    registrations_left,
)
from distcp.commit.iceberg_steps import RegisterIcebergMetadata
from distcp.commit.log import CommitStepStore
from distcp.commit.move_steps import DeleteSources, RemoveEmptySourceDirs, SourceEntry
from distcp.commit.outcome import FileSetOutcome, SequencePlanner
from distcp.commit.recovery import RecoveryArea
from distcp.commit.state_steps import (
    AdvanceWatermark,
    AppendManifest,
    CompactManifest,
    EmitEvent,
    RecordRun,
    RecordWatermarks,
)
from distcp.commit.steps import CommitContext, CommitSequence, CommitStep, RemoveStaging
from distcp.commit.upload_steps import abort_uploads
from distcp.converters.base import NOT_EXPANDED
from distcp.datasets.partitions import StreamMarks
from distcp.datasets.recursive import PER_FILE
from distcp.errors import CatalogError, PublishError, StateError
from distcp.model import CopyableFile, TaskResult
from distcp.planning.moving import identical_skips, movable
from distcp.planning.plan import DatasetPlan, Plan
from distcp.registry import PUBLISHERS
from distcp.runlog import NO_LOG, RunLog
from distcp.state.store import urn_key
from distcp.storage import NO_SERVER_SIDE, Capabilities, parse_staged
from distcp.storage import filesystems as fsutil
from distcp.summary import Failure, Tally, tally_of

CommitPolicy = Literal["full", "successful", "partial"]


@dataclass(frozen=True)
class Publishing:
    """What publishing one run needs besides the results."""

    job_id: str
    started: float
    ctx: CommitContext
    store: CommitStepStore
    recovery: RecoveryArea
    policy: CommitPolicy = "successful"
    #: ``--log-file``: the outcome of each file (the decisions are logged at planning).
    log: RunLog = NO_LOG
    #: ``--catalog-table``: each published partition registered, last in its sequence.
    catalog: CatalogTarget | None = None
    #: ``pydistcp move``: each published set's sequence ends by deleting its sources;
    #: ``compare`` says which skipped files are the same file at the destination.
    move: bool = False
    compare: str = "default"
    #: ``move --delete-empty-src-dirs``: source directories left empty go too.
    delete_empty_src_dirs: bool = False
    #: The destination the run writes (its events' job) and the fork branch it is.
    destination: str = ""
    branch: str = "main"


def _published(r: TaskResult) -> bool:
    """Whether a task already published this result's file (``--visibility file``)."""
    return parse_staged(r.staging).is_published


def outcomes_of(dataset: DatasetPlan, results: Sequence[TaskResult],
                capabilities: Capabilities | None = None) -> list[FileSetOutcome]:
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
    holding = {d.file_set for d in dataset.directories}
    names = set(by_set) | holding
    if dataset.delete or not names:
        names.add(next(iter(sorted(names)), "all"))
    # Sets holding directory attributes go last: publishing files into a directory
    # changes its mtime (converted datasets have one file set per file).
    order = sorted(names, key=lambda n: (n in holding, n))
    if dataset.order:  # the dataset's own order (a Delta table's versions) is the contract
        rank = {n: i for i, n in enumerate(dataset.order)}
        order = sorted(names, key=lambda n: (rank.get(n, len(rank)), n))
    first = next((n for n in order if n in holding), order[0])
    return [FileSetOutcome(
        dataset_urn=dataset.urn, file_set=name, destination_root=dataset.destination_root,
        results=tuple(by_set.get(name, ())),
        directories=tuple(d for d in dataset.directories if d.file_set == name),
        deletes=dataset.delete if name == first else (),
        capabilities=capabilities or Capabilities()) for name in order]


def publish_plan(plan: Plan, results: Sequence[TaskResult], pub: Publishing,
                 publisher: SequencePlanner | None = None) -> Tally:
    """Publish per the commit policy; keep unpublished verified copies for recovery.

    Returns what was published, kept and failed, for the run's Summary.
    """
    publisher = publisher or PUBLISHERS.get("rename")()
    tallies = [_note_server_side_fallbacks(results)]
    files = {f.guid: f for d in plan.datasets for f in (a.file for a in d.copy)}
    marks = {d.urn: d.marks for d in plan.datasets if d.marks is not None}
    outcomes = _outcomes(plan, results, pub.ctx)
    skipped = _moved_skips(plan, outcomes, pub) if pub.move else {}
    all_ok = all(o.ok for o in outcomes)
    ordered = {d.urn for d in plan.datasets if d.order}
    announced = {d.urn: d.announced for d in plan.datasets if d.announced is not None}
    ending = {(d.urn, r.file_set): RegisterIcebergMetadata(r.catalog, r.table, r.location,
                                                          r.previous)
              for d in plan.datasets for r in d.registrations}
    stopped: dict[str, str] = {}  # an ordered dataset's first set not published whole
    held: Counter[str] = Counter()
    for outcome in outcomes:
        urn = outcome.dataset_urn
        tallies.append(_record_failures(outcome))
        pub.log.results("failed", [r for r in outcome.results if not r.ok])
        wanted = None if urn in stopped else _publishable(outcome, pub.policy, all_ok)
        if wanted is None:
            tallies.append(_hold_back(outcome, files, pub))
            held[urn] += urn in stopped
            whole = False
        else:
            key = (urn, outcome.file_set)
            done = _publish_set(publisher, outcome, wanted, files, pub, marks.get(urn),
                                skipped.get(key, ()), outcome.file_set in announced.get(
                                    urn, (outcome.file_set,)), ending.get(key))
            tallies.append(done)
            whole = wanted is outcome and not done.failures
        if urn in ordered and not whole:
            stopped.setdefault(urn, outcome.file_set)
    tallies.extend(_stopped(plan, stopped, held))
    return tally_of(tallies)


def _stopped(plan: Plan, stopped: dict[str, str], held: Counter[str]) -> list[Tally]:
    """A line per ordered dataset (a Delta table) stopped at a set not published whole
    whose later sets were held back: they wait for the next run, so no commit is
    published before its data (the failed files have their own lines)."""
    roots = {d.urn: d.destination_root for d in plan.datasets}
    return [Tally(failures=(Failure(
        fsutil.display(roots[urn]), f"file set {name} was not published whole: the "
        f"{held[urn]} file set(s) after it (later versions, checkpoints) wait for the next "
        "run", urn, files=0),)) for urn, name in stopped.items() if held[urn]]


def publishable_guids(plan: Plan, results: Sequence[TaskResult], pub: Publishing) -> set[str]:
    """The files of ``results`` that ``publish_plan`` would publish now under the run's
    commit policy (the fork's ``all`` policy asks every branch before any publishes)."""
    outcomes = _outcomes(plan, results, pub.ctx)
    all_ok = all(o.ok for o in outcomes)
    kept: set[str] = set()
    for outcome in outcomes:
        wanted = _publishable(outcome, pub.policy, all_ok)
        if wanted is not None:
            kept.update(r.guid for r in wanted.results)
    return kept


def _moved_skips(plan: Plan, outcomes: Sequence[FileSetOutcome], pub: Publishing
                 ) -> dict[tuple[str, str], tuple[CopyableFile, ...]]:
    """``move``: the skipped files identical at the destination, by the file set whose
    sequence deletes their sources (their own set, else the dataset's first)."""
    sets = {(o.dataset_urn, o.file_set) for o in outcomes}
    first: dict[str, str] = {}
    for o in outcomes:
        first.setdefault(o.dataset_urn, o.file_set)
    out: dict[tuple[str, str], list[CopyableFile]] = defaultdict(list)
    for d in plan.datasets:
        for a in identical_skips(d, pub.compare):
            key = (d.urn, a.file.file_set)
            if key not in sets and d.urn in first:
                key = (d.urn, first[d.urn])
            out[key].append(a.file)
    return {k: tuple(v) for k, v in out.items()}


def _outcomes(plan: Plan, results: Sequence[TaskResult], ctx: CommitContext
              ) -> list[FileSetOutcome]:
    """Every file set of the plan, dataset by dataset, with what its storage can do."""
    by_dataset: dict[str, list[TaskResult]] = defaultdict(list)
    for r in results:
        by_dataset[r.dataset_urn].append(r)
    return [o for d in plan.datasets for o in outcomes_of(
        d, by_dataset.get(d.urn, []), ctx.storage(d.destination_root).capabilities)]


def _publishable(outcome: FileSetOutcome, policy: CommitPolicy, all_ok: bool
                 ) -> FileSetOutcome | None:
    """What of the set to publish now; None: hold all of it back for recovery.

    --commit-policy full holds every set back once any set failed; a failed set
    publishes its good files only under --commit-policy partial or in a plain copy
    (``PER_FILE``: each file is its own unit).
    """
    if policy == "full" and not all_ok:
        return None
    if outcome.ok:
        return outcome
    per_file = policy == "partial" or outcome.file_set == PER_FILE
    return _ok_part(outcome) if per_file else None


def _hold_back(outcome: FileSetOutcome, files: dict[str, CopyableFile],
               pub: Publishing) -> Tally:
    """Keep the set's verified copies for the next run, and log what stays unpublished
    (objects a task already published, --visibility file, count as copied)."""
    tally = _keep_for_recovery(outcome, files, pub.recovery, pub.ctx)
    done = [r for r in outcome.results if r.ok]
    pub.log.results("copied", [r for r in done if _published(r)])
    pub.log.results("not-published", [r for r in done if not _published(r)])
    return tally


def _publish_set(publisher: SequencePlanner, outcome: FileSetOutcome, wanted: FileSetOutcome,
                 files: dict[str, CopyableFile], pub: Publishing,
                 marks: StreamMarks | None = None,
                 skipped: Sequence[CopyableFile] = (), announce: bool = True,
                 ending: CommitStep | None = None) -> Tally:
    """Publish ``wanted`` (all or the good part of ``outcome``) through the commit log;
    under ``move``, delete the sources of its files and of ``skipped`` after the data
    (a catalog registration stays the last step)."""
    registered = Tally()
    try:
        sequence = _sequence(publisher, wanted, files, pub, complete=outcome.ok, marks=marks,
                             announce=announce, ending=ending)
        if pub.move:
            failed = {r.guid for r in outcome.results if not r.ok}
            sequence = with_source_deletes(sequence, wanted.results, files, skipped, failed)
            if pub.delete_empty_src_dirs:
                sequence = with_empty_dirs_removed(sequence, wanted, pub.ctx)
            sequence = _registrations_last(sequence)
        run_logged(sequence, pub)
        registered = Tally(partitions_registered=registered_in(sequence.steps))
    except CatalogError as exc:  # the last step: everything before it is published
        pub.store.persist(registrations_left(sequence), pub.job_id)
        registered = Tally(catalog_failures=(Failure(
            fsutil.display(outcome.destination_root), f"{exc}; the data is published, "
            "the next run registers it"),))
    except (PublishError, StateError) as exc:
        return _publish_failed(outcome, wanted, exc, pub.log)
    tally = _record_published(wanted) + registered + Tally(sources_deleted=sum(
        len(step.entries) for step in sequence.steps if isinstance(step, DeleteSources)))
    pub.log.results("copied", wanted.results)
    pub.log.deleted(wanted.deletes)
    return tally


def _registrations_last(sequence: CommitSequence) -> CommitSequence:
    """A catalog registration after every other step (a failed one leaves the data, and
    here the source deletions, done: ``registrations_left``)."""
    steps = sorted(sequence.steps, key=lambda s: isinstance(s, RegisterPartitions))
    return replace(sequence, steps=tuple(steps))


def run_logged(sequence: CommitSequence, pub: Publishing) -> None:
    """Persisted before its first step, removed after its last: a crash in between
    leaves it for the next run to replay."""
    pub.store.persist(sequence, pub.job_id)
    sequence.run(pub.ctx, fresh=True)
    pub.store.remove(sequence.id)


def _publish_failed(outcome: FileSetOutcome, wanted: FileSetOutcome, exc: Exception,
                    log: RunLog) -> Tally:
    """A set whose publish failed stays in the commit log for the next run; only what
    tasks had already published (--visibility file) counts as copied."""
    published = [r for r in wanted.results if _published(r)]
    unpublished = {r.guid for r in wanted.results if not _published(r)}
    tally = Tally(
        failures=(Failure(fsutil.display(outcome.destination_root),
                          f"{exc}; the next run retries it", outcome.dataset_urn,
                          files=len(unpublished)),),
        files_not_published=sum(1 for r in wanted.results if r.staging
                                and not _published(r))) + _record_copied(published)
    log.results("copied", published)
    log.results("not-published", [r for r in wanted.results if r.ok and not _published(r)])
    return tally


def _note_server_side_fallbacks(results: Sequence[TaskResult]) -> Tally:
    """Say when S3 -> S3 files went through the tasks because the server cannot copy, and
    which archive entries were left out by ``--archive-links skip``."""
    notes: list[str] = []
    fallbacks = [r for r in results if r.ok and r.message.startswith(NO_SERVER_SIDE)]
    if fallbacks:
        why = fallbacks[0].message.removeprefix(NO_SERVER_SIDE)
        notes.append(f"server-side copy not used for {len(fallbacks)} file(s), "
                     f"copied through the tasks instead: {why}")
    notes.extend(f"{fsutil.display(r.origin)}: {r.message}" for r in results
                 if r.ok and r.message.startswith(NOT_EXPANDED))
    return Tally(notes=tuple(notes))


def _sequence(publisher: SequencePlanner, outcome: FileSetOutcome, files: dict[str, CopyableFile],
              pub: Publishing, complete: bool = True,
              marks: StreamMarks | None = None, announce: bool = True,
              ending: CommitStep | None = None) -> CommitSequence:
    """``complete``: the whole set is published (False: only its good files, whose
    ``outcome`` then looks all ok; the run history must still say "partial").
    ``marks``: a stream dataset's watermarks, moved after the set's data. ``announce``:
    whether the set's publishing is announced (a table's data is not: its commit is).
    ``ending``: the dataset's registration for this set (an Iceberg catalog's swap), after
    the data and the state, before the event: the event says the version is readable.

    The order is the contract a replay relies on: the publisher's steps (the data),
    then the recovered copies' folders, the manifest and watermarks, the run record,
    the event, and a catalog registration last."""
    base = publisher.sequence_for(outcome, [])
    sid = sequence_id(pub.job_id, outcome.dataset_urn, outcome.file_set)
    staged = [r for r in outcome.results if r.staging]
    steps = [*base.steps, *_recovered_removal(outcome, pub),
             *_state_steps(sid, outcome, files, staged, marks),
             _run_record(sid, outcome, pub, staged, complete),
             *((ending,) if ending is not None and complete else ()),
             *(_announcement(sid, outcome, pub, staged) if announce else ()),
             *_registration(outcome, pub, staged)]
    return CommitSequence(outcome.dataset_urn, outcome.file_set, tuple(steps), sid)


def _recovered_removal(outcome: FileSetOutcome, pub: Publishing) -> list[CommitStep]:
    """The recovery area's folders of the copies this set reused: removed only once the
    set is published, so a crash before that still finds them for the next run."""
    recovered = tuple(sorted({pub.recovery.folder_url(r.guid) for r in outcome.results
                              if r.attempt == "recovered"}))
    return [RemoveStaging(recovered)] if recovered else []


def _state_steps(sid: str, outcome: FileSetOutcome, files: dict[str, CopyableFile],
                 staged: Sequence[TaskResult], marks: StreamMarks | None) -> list[CommitStep]:
    """The manifest (only when the set wrote or deleted something: an empty entry
    would still cost a compaction), then the watermarks, which must never pass data
    that is not published yet."""
    steps: list[CommitStep] = []
    entries = tuple(_manifest_entries(outcome.results, files))
    if entries or outcome.deletes:
        steps += [AppendManifest(sid, outcome.dataset_urn, entries, tuple(outcome.deletes)),
                  CompactManifest(outcome.dataset_urn)]
    mtimes = [files[r.guid].origin.mtime for r in staged if r.guid in files]
    steps.append(AdvanceWatermark(sid, outcome.dataset_urn, max(mtimes) if mtimes else None))
    if marks is not None:
        steps.append(RecordWatermarks(sid, outcome.dataset_urn, marks.low, marks.expected_high,
                                      marks.time_of(outcome.file_set)))
    return steps


def _run_record(sid: str, outcome: FileSetOutcome, pub: Publishing,
                staged: Sequence[TaskResult], complete: bool) -> RecordRun:
    """The run history's line for this set: "partial" when only its good files are
    published, though ``outcome`` then holds only ok results."""
    status = "ok" if complete and outcome.ok else "partial"
    return RecordRun(sid, outcome.dataset_urn, pub.job_id, outcome.file_set, status,
                     len(staged), sum(r.bytes_written for r in staged), pub.started)


def _announcement(sid: str, outcome: FileSetOutcome, pub: Publishing,
                  staged: Sequence[TaskResult]) -> list[CommitStep]:
    """The set's data-availability event; a set that changed nothing announces nothing."""
    if not (staged or outcome.deletes):
        return []
    return [EmitEvent(sid, outcome.dataset_urn, outcome.file_set, outcome.destination_root,
                      len(staged), sum(r.bytes_written for r in staged), pub.job_id,
                      pub.destination, pub.branch)]


def _registration(outcome: FileSetOutcome, pub: Publishing,
                  staged: Sequence[TaskResult]) -> list[CommitStep]:
    """``--catalog-table``'s step, last: a metastore that is down never holds the data,
    its manifest or its event back (``registrations_left`` keeps it alone)."""
    if pub.catalog is None:
        return []
    partitions = partitions_of(pub.catalog, outcome.destination_root,
                               (r.destination for r in staged if r.ok))
    return [RegisterPartitions(pub.catalog.table, partitions)] if partitions else []


def with_source_deletes(sequence: CommitSequence, results: Sequence[TaskResult],
                        files: dict[str, CopyableFile], skipped: Sequence[CopyableFile],
                        failed: set[str]) -> CommitSequence:
    """``sequence`` ending with the deletion of the sources it published (and of
    ``skipped``, identical at the destination); a source with any failed output stays."""
    entries: list[SourceEntry] = []
    by_guid: dict[str, list[TaskResult]] = defaultdict(list)
    for r in results:
        if r.ok and r.guid not in failed and (r.staging or r.destination.endswith("/")):
            by_guid[r.guid].append(r)
    for guid, rs in by_guid.items():
        f = files.get(guid)
        if f is None or not movable(f):
            continue
        if f.converters:
            outputs = tuple(sorted({(r.destination, r.bytes_written) for r in rs
                                    if not r.destination.endswith("/")}))
        else:
            outputs = ((f.destination, f.origin.size),)
        entries.append((f.origin.url, f.origin.size, f.origin.mtime, outputs))
    entries += [(f.origin.url, f.origin.size, f.origin.mtime, ((f.destination, f.origin.size),))
                for f in skipped]
    if not entries:
        return sequence
    step = DeleteSources(tuple(sorted(entries)))
    return replace(sequence, steps=(*sequence.steps, step))


def with_empty_dirs_removed(sequence: CommitSequence, outcome: FileSetOutcome,
                            ctx: CommitContext) -> CommitSequence:
    """``sequence`` ending with the removal of the source directories its set holds
    that the move left empty (never a dataset's root; sources without directories:
    none to remove)."""
    urls = tuple(sorted(d.origin.url for d in outcome.directories
                        if d.destination != outcome.destination_root
                        and ctx.source_storage(d.origin.url).capabilities.directories))
    if not urls:
        return sequence
    return replace(sequence, steps=(*sequence.steps, RemoveEmptySourceDirs(urls)))


def sequence_id(job_id: str, urn: str, file_set: str) -> str:
    return f"{job_id}-{urn_key(urn)[:10]}-{hashlib.sha1(file_set.encode()).hexdigest()[:6]}"


def _manifest_entries(results: Sequence[TaskResult], files: dict[str, CopyableFile]):  # type: ignore[no-untyped-def]
    """(destination, size, origin mtime, digest, guid) per output, plus the planned
    destination of converted files, so --incremental can skip them too."""
    for r in results:
        f = files.get(r.guid)
        if f is None or not r.staging:
            continue
        yield (r.destination, r.bytes_written, f.origin.mtime, r.checksum, r.guid)
        if f.converters and r.destination != f.destination:
            yield (f.destination, -1, f.origin.mtime, "", r.guid)


def _ok_part(outcome: FileSetOutcome) -> FileSetOutcome | None:
    """Under --commit-policy partial, or in a plain copy's ``PER_FILE`` set: the files of
    a failed set that did succeed."""
    ok = tuple(r for r in outcome.results if r.ok)
    return replace(outcome, results=ok, deletes=()) if ok else None


def _keep_for_recovery(outcome: FileSetOutcome, files: dict[str, CopyableFile],
                       recovery: RecoveryArea, ctx: CommitContext) -> Tally:
    """Keep verified copies of a failed set for the next run; abort its staged uploads.

    A staged upload is not kept: a failed file set leaves no object and no pending
    upload (split files excepted: their ranges stay for the next run to resume).
    """
    by_guid: dict[str, list[TaskResult]] = defaultdict(list)
    # Objects published as they were copied (--visibility file) stay: each is whole.
    done = _record_copied([r for r in outcome.results if r.ok and _published(r)])
    for r in outcome.results:
        if r.records:
            continue
        if r.staging and parse_staged(r.staging).in_store:
            abort_uploads([r.staging], ctx.dst_options)
            continue
        by_guid[r.guid].append(r)
    for guid, rs in by_guid.items():
        staged = [r for r in rs if r.staging]
        if not staged or not all(r.ok for r in rs) or rs[0].attempt == "recovered":
            continue
        f = files.get(guid)
        try:
            recovery.keep(guid, f.destination if f else rs[0].destination, rs)
            done = done + Tally(files_not_published=len(staged))
        except OSError:
            pass  # cannot keep it: it is staged garbage, swept with its job
    return done


def _record_copied(results: Sequence[TaskResult]) -> Tally:
    return Tally(files_copied=len(results),
                 links_copied=sum(1 for r in results if r.link_target is not None),
                 bytes_copied=sum(r.bytes_written for r in results))


def _record_published(outcome: FileSetOutcome) -> Tally:
    staged = [r for r in outcome.results if r.staging]
    recovered = [r for r in staged if r.attempt == "recovered"]
    return _record_copied(staged) + Tally(
        files_recovered=len(recovered), bytes_recovered=sum(r.bytes_written for r in recovered),
        files_deleted=len(outcome.deletes), directories_created=len(outcome.directories))


def _record_failures(outcome: FileSetOutcome) -> Tally:
    """A line per failed result; a source counts once, on its first line, however many
    of its outputs failed (an archive's members)."""
    seen: set[str] = set()
    lines = []
    for r in outcome.results:
        if not r.ok:
            lines.append(Failure(fsutil.display(r.origin), r.message, outcome.dataset_urn,
                                 files=int(r.guid not in seen)))
            seen.add(r.guid)
    return Tally(failures=tuple(lines))
