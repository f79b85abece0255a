"""GlobDatasetsFinder: every directory matching ``--dataset-glob`` is a dataset (driver).

The glob is relative to the single source root; each match is copied to the same
relative path under the destination, and its URN is its origin URL. A match that is a
Delta table (it holds ``_delta_log/``) is copied as one (``DeltaDataset``: by versions,
data before commits), and so is an Iceberg table (it holds ``metadata/*.metadata.json``:
``IcebergDataset``), so a warehouse of tables replicates table by table.
"""

from __future__ import annotations

from collections.abc import Iterator

from distcp.datasets.base import CopyableDataset
from distcp.datasets.delta import DeltaDataset, is_delta_table
from distcp.datasets.deltalog import LOG_DIR
from distcp.datasets.iceberg import IcebergDataset, is_iceberg_table
from distcp.datasets.recursive import RecursiveCopyableDataset
from distcp.errors import ConfigurationError, PlanningError
from distcp.finders.base import DatasetsFinder
from distcp.finders.single import check_not_inside, source_status
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for


class GlobDatasetsFinder(DatasetsFinder):
    """One dataset per matching directory, in sorted order: a DeltaDataset for a Delta
    table, else a RecursiveCopyableDataset."""

    def find(self) -> Iterator[CopyableDataset]:
        cfg = self.cfg
        if len(cfg.sources) != 1 or not cfg.dataset_glob:
            raise ConfigurationError("--dataset-glob takes exactly one source root")
        src = storage_for(cfg.sources[0], dict(cfg.src_options)).tree(cfg.sources[0])
        dst_tree = storage_for(cfg.destination, dict(cfg.dst_options)).tree(cfg.destination)
        root, dst = src.path.rstrip("/"), dst_tree.path
        if not source_status(src, cfg.sources[0]).is_dir:
            raise PlanningError(f"--dataset-glob needs a directory source, not {cfg.sources[0]}")
        check_not_inside(src, dst_tree, dst, cfg.sources[0], cfg.destination)
        pattern = fsutil.join(root, cfg.dataset_glob.strip("/"))
        found = 0
        tables: list[str] = []
        for path, status in src.storage.glob(src.url_of(pattern)):
            rel = fsutil.relpath(path.rstrip("/"), root)
            if not status.is_dir or fsutil.at_state_dir(rel) or _in_table(rel, tables):
                continue
            found += 1
            urn = src.url_of(path.rstrip("/"))
            target = dst_tree.url_of(fsutil.join(dst.rstrip("/"), rel))
            if is_delta_table(src, path):
                tables.append(rel)
                yield DeltaDataset(urn, urn, target)
            elif is_iceberg_table(src, path):
                tables.append(rel)
                yield IcebergDataset(urn, urn, target)
            else:
                yield RecursiveCopyableDataset(urn, urn, target)
        if not found:
            raise PlanningError(
                f"no directory under {cfg.sources[0]} matches --dataset-glob {cfg.dataset_glob!r}"
            )


def _in_table(rel: str, tables: list[str]) -> bool:
    """Whether a match lies inside a Delta table: in a ``_delta_log/``, or below a table
    matched before it (the glob's sorted order puts a table first). Copied on its own as
    a folder, a table's log could show a reader a commit before its data."""
    return LOG_DIR in rel.split("/") or any(rel.startswith(t + "/") for t in tables)
