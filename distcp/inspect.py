"""``pydistcp status`` and ``pydistcp recover``: look at and finish a destination's state."""

from __future__ import annotations

import posixpath
import time
from typing import Any

from distcp import fs as fsutil
from distcp.commit import CommitContext
from distcp.commit_log import CommitStepStore
from distcp.recovery import RecoveryArea
from distcp.replay import replay_pending, sweep_dead_jobs
from distcp.state import StateStore
from distcp.summary import Summary


def resolve_state_root(destination: str | None, state_dir: str | None,
                       options: dict[str, Any]) -> str:
    """``--state-dir``, else the ``.pydistcp`` directory a copy to DST would use."""
    if state_dir:
        fs, path = fsutil.filesystem(state_dir, options)
        return fsutil.to_url(fs, path.rstrip("/"))
    if not destination:
        from distcp.errors import ConfigurationError

        raise ConfigurationError("give DST or --state-dir")
    fs, path = fsutil.filesystem(destination, options)
    path = path.rstrip("/") or "/"
    if fs.isfile(path):
        path = posixpath.dirname(path)
    return fsutil.to_url(fs, fsutil.join(path, fsutil.STATE_DIR_NAME))


def status_report(root: str, options: dict[str, Any]) -> dict[str, Any]:
    """Pending and set-aside commits, per-dataset watermarks and runs, recoverable files."""
    store = CommitStepStore(root, options)
    seq = [{"id": p.sequence.id, "dataset": p.sequence.dataset_urn, "file_set": p.sequence.file_set,
            "job_id": p.job_id, "replays": p.replays,
            "steps": [s.kind for s in p.sequence.steps]} for p in store.pending()]
    aside = [{"id": p.sequence.id, "dataset": p.sequence.dataset_urn, "replays": p.replays,
              "file": fsutil.display(p.url)} for p in store.pending(aside=True)]
    datasets = [{"dataset": s.urn, "watermark": s.watermark, "files": len(s.manifest),
                 "last_runs": s.runs[-5:]} for s in StateStore(root, options).all()]
    recoverable = [{"guid": e["guid"], "destination": e["destination"],
                    "bytes": sum(o.get("bytes_written", 0) for o in e["outputs"]),
                    "kept_s_ago": round(time.time() - e["kept"], 1)}
                   for e in RecoveryArea(root, options).entries()]
    return {"state_dir": fsutil.display(root), "pending": seq, "set_aside": aside,
            "datasets": datasets, "recoverable": recoverable}


def render_status(report: dict[str, Any]) -> str:
    lines = [f"state: {report['state_dir']}",
             f"pending commits: {len(report['pending'])}"]
    lines += [f"  {p['id']}  {p['dataset']} ({p['file_set']}), replays {p['replays']}, "
              f"steps {','.join(p['steps'])}" for p in report["pending"]]
    if report["set_aside"]:
        lines.append(f"set aside (need attention): {len(report['set_aside'])}")
        lines += [f"  {a['id']}  {a['dataset']}: {a['file']}" for a in report["set_aside"]]
    lines.append(f"datasets: {len(report['datasets'])}")
    for d in report["datasets"]:
        last = d["last_runs"][-1] if d["last_runs"] else None
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last["ended"])) if last else "-"
        wm = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(d["watermark"])) \
            if d["watermark"] else "-"
        lines.append(f"  {d['dataset']}: watermark {wm}, {d['files']} files published, "
                     f"last run {last['job_id'] if last else '-'} {when} "
                     f"{last['status'] if last else ''}".rstrip())
    total = sum(r["bytes"] for r in report["recoverable"])
    lines.append(f"recoverable files: {len(report['recoverable'])} ({total} bytes)")
    return "\n".join(lines)


def recover_only(root: str, options: dict[str, Any], max_replays: int = 3) -> Summary:
    """Replay pending commits and keep orphaned copies; copy nothing new."""
    summary = Summary(job_id="recover")
    start = time.monotonic()
    store = CommitStepStore(root, options)
    replay_pending(store, CommitContext(dict(options), root), max_replays, summary)
    keep = {p.job_id for p in store.pending() + store.pending(aside=True)}
    sweep_dead_jobs(root, options, "", RecoveryArea(root, options), keep)
    summary.duration_s = round(time.monotonic() - start, 3)
    return summary
