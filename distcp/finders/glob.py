"""GlobDatasetsFinder: every directory matching ``--dataset-glob`` is a dataset (driver).

The glob is relative to the single source root; each match is copied to the same
relative path under the destination, and its URN is its origin URL.
"""

from __future__ import annotations

from collections.abc import Iterator

from distcp.datasets.base import CopyableDataset
from distcp.datasets.recursive import RecursiveCopyableDataset
from distcp.errors import ConfigurationError, PlanningError
from distcp.finders.base import DatasetsFinder
from distcp.finders.single import check_not_inside, source_info
from distcp.storage import filesystems as fsutil


class GlobDatasetsFinder(DatasetsFinder):
    """One RecursiveCopyableDataset per matching directory, in sorted order."""

    def find(self) -> Iterator[CopyableDataset]:
        cfg = self.cfg
        if len(cfg.sources) != 1 or not cfg.dataset_glob:
            raise ConfigurationError("--dataset-glob takes exactly one source root")
        src_fs, root = fsutil.filesystem(cfg.sources[0], cfg.src_options)
        dst_fs, dst = fsutil.filesystem(cfg.destination, cfg.dst_options)
        root = root.rstrip("/")
        if source_info(src_fs, root, cfg.sources[0])["type"] != "directory":
            raise PlanningError(f"--dataset-glob needs a directory source, not {cfg.sources[0]}")
        check_not_inside(src_fs, root, dst_fs, dst, cfg.sources[0], cfg.destination)
        pattern = fsutil.join(root, cfg.dataset_glob.strip("/"))
        matches = src_fs.glob(pattern, detail=True)
        found = 0
        for path, info in sorted(matches.items()):
            rel = fsutil.relpath(path.rstrip("/"), root)
            if info.get("type") != "directory" or fsutil.at_state_dir(rel):
                continue
            found += 1
            urn = fsutil.to_url(src_fs, path.rstrip("/"))
            target = fsutil.to_url(dst_fs, fsutil.join(dst.rstrip("/"), rel))
            yield RecursiveCopyableDataset(urn, urn, target)
        if not found:
            raise PlanningError(
                f"no directory under {cfg.sources[0]} matches --dataset-glob {cfg.dataset_glob!r}"
            )
