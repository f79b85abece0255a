"""Plan a dataset from its two listings on Spark, ``--listing spark`` (driver).

Two local trees are planned by tasks that walk each subtree of both side by side
(``distcp.planning.paired``: one job, no shuffle). Otherwise (an object store on a side)
the source and the target are listed as DataFrames (``Lister.frame``: the driver lists
the top of each tree, tasks the rest) and joined on the path relative to each root.
Either way each pair is decided on an executor by ``distcp.planning.joined.plan_rows``
with the driver planner's own functions. The driver collects only what it acts on: files
to copy, directories, deletions, entries not copied, and each task's count of files
skipped. An up-to-date tree of a million files therefore costs the driver its
directories, not its files (``Summary.plan_rows_collected`` says how many rows came).
"""

from __future__ import annotations

import pickle
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import Any

from distcp.configuration import CopyConfiguration
from distcp.copying.taskenv import task_environment
from distcp.datasets.recursive import RecursiveCopyableDataset
from distcp.model import CopyableDirectory
from distcp.names import to_utf8
from distcp.planning import joined as jp
from distcp.planning import paired as pp
from distcp.planning.listing import keeps_mtimes, target_links, target_root
from distcp.planning.strategy import SPARK_JOIN, SPARK_PAIRED_WALK, Strategy
from distcp.planning.treeplans import JoinedPlan, assembled, copies_folder, paired_items
from distcp.spark.arrow import attempt_id, frame_of, session_setting
from distcp.spark.listing import Lister
from distcp.spark.schemas import struct
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage import treelisting as tl
from distcp.storage.base import Tree


class JoinPlanner:
    """``plan_all``'s planner for the datasets ``plannable`` accepts, when ``--listing``
    puts their source tree on Spark. ``keep_skips``: every skipped file's decision
    travels back too (``--dry-run``, ``-v``)."""

    def __init__(self, lister: Lister, keep_skips: bool = False, copies_to: str = "") -> None:
        """``copies_to``: a folder where planning tasks keep the files to copy of each
        dataset whose every file is its own file set (``distcp.copying.copyrows``);
        "": they come to the driver."""
        self.lister, self.keep_skips, self.copies_to = lister, keep_skips, copies_to

    def plans(self, ds: Any, cfg: CopyConfiguration) -> bool:
        if not jp.plannable(ds, cfg):
            return False
        src = storage_for(ds.root, dict(cfg.src_options)).tree(ds.root)
        dst = storage_for(ds.destination_root, dict(cfg.dst_options)).tree(ds.destination_root)
        return dst.kind is not None and self.lister.joins(src)

    def __call__(self, ds: RecursiveCopyableDataset, cfg: CopyConfiguration) -> JoinedPlan:
        root_dir = ds.root_directory(cfg)  # the source exists (else the usual error)
        skipped: list[fsutil.Skipped] = []
        src = storage_for(ds.root, dict(cfg.src_options)).tree(ds.root)
        found_target = target_root(ds, cfg, ds.destination_root)  # asked once, both ways
        target_tree = found_target[0] if found_target is not None else None
        paired = self._paired(ds, cfg, src, target_tree, root_dir, skipped)
        if paired is not None:
            return paired
        source, kind = self.lister.frame(src, cfg.links, skipped)
        target, target_kind = self._target(cfg, target_tree)
        rule = self._rule(ds, cfg, kind, target_kind or kind)
        with _join_partitions(self.lister.session(), cfg):
            rows = _joined(source, src.path, target).mapInArrow(
                partial(jp.arrow_plan, rule), struct(jp.OUT_SCHEMA)).collect()
        return assembled(ds, cfg, rule, root_dir, _decoded(rows), skipped, len(rows),
                         Strategy(SPARK_JOIN, self.lister.reason(src)))

    def _paired(self, ds: RecursiveCopyableDataset, cfg: CopyConfiguration, source: Tree,
                target: Tree | None, root_dir: CopyableDirectory,
                skipped: list[fsutil.Skipped]) -> JoinedPlan | None:
        """Both trees on local disks: planned by tasks that walk each subtree of both
        side by side (``distcp.planning.paired``), one job, no join; None (the join
        plans it) for other storages or a top too big to send with the tasks."""
        if source.kind != tl.TREE or (target is not None and target.kind != tl.TREE):
            return None
        spark = self.lister.session()
        top_skipped: list[fsutil.Skipped] = []
        found = self.lister.found(spark, source, tl.TREE, cfg.links, None, top_skipped)
        src = source.path.rstrip("/") or "/"
        items = paired_items(found, src, target, target_links(cfg))
        if items is None:
            return None
        skipped.extend(top_skipped)
        rule = self._rule(ds, cfg, tl.TREE, tl.TREE)
        rows = frame_of(spark, items, partial(pp.run_paired, rule, (src, _root(target))),
                        jp.OUT_SCHEMA).collect()
        return assembled(ds, cfg, rule, root_dir, _decoded(rows), skipped, len(rows),
                         Strategy(SPARK_PAIRED_WALK, self.lister.reason(source)))

    def _rule(self, ds: RecursiveCopyableDataset, cfg: CopyConfiguration, source_kind: str,
              target_kind: str) -> jp.JoinRule:
        return jp.JoinRule(ds, cfg, source_kind, target_kind, self.keep_skips,
                           copies_folder(self.copies_to, ds),
                           keeps_mtimes(ds.destination_root, cfg), task_environment(),
                           attempt_id)

    def _target(self, cfg: CopyConfiguration, tree: Tree | None
                ) -> tuple[tuple[Any, str] | None, str | None]:
        """The target's frame and root (None: no target yet), as ``target_listing``
        would list it (``target_links``)."""
        if tree is None:
            return None, None
        frame, kind = self.lister.frame(tree, target_links(cfg), [])
        return (frame, tree.path), kind


def _root(tree: Tree | None) -> str:
    """A tree's root path as the paired walks cut against it ("": no tree)."""
    return (tree.path.rstrip("/") or "/") if tree is not None else ""


#: Spark's own setting for the partitions of a join's shuffle (its default: 200).
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def _join_partitions(spark: Any, cfg: CopyConfiguration) -> AbstractContextManager[None]:
    """The join's shuffle cut into two partitions per core, not Spark's default 200:
    each map task then writes and the join reads a few files, not 200 each (the join of
    two listings of 101,000 entries, warm engine, 2 cores: 2.3-2.6 s against 3.0-3.5 s).
    A value the user gave (``--conf``) is kept."""
    from distcp.spark.session import default_parallelism

    if any(key == SHUFFLE_PARTITIONS for key, _ in cfg.spark_conf):
        return nullcontext()
    return session_setting(spark, SHUFFLE_PARTITIONS, str(2 * default_parallelism(spark)))


def _joined(source: Any, src_root: str, target: tuple[Any, str] | None) -> Any:
    """``(s, t)`` rows: each source entry with the target entry at the same relative
    path; target entries alone; an entry the source could not read alone (key null)."""
    from pyspark.sql import functions as F

    def keyed(frame: Any, root: str, name: str) -> Any:
        start = len(to_utf8(root.rstrip("/"))) + 2  # 1-based, past "root/" as rows hold it
        key = F.when(F.col("skipped").isNull(), F.substring("path", start, 1 << 30))
        return frame.select(key.alias("rel"),
                            F.struct(*[F.col(c) for c, _ in tl.ROW_COLUMNS]).alias(name))

    left = keyed(source, src_root, "s")
    if target is None:
        return left.select("s", F.lit(None).cast(left.schema["s"].dataType).alias("t"))
    right = keyed(target[0].where(F.col("skipped").isNull()), target[1], "t")
    return left.join(right, "rel", "full_outer").select("s", "t")


def _decoded(rows: list[Any]) -> list[tuple[str, str, Any]]:
    """Collected ``jp.OUT_SCHEMA`` rows as ``(kind, sort key, value)``."""
    return [(row["kind"], jp.sort_of(row["sort"]), pickle.loads(row["payload"])) for row in rows]
