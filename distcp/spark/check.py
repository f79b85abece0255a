"""The digests of a check, read on Spark: its session, its job, its progress (driver).

``distcp.run.check`` decides what to read and judges what comes back; this module runs
the ``DigestUnit`` s in one Spark job, with the run's own session and log file, and
reports the tasks' counters to the progress line while they read.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

from distcp.callbacks import Callback
from distcp.checking.digests import DigestJob, DigestResult, DigestUnit, digest_runner, pack
from distcp.configuration import CopyConfiguration
from distcp.copying.taskenv import task_environment
from distcp.errors import one_line
from distcp.spark.arrow import run_pickled
from distcp.spark.logfiles import run_log_file
from distcp.spark.session import default_parallelism, spark_session
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for


def check_log_file(cfg: CopyConfiguration, job_id: str) -> str:
    """Where the check's Spark session writes its log."""
    return run_log_file(cfg, f"spark-check-{job_id}.log")


def read_digests(cfg: CopyConfiguration, jobs: list[DigestJob], progress: str, log_file: str,
                 callback: Callback) -> list[DigestResult]:
    """Read ``jobs`` in one Spark job (``progress``: the folder the tasks count in, ""
    for none); a job that fails returns every read as an error, never raises."""
    callback.message(f"starting Spark ({cfg.master}); its log: {log_file}")
    with spark_session(cfg.master, dict(cfg.spark_conf), log_file, cfg.engine) as spark:
        results = digests_on(spark, cfg, jobs, progress, callback)
    callback.close()
    return results


def digests_on(spark: Any, cfg: CopyConfiguration, jobs: list[DigestJob], progress: str,
               callback: Callback) -> list[DigestResult]:
    """``read_digests`` on a session the caller holds (a copy's, for ``--checksum``'s
    comparison of contents: ``distcp.run.contents``)."""
    units = digest_units(cfg, jobs, progress, cfg.parallelism or default_parallelism(spark),
                         task_environment())
    callback.set_size(len(jobs), sum(j.size for j in jobs))
    return _run_units(spark, units, cfg, callback, progress)


def digest_units(cfg: CopyConfiguration, jobs: list[DigestJob], progress: str, cores: int,
                 env: dict[str, str] | None) -> list[DigestUnit]:
    """``jobs`` in ``--tasks`` units (else two per core) of about equal bytes; ``env``:
    the client's task variables for a server's workers (None: the process's own)."""
    options = tuple(sorted((k, str(v)) for k, v in cfg.dst_options.items()))
    return [DigestUnit(n, group, progress, options, env)
            for n, group in enumerate(pack(jobs, (cfg.tasks or cores * 2)))]


def _run_units(spark: Any, units: list[DigestUnit], cfg: CopyConfiguration,
               callback: Callback, progress: str) -> list[DigestResult]:
    stop = threading.Event()
    poller = threading.Thread(target=poll_counters, args=(progress, cfg, callback, stop),
                              daemon=True)
    poller.start()
    try:
        results: list[DigestResult] = run_pickled(
            spark, [(u.unit_id, u) for u in units], partial(digest_runner, cfg.buffer_size))
    except Exception as exc:  # noqa: BLE001 - Spark errors arrive as many types
        reason = one_line(exc)
        results = [DigestResult(j.key, j.side, error=f"Spark job failed: {reason}")
                   for u in units for j in u.jobs]
    finally:
        stop.set()
        poller.join()
    callback.update(len(results), sum(r.size for r in results))
    return results


def poll_counters(folder: str, cfg: CopyConfiguration, callback: Callback,
                  stop: threading.Event) -> None:
    """Report the tasks' counters about twice a second until ``stop`` is set."""
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

    storage = storage_for(folder, options)
    per_unit: dict[str, tuple[int, int]] = {}
    try:
        for name in storage.names(folder):
            data = json.loads(storage.read_bytes(fsutil.join(folder, name), "progress"))
            unit = name.split("-", 1)[0]
            per_unit[unit] = max(per_unit.get(unit, (0, 0)), (data["files"], data["bytes"]))
    except (OSError, ValueError, KeyError):
        return None
    return sum(f for f, _ in per_unit.values()), sum(b for _, b in per_unit.values())
