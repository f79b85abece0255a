"""StreamDatasetsFinder: one StreamDataset per topic directory, ``--finder stream`` (driver).

The topics are the folders right under the single source root, or those that
``--dataset-glob`` matches; each is copied to the same relative path under the
destination, and its URN is its origin URL (the partition is the file set's name).
"""

from __future__ import annotations

from collections.abc import Iterator

from distcp.datasets.base import CopyableDataset
from distcp.datasets.partitions import PartitionPattern
from distcp.datasets.stream import StreamDataset
from distcp.errors import ConfigurationError, PlanningError
from distcp.finders.base import DatasetsFinder
from distcp.finders.single import check_not_inside, source_status
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.base import Tree


class StreamDatasetsFinder(DatasetsFinder):
    """One StreamDataset per topic folder, in sorted order."""

    def find(self) -> Iterator[CopyableDataset]:
        cfg = self.cfg
        if len(cfg.sources) != 1:
            raise ConfigurationError("--finder stream takes exactly one source root (the "
                                     "folder of the topics)")
        pattern = PartitionPattern.parse(cfg.partition_pattern)
        src = storage_for(cfg.sources[0], dict(cfg.src_options)).tree(cfg.sources[0])
        dst_tree = storage_for(cfg.destination, dict(cfg.dst_options)).tree(cfg.destination)
        root, dst = src.path.rstrip("/"), dst_tree.path
        if not source_status(src, cfg.sources[0]).is_dir:
            raise PlanningError(f"--finder stream needs a directory source, not "
                                f"{fsutil.display(cfg.sources[0])}", path=cfg.sources[0])
        check_not_inside(src, dst_tree, dst, cfg.sources[0], cfg.destination)
        found = 0
        for path in self._topics(src, root):
            rel = fsutil.relpath(path, root)
            found += 1
            urn = src.url_of(path)
            target = dst_tree.url_of(fsutil.join(dst.rstrip("/"), rel))
            yield StreamDataset(urn, urn, target, pattern)
        if not found:
            raise PlanningError(f"no topic directory under {fsutil.display(cfg.sources[0])}"
                                + (f" matches --dataset-glob {cfg.dataset_glob!r}"
                                   if cfg.dataset_glob else ""), path=cfg.sources[0])

    def _topics(self, src: Tree, root: str) -> list[str]:
        """The topic folders' paths: those the glob matches, else those right under
        ``root`` (a link to a folder is no topic: the listing names it as itself)."""
        if self.cfg.dataset_glob:
            entries = src.storage.glob(src.url_of(fsutil.join(root,
                                                              self.cfg.dataset_glob.strip("/"))))
        else:
            entries = src.storage.listing(src.url)
        return sorted(p.rstrip("/") for p, st in entries if st.is_dir
                      and not fsutil.at_state_dir(fsutil.relpath(p.rstrip("/"), root)))
