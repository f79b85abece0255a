"""Where a run's Spark log goes, and the pruning that keeps that folder small (driver).

Every run leaves two files in the log folder (``spark-<job>.log`` and the log4j file
that points Spark at it; ``spark-check-<job>...`` for ``check``): a cron job copying
every five minutes left 576 files a day, never removed. Each run now prunes the folder
as it starts, as Gradle prunes its daemon logs: a run's files go when the run is older
than ``KEEP_DAYS`` or not among the newest ``KEEP_RUNS`` runs. Only files named the way
pydistcp names them are touched; a ``--log-dir`` shared with other tools keeps theirs.
"""

from __future__ import annotations

import os
import re
import time

from distcp.configuration import CopyConfiguration
from distcp.usercache import user_cache

#: A run's log files are kept this many days...
KEEP_DAYS = 14
#: ...and only for this many of the newest runs.
KEEP_RUNS = 100
#: A run's own files: its Spark log and its log4j file; job ids begin with the run's start
#: time (``distcp.run.branch.new_job_id``), so they sort oldest first.
_RUN_FILE = re.compile(r"^spark-(?:check-)?(\d{8}T\d{6}-[0-9a-f]+)\.(?:log|log4j2\.properties)$")


def log_dir(cfg: CopyConfiguration) -> str:
    """``--log-dir``, else ``PYDISTCP_LOG_DIR``, else the user's cache."""
    if cfg.log_dir:
        return cfg.log_dir
    return os.environ.get("PYDISTCP_LOG_DIR") or user_cache("logs")


def run_log_file(cfg: CopyConfiguration, name: str) -> str:
    """The log file ``name`` of this run in the log folder, after pruning the folder."""
    folder = log_dir(cfg)
    prune(folder)
    return os.path.join(folder, name)


def prune(folder: str, now: float | None = None) -> int:
    """Remove the files of runs older than KEEP_DAYS or beyond the newest KEEP_RUNS;
    the number removed. Never fails a run: a file that cannot be removed stays."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    runs: dict[str, list[os.DirEntry[str]]] = {}
    for entry in entries:
        match = _RUN_FILE.match(entry.name)
        if match:
            runs.setdefault(match.group(1), []).append(entry)
    cutoff = (time.time() if now is None else now) - KEEP_DAYS * 86_400
    removed = 0
    for rank, job in enumerate(sorted(runs, reverse=True)):
        files = runs[job]
        if rank < KEEP_RUNS and any(_mtime(f) >= cutoff for f in files):
            continue
        for f in files:
            try:
                os.unlink(f.path)
                removed += 1
            except OSError:
                pass
    return removed


def _mtime(entry: os.DirEntry[str]) -> float:
    try:
        return entry.stat().st_mtime
    except OSError:
        return 0.0
