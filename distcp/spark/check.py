"""One check, ``pydistcp check SRC DST``, on Spark (driver).

List both sides, judge what the listings can, read the rest on Spark, report.

Reads only: nothing is written to either side, except the progress documents of the
digest tasks, under the state directory's ``progress/`` folder when the destination
already has one (a destination pydistcp never wrote to gets no folder created).
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

from distcp import preflight
from distcp.callbacks import DEFAULT_CALLBACK, Callback
from distcp.checking.compare import (
    SRC,
    Outcome,
    Pair,
    judge_digests,
    judge_listed,
    pair_listings,
    sides_to_read,
)
from distcp.checking.digests import DigestJob, DigestResult, DigestUnit, digest_runner, pack
from distcp.checking.report import CheckReport
from distcp.configuration import CopyConfiguration
from distcp.datasets.base import CopyableDataset
from distcp.model import FileStatus
from distcp.planning.filesfrom import list_flag
from distcp.planning.listing import find_datasets, source_listing, state_root, target_listing
from distcp.spark.arrow import run_pickled
from distcp.spark.session import default_parallelism, spark_session
from distcp.state.layout import StateLayout
from distcp.state.store import StateStore
from distcp.storage import filesystems as fsutil
from distcp.storage import spec_for


@dataclass(frozen=True)
class CheckSettings:
    """What a check does beyond the listing the configuration describes."""

    one_way: bool = False
    size_only: bool = False
    stored_digests: bool = True


def run_check(cfg: CopyConfiguration, settings: CheckSettings,
              callback: Callback = DEFAULT_CALLBACK) -> CheckReport:
    """Compare ``cfg.sources`` with ``cfg.destination``; the report of every path."""
    start = time.monotonic()
    preflight.check_run(cfg)
    datasets = find_datasets(cfg)
    root = state_root(cfg, datasets)
    store = StateStore(root, dict(cfg.dst_options))
    pairs: list[Pair] = []
    unlisted: list[Outcome] = []
    for ds in datasets:
        callback.message(f"listing {fsutil.display(ds.urn)}")
        manifest = store.load(ds.urn).manifest if settings.stored_digests else {}
        source, failed = _source(ds, cfg)
        unlisted += failed
        target = _destination(ds, cfg)
        if list_flag(cfg) is not None:  # only the listed files, on both sides (rclone)
            target = {u: st for u, st in target.items() if u in source}
        pairs += pair_listings(source, target, manifest,
                               partial(_relative, _root_of(cfg.destination, cfg)))
    if settings.one_way:
        pairs = [p for p in pairs if p.src is not None]
    report = CheckReport(", ".join(cfg.sources), cfg.destination, settings.one_way)
    listed = [judge_listed(p, settings.size_only) for p in pairs]
    unread = [p for p, o in zip(pairs, listed) if o is None]
    read = _read_on_spark(cfg, root, unread, callback, report) if unread else {}
    report.outcomes = [o if o is not None else read[p.path] for p, o in zip(pairs, listed)]
    report.outcomes += unlisted
    report.stored_digests = sum(1 for p in unread if p.stored)
    report.duration_s = round(time.monotonic() - start, 3)
    return report


def _source(ds: CopyableDataset, cfg: CopyConfiguration
            ) -> tuple[dict[str, FileStatus], list[Outcome]]:
    """The dataset's files, under the destination URL each would be copied to, and
    what the listing could not take that the user did not ask to skip (a dangling
    link, an unreadable directory, a --files-from line naming nothing): errors (``!``),
    as they fail a copy."""
    listing = source_listing(ds, cfg)
    files = {f.destination: f.origin for f in listing.files if not f.destination.endswith("/")}
    failed = [Outcome(fsutil.display(s.path), "!", s.reason) for s in listing.skipped
              if s.failure]
    return files, failed


def _destination(ds: CopyableDataset, cfg: CopyConfiguration) -> dict[str, FileStatus]:
    """The destination's files the run's filters admit (extras the filters leave out
    are none of the check's business, as ``--delete`` leaves them alone)."""
    found = target_listing(ds, cfg)
    if ds.is_file:
        return {u: st for u, st in found.items() if not st.is_dir}
    top = ds.destination_root.rstrip("/")
    wanted = cfg.file_filter
    return {u: st for u, st in found.items() if not st.is_dir and u.startswith(top + "/")
            and wanted.admits(u[len(top) + 1:], st)}


def _root_of(url: str, cfg: CopyConfiguration) -> str:
    fs, path = fsutil.filesystem(url, cfg.dst_options)
    return fsutil.to_url(fs, path.rstrip("/"))


def _relative(root: str, url: str) -> str:
    """``url`` as reports print it: relative to DST (a single file: its name)."""
    if url.startswith(root + "/"):
        return url[len(root) + 1:]
    return url.rstrip("/").rsplit("/", 1)[-1]


def _jobs(cfg: CopyConfiguration, pairs: list[Pair]) -> list[DigestJob]:
    src_opts, dst_opts = dict(cfg.src_options), dict(cfg.dst_options)
    jobs = []
    for key, p in enumerate(pairs):
        for side in sides_to_read(p):
            st = p.src if side == SRC else p.dst
            assert st is not None  # judge_listed decided every pair missing a side
            opts = src_opts if side == SRC else dst_opts
            jobs.append(DigestJob(key, side, st.url, st.size, spec_for(st.url, opts)))
    return jobs


def _read_on_spark(cfg: CopyConfiguration, root: str, pairs: list[Pair], callback: Callback,
                   report: CheckReport) -> dict[str, Outcome]:
    """Read what the pairs need, one Spark job; each pair's verdict by its path."""
    jobs = _jobs(cfg, pairs)
    job_id = time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)
    log_file = os.path.join(_log_dir(cfg), f"spark-check-{job_id}.log")
    report.log_file = log_file
    callback.message(f"starting Spark ({cfg.master}); its log: {log_file}")
    with spark_session(cfg.master, dict(cfg.spark_conf), log_file, cfg.engine) as spark:
        cores = cfg.parallelism or default_parallelism(spark)
        progress = _progress_folder(root, job_id, cfg)
        units = [DigestUnit(n, group, progress, tuple(sorted(
                     (k, str(v)) for k, v in cfg.dst_options.items())))
                 for n, group in enumerate(pack(jobs, (cfg.tasks or cores * 2)))]
        callback.set_size(len(jobs), sum(j.size for j in jobs))
        results = _run_units(spark, units, cfg, callback, progress)
    callback.close()
    report.files_read = sum(1 for r in results if not r.error)
    report.bytes_read = sum(r.size for r in results)
    return _verdicts(pairs, results)


def _run_units(spark: Any, units: list[DigestUnit], cfg: CopyConfiguration,
               callback: Callback, progress: str) -> list[DigestResult]:
    stop = threading.Event()
    poller = threading.Thread(target=_poll, args=(progress, cfg, callback, stop), daemon=True)
    poller.start()
    try:
        results: list[DigestResult] = run_pickled(
            spark, [(u.unit_id, u) for u in units], partial(digest_runner, cfg.buffer_size))
    except Exception as exc:  # noqa: BLE001 - Spark errors arrive as many types
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        results = [DigestResult(j.key, j.side, error=f"Spark job failed: {reason}")
                   for u in units for j in u.jobs]
    finally:
        stop.set()
        poller.join()
        _remove(progress, cfg)
    callback.update(len(results), sum(r.size for r in results))
    return results


def _verdicts(pairs: list[Pair], results: list[DigestResult]) -> dict[str, Outcome]:
    digests: dict[int, dict[str, str]] = {}
    errors: dict[int, dict[str, str]] = {}
    for r in results:
        (errors if r.error else digests).setdefault(r.key, {})[r.side] = r.error or r.digest
    out = {}
    for key, p in enumerate(pairs):
        got = digests.get(key, {})
        missing = {s: "not read" for s in sides_to_read(p) if s not in got}
        out[p.path] = judge_digests(p, got, {**missing, **errors.get(key, {})})
    return out


def _progress_folder(root: str, job_id: str, cfg: CopyConfiguration) -> str:
    """Where the tasks count what they read: only under an existing state directory."""
    fs, path = fsutil.filesystem(root, cfg.dst_options)
    folder = StateLayout(root).check_progress(job_id)
    try:
        if not fs.isdir(path):
            return ""
        _, target = fsutil.filesystem(folder, cfg.dst_options)
        fs.makedirs(target, exist_ok=True)
    except OSError:
        return ""
    return folder


def _poll(folder: str, cfg: CopyConfiguration, callback: Callback,
          stop: threading.Event) -> None:
    """Report the tasks' counters about twice a second until the job ends."""
    if not folder:
        return
    while not stop.wait(0.5):
        counted = read_counters(folder, dict(cfg.dst_options))
        if counted is not None:
            callback.update(*counted)


def read_counters(folder: str, options: dict[str, Any]) -> tuple[int, int] | None:
    """Files and bytes the tasks counted so far (the newest attempt's count per unit);
    None while a document is being written (the next poll reads it)."""
    import json

    fs, path = fsutil.filesystem(folder, options)
    per_unit: dict[str, tuple[int, int]] = {}
    try:
        for name in fs.ls(path, detail=False):
            data = json.loads(fs.cat_file(name))
            unit = name.rsplit("/", 1)[-1].split("-", 1)[0]
            per_unit[unit] = max(per_unit.get(unit, (0, 0)), (data["files"], data["bytes"]))
    except (OSError, ValueError, KeyError):
        return None
    return sum(f for f, _ in per_unit.values()), sum(b for _, b in per_unit.values())


def _remove(folder: str, cfg: CopyConfiguration) -> None:
    if not folder:
        return
    fs, path = fsutil.filesystem(folder, cfg.dst_options)
    try:
        fs.rm(path, recursive=True)
    except OSError:
        pass  # a few small counter documents left: harmless, never read again


def _log_dir(cfg: CopyConfiguration) -> str:
    from distcp.spark.job import log_dir as copy_log_dir

    return copy_log_dir(cfg)

