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
from distcp.finders.single import check_not_inside, source_info
from distcp.storage import filesystems as fsutil


class StreamDatasetsFinder(DatasetsFinder):
    """One StreamDataset per topic folder, in sorted order."""

    def find(self) -> Iterator[CopyableDataset]:
        cfg = self.cfg
        if len(cfg.sources) != 1:
            raise ConfigurationError("--finder stream takes exactly one source root (the "
                                     "folder of the topics)")
        pattern = PartitionPattern.parse(cfg.partition_pattern)
        src_fs, root = fsutil.filesystem(cfg.sources[0], cfg.src_options)
        dst_fs, dst = fsutil.filesystem(cfg.destination, cfg.dst_options)
        root = root.rstrip("/")
        if source_info(src_fs, root, cfg.sources[0])["type"] != "directory":
            raise PlanningError(f"--finder stream needs a directory source, not "
                                f"{fsutil.display(cfg.sources[0])}", path=cfg.sources[0])
        check_not_inside(src_fs, root, dst_fs, dst, cfg.sources[0], cfg.destination)
        found = 0
        for path in self._topics(src_fs, root):
            rel = fsutil.relpath(path, root)
            found += 1
            urn = fsutil.to_url(src_fs, path)
            target = fsutil.to_url(dst_fs, fsutil.join(dst.rstrip("/"), rel))
            yield StreamDataset(urn, urn, target, pattern)
        if not found:
            raise PlanningError(f"no topic directory under {fsutil.display(cfg.sources[0])}"
                                + (f" matches --dataset-glob {cfg.dataset_glob!r}"
                                   if cfg.dataset_glob else ""), path=cfg.sources[0])

    def _topics(self, fs, root: str) -> list[str]:  # type: ignore[no-untyped-def]
        if self.cfg.dataset_glob:
            matches = fs.glob(fsutil.join(root, self.cfg.dataset_glob.strip("/")), detail=True)
            entries = [(p, i) for p, i in matches.items()]
        else:
            entries = [(i["name"], i) for i in fs.ls(root, detail=True)]
        return sorted(p.rstrip("/") for p, i in entries if i.get("type") == "directory"
                      and not fsutil.at_state_dir(fsutil.relpath(p.rstrip("/"), root)))
