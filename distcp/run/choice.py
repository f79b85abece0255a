"""The facts a run's strategies are chosen from (driver).

Whether its Spark session opens cheaply, whether it plans beside the client's start
(only where its copy may open the session), whether its files to copy stay on the
executors, whether every decision is shown.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from distcp.commit.recovery import RecoveryArea
from distcp.configuration import CopyConfiguration, forked_ends, local_ends, local_sources
from distcp.converters.base import forks_safely
from distcp.model import CopyableFile
from distcp.planning import beside, treeplans
from distcp.planning.strategy import COLLECTED, HERE, KEPT, KEPT_HERE, NOTHING, Strategy
from distcp.spark.jvm import is_local_master
from distcp.spark.session import (
    opens_cheaply,
    tasks_run_here,
)
from distcp.storage import storage_for

#: Why a run without Spark listing plans two local trees in its own process.
PAIRED_HERE = "--listing driver: two local trees walked side by side in this process"
#: What planning beside adds to a strategy's reason.
BESIDE = "planned in a forked child while PySpark's client was imported"


def session_cheap(cfg: CopyConfiguration) -> bool:
    """``opens_cheaply`` for this run's master, settings and engine."""
    return opens_cheaply(cfg.master, dict(cfg.spark_conf), cfg.engine)


def walks_every_core(cfg: CopyConfiguration) -> bool:
    """Whether the driver's paired walk uses every core Spark's tasks would: it walks on
    ``treeplans.WALKERS`` cores where this process forks, so on a local master of as
    many, ``--listing auto`` keeps a big local tree on the driver however cheaply the
    session opens. On this 2-core machine with the warm engine, the driver's walk
    planned 300,000 files' no-op in 1.3 s and Spark's tasks in 2.7 s, their first copy
    in 2.4 s against 4.5 s (benchmarks/RESULTS.md, 2026-11-29)."""
    return beside.forks() and tasks_run_here(cfg.master) \
        and cores_here(cfg) <= treeplans.WALKERS


def plans_beside(cfg: CopyConfiguration, collects: str | None) -> bool:
    """Whether the run plans in a forked child while it imports PySpark's client
    (``distcp.planning.beside``): its session opens cheaply, planning does not need it
    (``--listing spark`` does), both ends are local trees, and its copy may need the
    session (``copies_without_session``; ``collects``: ``collects_because``). An object
    store's listing may move to Spark after the driver walked ``KEYS_FROM`` keys to
    tell, a walk the child could not hand back: the run would walk them twice."""
    return not cfg.dry_run and cfg.listing != "spark" and local_ends(cfg) \
        and not copies_without_session(cfg, collects) and session_cheap(cfg)


def copies_without_session(cfg: CopyConfiguration, collects: str | None) -> bool:
    """Whether the run's copy is sure to open no Spark session, so that it plans in its
    own process (no client to import beside the plan): ``--copying driver``, or a kept
    plan (``collects`` None) whose chunks the processes forked here copy
    (``kept_here``), with no catalog to register in. The child and its walker made a
    third process on two cores: the warm engine's copy of 20,000 files of 1-64 KiB,
    which opens no session, planned in 0.49 s here against 0.67 s beside by the medians
    of 5 rounds (benchmarks/RESULTS.md, 2026-12-01, night). Held files past
    ``HERE_FORKED`` (many small datasets) are still copied by a Spark job, whose client
    is then imported after the plan."""
    if cfg.copying == "driver":
        return True
    return collects is None and kept_here(cfg) is not None and not cfg.catalog_table


def forks_here(cfg: CopyConfiguration) -> bool:
    """Whether a plan copied here is copied by forked processes (``run.workers``), not
    threads: in the command's own process (``planning.beside.forks``), into a local
    tree from sources a child can read (``configuration.forked_ends``: local trees, S3
    on the lean path, GCS), and no converter that may not (``Converter.forks``: gpg's). Other
    object stores' clients keep threads and locks a child would inherit mid-use: a
    child forked after Azure's client had run was killed by signal 11."""
    return beside.forks() and forked_ends(cfg) and forks_safely(cfg.converters)


def cores_here(cfg: CopyConfiguration) -> int:
    """Processes (or threads) for the units: ``--cores``, else the local master's
    (``local[N]`` and ``local[N,F]``; ``*`` and anything else: this machine's)."""
    if cfg.parallelism:
        return cfg.parallelism
    master = cfg.master
    if master == "local":
        return 1
    inside = master[len("local["):-1].split(",")[0].strip() if is_local_master(master) else ""
    return int(inside) if inside.isdigit() and int(inside) > 0 else os.cpu_count() or 2


def keeps_copies(cfg: CopyConfiguration, recovery: RecoveryArea) -> bool:
    """Whether planning (on Spark, or on the driver past ``treeplans.HELD`` files) keeps
    a plain copy's files to copy on the executors (``distcp.spark.keptcopy``). Staged
    uploads (object stores) keep their parts in the results files, which
    ``PublishKept`` completes."""
    return collects_because(cfg, recovery) is None


def collects_because(cfg: CopyConfiguration, recovery: RecoveryArea) -> str | None:
    """Why every file to copy must come to the driver (None: they may stay on the
    executors): every decision shown or logged, or what needs each file on the driver
    (``move``, the catalog, split files, ``--visibility file``, ``--commit-policy full``,
    quality checks, copies an earlier run kept for recovery)."""
    reasons = ((cfg.copying == "driver", "--copying driver: this process copies every file"),
               (every_decision(cfg), "every decision is shown or logged"),
               (cfg.move, "a move deletes each source on the driver's word"),
               (bool(cfg.catalog_table), "--catalog-table registers each file's partition"),
               (bool(cfg.split_size), "--split-size splits files into ranges"),
               (cfg.visibility != "file-set", f"--visibility {cfg.visibility}"),
               (cfg.commit_policy == "full", "--commit-policy full"),
               (bool(cfg.check), "--check inspects each output"),
               (cfg.compare == "checksum", "--checksum compares contents before copying"))
    why = next((text for holds, text in reasons if holds), None)
    if why is None and recovery.kept():
        why = "copies an earlier run kept wait in the recovery area"
    return why


#: The most files ``--copying auto`` copies in this process's threads (an object store
#: in the run) on a local master whose Spark session opens cheaply (the warm engine, a
#: caller's session): a warm job's start is ~0.2 s before its first file, where this
#: process copies 1,000 small files in ~0.2 s (benchmarks/RESULTS.md, 2026-11-29); past
#: these the executors' kept results (``keeps_copies``) pay for the job.
HERE_FILES = 1_000
#: The most bytes threads copy here when a converter runs in them (``here_bounds``).
HERE_BYTES = 256 << 20
#: The most files the copying processes forked here (``forks_here``) copy, on either
#: engine: without a session to reuse (the run would start its own JVM), a cold Spark
#: job's start is 3-6 s before its first file, and they copied 20,000 files of 1-64 KiB
#: in half of a cold Spark run's time, in each of 5 rounds (benchmarks/RESULTS.md,
#: 2026-11-29); on the warm engine its tasks were no faster than these processes and
#: the job's start and results' way back were more (``kept_here``). A plan that keeps
#: its files past a chunk is copied here whatever its size (``held_here``); this bounds
#: the plans whose every file comes to the driver (``collects_because``).
HERE_FORKED = 20_000
#: ... and for threads (an object store in the run), whose per-file work holds one core:
#: cold, 5,000 uploads of 1-64 KiB took 6.7-6.9 s in threads against 12.6-13.4 s on a
#: Spark job of its own, 20,000 downloads of 64 B 15.8-16.0 s against 15.6-17.3 s and
#: 20,000 uploads 39.6 s against 36.6 s (``rclone serve s3``; benchmarks/RESULTS.md,
#: 2026-11-30, afternoon): half-way to the tie.
HERE_THREADS_COLD = 10_000
#: ... and for threads uploading local files where a session opens cheaply, to a store
#: whose small writes are thin (``Capabilities.thin_writes``): each file is a read of
#: this machine's disk and one request, and the threads wait on the server. On the
#: warm engine (``rclone serve s3``, ``--visibility file``), 2,000 uploads of 1-64 KiB
#: took 2.15-2.31 s in threads against 2.89-3.15 s on its Spark job, 5,000 4.30-4.33 s
#: against 4.87-5.06 s, 10,000 8.62-8.96 s against 8.71-8.72 s; 2,000 downloads tied
#: (1.81-2.08 s against 1.88-2.23 s) and 20,000 took 10.5-11.7 s against 6.9-7.7 s,
#: where each file's write, attributes and check hold the GIL; 2,000 uploads to Azurite
#: through Azure's SDK took 15.3 s in threads against 13.1 s on the job
#: (benchmarks/RESULTS.md, 2026-11-30, evening): half-way to S3's tie.
HERE_UPLOADS = 5_000


def here_bounds(cfg: CopyConfiguration) -> tuple[int, int | None]:
    """The most files and bytes (None: any) ``auto`` copies here. Forked processes
    (``forks_here``) copy on every core as Spark's local tasks would, a big file at
    their pace (8 × 256 MiB: copy phase 1.04 s here, 1.15 s on the warm engine's tasks,
    against a cold JVM's 6-7 s start; benchmarks/RESULTS.md, 2026-11-30), so only the
    number of files is bounded, more when the session is cold. Threads have smaller
    bounds of files (``here_files``): their per-file work holds the GIL. Their bytes
    pass through calls that release it (reads, sockets, the digest), so only a
    converter's chain, whose work on each byte is partly Python's, bounds their bytes
    too: 1 GiB in 4 files to and from S3 copied in threads at the warm engine's tasks'
    pace (uploads 4.37 s against 4.46 s, downloads 2.09 s against 2.02 s) without a
    job's start (benchmarks/RESULTS.md, 2026-11-30, afternoon)."""
    return here_files(cfg), (HERE_BYTES if cfg.converters and not forks_here(cfg) else None)


def here_files(cfg: CopyConfiguration) -> int:
    """The most files ``auto`` copies here: ``HERE_FORKED`` for forked processes on
    either engine (past it, the kept files' chunks are copied here too: ``kept_here``);
    for threads where a session opens cheaply ``HERE_UPLOADS`` for thin uploads of
    local files (``thin_uploads``) and ``HERE_FILES`` for the rest, else
    ``HERE_THREADS_COLD``."""
    if forks_here(cfg):
        return HERE_FORKED
    if session_cheap(cfg):
        return HERE_UPLOADS if thin_uploads(cfg) else HERE_FILES
    return HERE_THREADS_COLD


def thin_uploads(cfg: CopyConfiguration) -> bool:
    """Whether the run copies this machine's files to a store whose small writes are
    one request each through a thin client (``Capabilities.thin_writes``), with no write
    option (a storage class, a KMS key, an ACL, metadata, tags, requester pays): S3
    sends those through botocore, whose work on each request holds the GIL."""
    dst = storage_for(cfg.destination, dict(cfg.dst_options))
    return local_sources(cfg) and dst.capabilities.thin_writes and not dst.writes


def splits_here(cfg: CopyConfiguration) -> bool:
    """Whether this process copies a big file's ranges: each range one unit, written at
    its offset (local trees) or uploaded as parts of the file's staged upload (an
    object store's multipart); a destination whose ranges need a join task (GCS, FTP,
    SFTP) leaves them to Spark."""
    return forks_here(cfg) or not storage_for(
        cfg.destination, dict(cfg.dst_options)).capabilities.joins_parts


def may_copy_here(cfg: CopyConfiguration) -> bool:
    """Whether ``auto`` may copy this run's plan here, its size aside (``copies_here``)."""
    return (cfg.copying == "auto" and (not cfg.split_size or splits_here(cfg))
            and not cfg.catalog_table and tasks_run_here(cfg.master))


def held_here(cfg: CopyConfiguration) -> int | None:
    """How many files to copy a dataset planned on the driver holds before it keeps
    them for the executors (None: ``treeplans.HELD``, a chunk, as ``HERE_FILES``): the
    bound of ``auto``'s copy here (``here_files``) where no session opens cheaply, or
    for thin uploads (``thin_uploads``), so that a plan it would copy here is not kept
    for a Spark job. A plan that processes forked here copy either way (``kept_here``)
    keeps past a chunk, cold as on the warm engine: each process then writes its
    results in files, which the publish reads, instead of sending every file's results
    back to the driver. Cold, 20,000 files of 1-64 KiB took 2.90 s kept against
    3.27 s held by the medians of 5 rounds, faster in 4, their publish 0.27 s against
    0.58 s (benchmarks/RESULTS.md, 2026-12-01, night; held was the faster while each
    copying process imported pandas for its first results file)."""
    if not may_copy_here(cfg) or kept_here(cfg) is not None \
            or (session_cheap(cfg) and not thin_uploads(cfg)):
        return None
    return here_files(cfg)


def copies_here(cfg: CopyConfiguration, files: list[CopyableFile], kept: int,
                catalog: bool, splits: bool = False) -> str | None:
    """Why this process copies the plain branch's ``files`` (None: a Spark job does):
    ``--copying driver``, or ``auto`` with a small plan on a local master
    (``here_bounds``), nothing kept for a Spark job (``kept_here``), no file to split
    (``--split-size``, or ``splits``: a big file's ranges spread over idle cores) unless
    each range can be a unit here (``splits_here``), and no catalog (whose registrations
    start the session anyway)."""
    if cfg.copying == "driver":
        return "--copying driver"
    if cfg.copying == "spark" or (kept and kept_here(cfg) is None) or catalog \
            or ((cfg.split_size or splits) and not splits_here(cfg)) \
            or not tasks_run_here(cfg.master):
        return None
    size = sum(f.origin.size for f in files)
    most, most_bytes = here_bounds(cfg)
    if len(files) > most or (most_bytes is not None and size > most_bytes):
        return None
    bound = f"at most {most:,} files" + (f" and {most_bytes >> 20:,} MiB"
                                        if most_bytes is not None else "")
    return (f"--copying auto: {len(files):,} files of {size:,} bytes on a local master, "
            f"{bound}: a Spark job's start would cost more than the copy")


def reads_here(cfg: CopyConfiguration, files: int) -> str | None:
    """Why this process reads ``files`` files (both sides' reads counted) for a check
    or ``--checksum``'s comparison (None: a Spark job does): the copy's rule
    (``here_because``). Between local trees, forked processes read at the pace of
    Spark's local tasks, whose results come to the driver too, so no number of files is
    better read by a Spark job: cold, a check of 500 small files took 0.38 s here against
    4.44 s with its job, of 20,000 1.22 s against 5.35 s; on the warm engine, 2,000 files
    0.42 s against 0.95 s, 20,000 1.2 s against 1.95 s (benchmarks/RESULTS.md,
    2026-11-30). Threads (an object store) take a download's bound: ``HERE_FILES``
    where a session opens cheaply, else ``HERE_THREADS_COLD``."""
    most = None if forks_here(cfg) else \
        HERE_FILES if session_cheap(cfg) else HERE_THREADS_COLD
    return here_because(cfg, files, most, "files to read")


def fork_copies_here(cfgs: Sequence[CopyConfiguration], files: int) -> str | None:
    """Why this process copies a fork's ``files`` for all its branches (None: one Spark
    job does): the copy's rule (``here_because``, the first branch's ``--copying`` and
    master) with the smallest of the branches' bounds (``here_files``), and no branch
    registering in a catalog (whose registrations start the session anyway)."""
    if cfgs[0].copying != "driver" and any(c.catalog_table for c in cfgs):
        return None
    return here_because(cfgs[0], files, min(here_files(c) for c in cfgs), "files")


def here_because(cfg: CopyConfiguration, files: int, most: int | None, what: str
                 ) -> str | None:
    """Why this process runs the tasks of ``files`` files (None: a Spark job does):
    ``--copying driver``, or ``auto`` on a local master for at most ``most`` (None: any
    number, forked processes working at its tasks' pace)."""
    if cfg.copying == "driver":
        return "--copying driver"
    if cfg.copying == "spark" or not tasks_run_here(cfg.master) \
            or (most is not None and files > most):
        return None
    bound = f"at most {most:,}" if most is not None else "forked processes at its tasks' pace"
    return (f"--copying auto: {files:,} {what} on a local master, {bound}: a Spark job's "
            "start would cost more")


def copiers_here(cfgs: Sequence[CopyConfiguration]) -> str:
    """Who copies work units taken here (``run.here.run_units``): processes forked here
    where every branch's ends allow it and this process may fork, else threads of this
    process; one a core, at most one a unit."""
    if all(forks_here(c) for c in cfgs) and beside.forks():
        return "processes forked here"
    return "threads of this process"


def kept_here(cfg: CopyConfiguration) -> str | None:
    """Why the kept datasets' chunks (files to copy and results in files) are copied by
    this process's forked copying processes, not a Spark job (None: Spark copies them):
    ``--copying auto`` on a local master where children may copy
    (``forks_here``: into a local tree from local trees, S3 or GCS). The same copy tasks run
    either way, on as many cores. Where the session would start a JVM of its own, that
    start (3-6 s) is what this saves; on the warm engine, the job's start and its
    results' way back: 300,000 files of 64 B copied in 19.09 s here against 23.12 s on
    the engine's tasks in the same round, 20,000 files of 1-64 KiB in 2.07 s against
    3.31 s by the medians of 5 rounds (benchmarks/RESULTS.md, 2026-12-01)."""
    if cfg.copying != "auto" or not forks_here(cfg) or not tasks_run_here(cfg.master):
        return None
    return (f"--copying auto into a local tree on a local master: {cores_here(cfg)} "
            "processes forked here, no Spark job")


def copy_strategies(collected: int, kept: int, collects: str | None,
                    here: str | None = None, kept_by: str | None = None,
                    copiers: str = "threads of this process") -> tuple[Strategy, ...]:
    """How the run copied: ``collected`` files whose results came to the driver, ``kept``
    files whose results stayed in files; ``collects``: ``collects_because``;
    ``here``: why this process copied the collected ones (``copies_here``), by
    ``copiers`` (``copiers_here``); ``kept_by``: why it copied the kept ones
    (``kept_here``)."""
    out = []
    if here is not None and collected:
        out.append(Strategy(HERE, f"{collected:,} files copied by {copiers}, no Spark "
                                  f"job: {here}"))
    if kept:
        out.append(Strategy(KEPT_HERE, f"{kept:,} files: each dataset's files to copy and "
                                       f"their results in files, copied by {kept_by}")
                   if kept_by is not None else
                   Strategy(KEPT, f"{kept:,} files: each dataset's files to copy and their "
                                  "results stay on the executors"))
    if collected and here is None:
        out.append(Strategy(COLLECTED, collects or (
            f"{collected:,} files of datasets planned here with few files to copy, or "
            "published whole")))
    return tuple(out) or (Strategy(NOTHING, "nothing to copy: no Spark job"),)


def every_decision(cfg: CopyConfiguration) -> bool:
    """Whether the run shows or logs every decision (``--dry-run``, ``-v``,
    ``--log-file``), skipped files' included; else those are only counted."""
    return cfg.dry_run or cfg.log_level in ("info", "debug") or cfg.log_file is not None
