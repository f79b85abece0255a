"""A dataset narrowed to the files one batch of a continuous copy offers (driver).

The batch's files were listed by the stream's source (``planning.arrivals``); this
dataset plans from them as ``--files-from`` plans from a list (the source tree is not
walked again) and asks the destination only about them: one stat per file where the
whole destination tree would cost a listing that grows with everything published.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from distcp.configuration import CopyConfiguration
from distcp.datasets.base import CopyableDataset, DatasetListing
from distcp.model import CopyableFile, FileStatus
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.base import Tree

#: Destination stats asked at once where each is a request (object stores).
STATS_AT_ONCE = 16


class OfferedDataset(CopyableDataset):
    """``inner`` planned from ``entries`` ((path, FileStatus) pairs as its tree's
    storage spells them) instead of a walk of its tree."""

    #: Its listing is a batch, never all the dataset wants (``--delete`` has no basis).
    lists_everything = False

    def __init__(self, inner: CopyableDataset,
                 entries: Sequence[tuple[str, FileStatus]]) -> None:
        super().__init__(inner.urn, inner.root, inner.destination_root, is_file=inner.is_file)
        self.inner, self.entries = inner, tuple(entries)

    def listing(self, cfg: CopyConfiguration) -> DatasetListing:
        if self.is_file:  # one file: its own listing is one stat
            return self.inner.listing(cfg)

        def offered(tree: Tree, skipped: list[fsutil.Skipped]
                    ) -> Iterable[tuple[str, FileStatus]]:
            return iter(self.entries)

        return self.inner.listing_from(cfg, offered)

    def targets(self, cfg: CopyConfiguration, files: Sequence[CopyableFile]
                ) -> dict[str, FileStatus] | None:
        """Each file's destination, stat'ed; an expansion (a destination folder) needs
        the listing of what it expanded to before, so the root is listed then."""
        if self.is_file or any(f.destination.endswith("/") for f in files):
            return None
        storage = storage_for(self.destination_root, dict(cfg.dst_options))
        remote = not storage.capabilities.local_paths

        def stat(url: str) -> tuple[str, FileStatus | None]:
            try:
                return url, storage.stat(url)
            except FileNotFoundError:
                return url, None

        urls = [f.destination for f in files]
        if remote:
            with ThreadPoolExecutor(STATS_AT_ONCE) as pool:
                found = list(pool.map(stat, urls))
        else:
            found = [stat(u) for u in urls]
        return {url: st for url, st in found if st is not None}
