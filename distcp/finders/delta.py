"""DeltaTablesFinder: Delta Lake tables, ``--finder delta`` (driver).

Each SRC is a table (a folder holding ``_delta_log/``), mapped to DST as a plain copy
maps it (one SRC: DST is the table's copy; several: each to ``DST/<its name>``); with
``--dataset-glob``, every folder under the single SRC that matches the glob and holds a
table is one, copied to the same relative path under DST (a warehouse, table by
table). Each is a ``DeltaDataset``: copied by versions, data before commits.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import ClassVar

from distcp.datasets.base import CopyableDataset
from distcp.datasets.delta import DeltaDataset, is_delta_table
from distcp.errors import PlanningError
from distcp.finders.base import DatasetsFinder
from distcp.finders.glob import GlobDatasetsFinder
from distcp.finders.single import check_not_inside, source_status
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.base import Tree


class DeltaTablesFinder(DatasetsFinder):
    """One DeltaDataset per source table, or per table the glob matches (a subclass
    names another kind of table: ``finders.iceberg``)."""

    #: The table format's name, what marks a folder as a table, and its dataset.
    kind: ClassVar[str] = "Delta"
    article: ClassVar[str] = "a"
    marker: ClassVar[str] = "_delta_log/"
    dataset: ClassVar[type[CopyableDataset]] = DeltaDataset

    def is_table(self, tree: Tree, path: str) -> bool:
        return is_delta_table(tree, path)

    def find(self) -> Iterator[CopyableDataset]:
        cfg = self.cfg
        if cfg.dataset_glob:
            found = 0
            for ds in GlobDatasetsFinder(cfg).find():
                if isinstance(ds, self.dataset):
                    found += 1
                    yield ds
            if not found:
                raise PlanningError(f"no {self.kind} table (a folder holding {self.marker}) under "
                                    f"{fsutil.display(cfg.sources[0])} matches "
                                    f"--dataset-glob {cfg.dataset_glob!r}",
                                    path=cfg.sources[0])
            return
        dst_tree = storage_for(cfg.destination, dict(cfg.dst_options)).tree(cfg.destination)
        dst = dst_tree.path.rstrip("/") or "/"
        several = len(cfg.sources) > 1
        for source in cfg.sources:
            src_tree = storage_for(source, dict(cfg.src_options)).tree(source)
            src = src_tree.path.rstrip("/") or "/"
            if not source_status(src_tree, source).is_dir or not self.is_table(src_tree, src):
                raise PlanningError(f"--finder {self.kind.lower()}: {fsutil.display(source)} "
                                    f"is not {self.article} {self.kind} table (no {self.marker} in it)",
                                    path=source)
            target = fsutil.join(dst, posixpath.basename(src)) if several else dst
            check_not_inside(src_tree, dst_tree, target, source, cfg.destination)
            urn = src_tree.url_of(src)
            yield self.dataset(urn, urn, dst_tree.url_of(target))
