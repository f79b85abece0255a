"""DRIVER: the facts a run's strategies are chosen from: whether its Spark session
opens cheaply, whether it plans beside the client's start, whether its files to copy
stay on the executors, whether every decision is shown."""

from __future__ import annotations

from distcp.commit.recovery import RecoveryArea
from distcp.configuration import CopyConfiguration
from distcp.spark.session import (
    opens_cheaply,
)
from distcp.storage import storage_for


def session_cheap(cfg: CopyConfiguration) -> bool:
    """``opens_cheaply`` for this run's master, settings and engine."""
    return opens_cheaply(cfg.master, dict(cfg.spark_conf), cfg.engine)


def plans_beside(cfg: CopyConfiguration) -> bool:
    """Whether the run plans in a forked child while it imports PySpark's client
    (``distcp.planning.beside``): its session opens cheaply, planning does not need it
    (``--listing spark`` does), and both ends are local trees. An object store's listing
    may move to Spark after the driver walked ``KEYS_FROM`` keys to tell, a walk the child
    could not hand back: the run would walk them twice."""
    local = all(storage_for(url, dict(cfg.src_options)).capabilities.local_paths
                for url in cfg.sources) and storage_for(
        cfg.destination, dict(cfg.dst_options)).capabilities.local_paths
    return not cfg.dry_run and cfg.listing != "spark" and local and session_cheap(cfg)


def keeps_copies(cfg: CopyConfiguration, recovery: RecoveryArea) -> bool:
    """Whether planning (on Spark, or on the driver past ``treeplans.HELD`` files) keeps
    a plain copy's files to copy on the executors (``distcp.spark.listedcopy``). Not when
    every decision is shown or logged, nor for what still needs each file on the driver:
    ``move``, the catalog, split files, ``--visibility file``, ``--commit-policy full``,
    quality checks and copies an earlier run kept for recovery. Staged uploads (object
    stores) keep their parts in the results files, which ``PublishListed`` completes."""
    return not (every_decision(cfg) or cfg.move or cfg.catalog_table or cfg.split_size
                or cfg.visibility != "file-set" or cfg.commit_policy == "full" or cfg.check
                or recovery.guids())


def every_decision(cfg: CopyConfiguration) -> bool:
    """Whether the run shows or logs every decision (``--dry-run``, ``-v``,
    ``--log-file``), skipped files' included; else those are only counted."""
    return cfg.dry_run or cfg.log_level in ("info", "debug") or cfg.log_file is not None
