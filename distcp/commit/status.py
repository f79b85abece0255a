"""``pydistcp status`` and ``recover``: look at and finish a destination's state (driver).

(Named ``status_report``, not ``inspect``, which would shadow the standard library's.)
"""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict
from typing import Any

from distcp.callbacks import human_bytes
from distcp.commit.catalog_steps import RegisterPartitions
from distcp.commit.log import CommitStepStore
from distcp.commit.recovery import RecoveryArea
from distcp.commit.replay import read_journal, replay_pending, sweep_dead_jobs
from distcp.commit.steps import CommitContext
from distcp.events.sinks import EventSink
from distcp.model import FileStatus
from distcp.names import printable_lines
from distcp.state.bounds import Bounds
from distcp.state.layout import StateLayout, state_root_of
from distcp.state.lock import DestinationLock, Holder, live_holder
from distcp.state.outcomes import OutcomeStore, RunOutcome
from distcp.state.store import DatasetState, StateStore, read_json_or_none
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.spec import written_url
from distcp.summary import StatusReport, Summary


def resolve_state_root(destination: str | None, state_dir: str | None,
                       options: dict[str, Any]) -> str:
    """``--state-dir``, else the ``.pydistcp`` directory a copy to DST would use
    (``state.layout.state_root_of``: beside DST when DST is a file)."""
    if state_dir:
        return state_root_of(destination or "", options, state_dir)
    if not destination:
        from distcp.errors import ConfigurationError

        raise ConfigurationError("give DST or --state-dir")
    single = destination if _is_file(destination, options) else None
    return state_root_of(destination, options, single_file=single)


def destination_of(root: str, destination: str | None, options: dict[str, Any]) -> str:
    """The destination a state root serves: ``destination`` when given, else the folder
    holding a state root of the default name; a ``--state-dir`` of another name does not
    say, and commits are not replayed without it."""
    from distcp.errors import ConfigurationError

    if destination:
        return written_url(destination, options)
    parent, _, name = root.rstrip("/").rpartition("/")
    if name != fsutil.STATE_DIR_NAME:
        raise ConfigurationError(
            f"recover: give DST with --state-dir {fsutil.display(root)}: pending commits "
            "are checked against their destination before anything of them runs")
    return parent or "/"


def existing_state_root(destination: str | None, state_dir: str | None,
                        options: dict[str, Any]) -> tuple[str, bool]:
    """resolve_state_root for status/recover/cleanup, refusing a DST or --state-dir that
    does not exist (a typo would otherwise report "nothing pending" and exit 0).

    Returns the state root and whether it exists (an existing DST never copied to by
    pydistcp has none).
    """
    from distcp.errors import PlanningError

    for given, what in ((state_dir, "--state-dir"), (destination, "destination")):
        if given and not _exists(given, options):
            raise PlanningError(f"no such {what}: {fsutil.display(given)}", path=given)
    root = resolve_state_root(destination, state_dir, options)
    return root, _exists(root, options)


def _exists(url: str, options: dict[str, Any]) -> bool:
    return _status(url, options) is not None


def _is_file(url: str, options: dict[str, Any]) -> bool:
    status = _status(url, options)
    return status is not None and not status.is_dir


def _status(url: str, options: dict[str, Any]) -> FileStatus | None:
    """What is at ``url`` (a link: what it points to), None if nothing."""
    stripped = url.rstrip("/")
    try:
        return storage_for(url, options).stat(
            stripped if stripped and not stripped.endswith(":") else url)
    except FileNotFoundError:
        return None


def status_report(root: str, options: dict[str, Any]) -> StatusReport:
    """Pending and set-aside commits, per-dataset watermarks and runs, recoverable files."""
    store = CommitStepStore(root, options)
    seq = [{"id": p.sequence.id, "dataset": p.sequence.dataset_urn, "file_set": p.sequence.file_set,
            "job_id": p.job_id, "replays": p.replays,
            "steps": [s.kind for s in p.sequence.steps]} for p in store.pending()]
    aside = [{"id": p.sequence.id, "dataset": p.sequence.dataset_urn, "replays": p.replays,
              "file": fsutil.display(p.url)} for p in store.pending(aside=True)]
    datasets = _datasets(root, options)
    recoverable = [{"guid": e["guid"], "destination": e["destination"],
                    "bytes": sum(o.get("bytes_written", 0) for o in e["outputs"]),
                    "kept_s_ago": round(time.time() - e["kept"], 1)}
                   for e in RecoveryArea(root, options).entries()]
    holder = live_holder(root, options)
    journaled = [{"job_id": job, "destination": planned, "bytes": size}
                 for job, planned, size in journaled_copies(root, options, holder)]
    return StatusReport(state_dir=fsutil.display(root),
                        running=asdict(holder) if holder else None, pending=seq,
                        set_aside=aside, datasets=datasets, recoverable=recoverable,
                        journaled=journaled, continuous=_continuous(root, options, holder))


def _continuous(root: str, options: dict[str, Any], holder: Holder | None
                ) -> dict[str, Any] | None:
    """The continuous copy's status document, ``running`` while its job holds the lock
    (a killed one's document still says "running": the lock tells)."""
    url = StateLayout(root).continuous_status
    doc = read_json_or_none(url, options, "the continuous status")
    if doc is None:
        return None
    return {**doc, "running": holder is not None and holder.job_id == doc.get("job_id")}


def _datasets(root: str, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Each dataset the state knows: watermark, files, its history's last lines and how
    its last run went (``last_run``), also of a dataset whose runs failed before any
    of its file sets was published (it has an outcome and no state document)."""
    states = StateStore(root, options)
    outcomes = OutcomeStore(root, options)
    known = states.all()
    seen = {s.urn for s in known}
    known += [states.load(urn) for urn in outcomes.urns() if urn not in seen]
    return [{"dataset": s.urn, "watermark": s.watermark, "files": states.count(s),
             "last_runs": s.runs[-5:], "last_run": last_run(s.runs, outcomes.load(s.urn)),
             **_stream_marks(s)} for s in known]


def last_run(history: list[dict[str, Any]], outcome: RunOutcome | None
             ) -> dict[str, Any] | None:
    """How the dataset's last run went: the run's outcome (ok, or failed with its
    cause), unless the history holds a newer line (a commit that ``recover`` or a later
    run finished); the history's line alone for a dataset no run kept an outcome of."""
    line = history[-1] if history else None
    if outcome is not None and (line is None or outcome.ended >= line.get("ended", 0)):
        return {"job_id": outcome.job_id, "status": outcome.status, "cause": outcome.cause,
                "ended": outcome.ended}
    if line is None:
        return None
    return {"job_id": line.get("job_id", ""), "status": line.get("status", ""), "cause": "",
            "ended": line.get("ended", 0.0)}


def _stream_marks(state: DatasetState) -> dict[str, Any]:
    """A stream dataset's three watermarks (epoch seconds and UTC time); nothing for
    other datasets."""
    marks = state.watermarks
    if marks is None:
        return {}
    return {"watermarks": {name: {"time": value, "utc": utc_text(value)}
                           for name, value in marks.to_dict().items()}}


def utc_text(value: float | None) -> str | None:
    """``2026-11-23T10:00:00Z``: partitions are named in UTC, so are their watermarks."""
    if value is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(value))


def journaled_copies(root: str, options: dict[str, Any], holder: Holder | None
                     ) -> list[tuple[str, str, int]]:
    """(job, planned destination, bytes) of each copy that a run which is no longer
    running journaled as verified: the next run (or ``recover``) keeps them."""
    try:
        jobs = storage_for(root, options).names(StateLayout(root).progress())
    except FileNotFoundError:
        return []
    out: list[tuple[str, str, int]] = []
    for job in sorted(jobs):
        if holder is not None and job == holder.job_id:
            continue
        for planned, results in read_journal(root, options, job).values():
            out.append((job, planned, sum(r.bytes_written for r in results)))
    return out


def _continuous_line(doc: dict[str, Any]) -> str:
    """``continuous copy: running, 12 batches, ...``: a running copy's progress and lag,
    or how the last one ended."""
    state = "running" if doc["running"] else (
        "stopped" if doc["state"] == "stopped" else "not running (ended without stopping)")
    last = doc.get("last_batch") or {}
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last["ended"])) if last else "-"
    return (f"continuous copy: {state}, job {doc['job_id']}, {doc['batches']} batch(es), "
            f"{doc['files_copied']} files ({human_bytes(doc['bytes_copied'])}) published; "
            f"last batch {last.get('id', '-')} at {when} ({last.get('files', 0)} files); "
            f"lag {doc['lag_seconds']:.1f} s, waiting {doc['waiting_files']} files "
            f"({human_bytes(doc['waiting_bytes'])})")


def render_status(report: StatusReport) -> str:
    lines = [f"state: {report['state_dir']}",
             f"pending commits: {len(report['pending'])}"]
    for p in report["pending"]:
        lines.append(f"  {p['id']}  {p['dataset']} ({p['file_set']}), replays {p['replays']}, "
                     f"steps {','.join(p['steps'])}")
        if p["steps"] == [RegisterPartitions.kind]:
            lines.append("    a catalog registration an earlier run could not make (its data "
                         "is published): each run retries it; 'pydistcp cleanup DST "
                         "--forget-registrations' drops it")
    if report["set_aside"]:
        lines.append(f"set aside (need attention): {len(report['set_aside'])}")
        lines += [f"  {a['id']}  {a['dataset']}: {a['file']}" for a in report["set_aside"]]
    lines.append(f"datasets: {len(report['datasets'])}")
    for d in report["datasets"]:
        last = d["last_run"]
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last["ended"])) if last else "-"
        wm = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(d["watermark"])) \
            if d["watermark"] else "-"
        lines.append(f"  {d['dataset']}: watermark {wm}, {d['files']} files published, "
                     f"last run {last['job_id'] if last else '-'} {when} "
                     f"{last['status'] if last else ''}".rstrip())
        if last and last["cause"]:
            lines.append(f"    failed: {last['cause']}")
        if d.get("watermarks"):
            marks = {k: v["utc"] or "-" for k, v in d["watermarks"].items()}
            lines.append(f"    partitions: low {marks['low']}, expected high "
                         f"{marks['expected_high']}, actual high {marks['actual_high']}")
    total = sum(r["bytes"] for r in report["recoverable"])
    lines.append(f"recoverable files: {len(report['recoverable'])} ({human_bytes(total)}) kept "
                 "verified in the recovery area")
    if report["journaled"]:
        size = sum(j["bytes"] for j in report["journaled"])
        jobs = sorted({j["job_id"] for j in report["journaled"]})
        lines.append(f"verified copies journaled by interrupted runs: {len(report['journaled'])} "
                     f"({human_bytes(size)}, job {', '.join(jobs)}); 'pydistcp recover' or the "
                     "next copy keeps them, and the next copy publishes them without reading "
                     "their sources again")
    if report["continuous"]:
        lines.append(_continuous_line(report["continuous"]))
    if report["running"]:
        lines.insert(1, f"running now: {Holder(**report['running']).describe()}")
    return printable_lines(lines)  # a name holding a newline must not start a line


def recover_only(root: str, options: dict[str, Any], max_replays: int = 3,
                 src_options: dict[str, Any] | None = None,
                 events: EventSink | None = None, destination: str | None = None
                 ) -> Summary:
    """Replay pending commits and keep interrupted runs' verified copies; copy nothing.

    ``src_options``: the sources' storage options, which a pending ``move`` needs to
    delete the sources it published (they are never in the commit log). ``destination``:
    what pending commits may publish to (default: the folder holding a state root named
    ``.pydistcp``); a commit naming anything else is set aside, not executed. ``events``:
    where replayed commits' events go (and what earlier runs left in the outbox).

    Pending commits are published here. Journaled copies are moved to the recovery
    area, not published: a copy is published with its whole file set, and which
    files make up a set is known only from the sources' listing, which the next
    ``copy`` makes (it then publishes the kept copies without reading them again).
    """
    # unique: two recovers within a second must not take each other for the lock's holder
    summary = Summary(job_id=f"recover-{int(time.time())}-{secrets.token_hex(3)}")
    start = time.monotonic()
    with DestinationLock(root, options, summary.job_id, command="recover"):
        store = CommitStepStore(root, options)
        sink = events or EventSink(None, root, options)
        sink.flush()
        ctx = CommitContext(dict(options), root, src_options=dict(src_options or {}),
                            events=sink, bounds=Bounds(destination_of(root, destination, options),
                                                       root, None))
        summary.add(replay_pending(store, ctx, max_replays)[1])
        keep = {p.job_id for p in store.unfinished()}
        recovery = RecoveryArea(root, options)
        kept = sweep_dead_jobs(root, options, "", recovery, keep)
        entries = list(recovery.entries())
    total = sum(o.get("bytes_written", 0) for e in entries for o in e["outputs"])
    if kept:
        summary.notes.append(f"kept {kept} verified copies that interrupted runs journaled")
    if entries:
        summary.notes.append(
            f"{len(entries)} verified copies ({human_bytes(total)}) wait in the recovery area: "
            "the next 'pydistcp copy' to this destination publishes them with their file "
            "sets, without reading their sources again")
    summary.duration_s = round(time.monotonic() - start, 3)
    return summary
