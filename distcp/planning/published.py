"""A paired walk's target as the state's manifest knows it: ``--incremental`` (driver).

``--incremental`` trusts the manifest for the destination: what pydistcp published
there, each file with its size and its source's mtime then. The driver's paired walk of
a local source (``distcp.planning.treeplans``) then walks the source alone, and each of
its entries is paired here with the manifest's row at its destination instead of a
walk of the target: half the ``stat`` calls of a no-op rerun, and no object for a file
the manifest vouches for (the same size and mtime: its source stat stands for the
target's, which ``joined.plan_rows`` skips as a walked twin). Any other row becomes
the ``FileStatus`` the manifest listing gives the driver's planner
(``planning.listing.manifest_listing``), decided by ``plan.decide`` as there, so both
planners give the same plan.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping

from distcp.model import FileStatus
from distcp.mtimes import same_mtime
from distcp.planning.paired import Pair


class Published:
    """The manifest's ``dest -> (size, origin mtime)`` of one dataset, as the target of
    the pairs of a walk of ``src_root`` whose files land under ``dst_root``.
    ``vouch``: whether a file the manifest holds as it is may be skipped on its stat
    (``plan.skips_same``: not under ``--checksum`` or ``--overwrite``, whose decisions
    keep the target they were made against)."""

    def __init__(self, rows: Mapping[str, tuple[int, float]], src_root: str,
                 dst_root: str, vouch: bool = True) -> None:
        self.rows, self.vouch = rows, vouch
        self.cut = len(src_root.rstrip("/")) + 1
        self.prefix = dst_root.rstrip("/") + "/"

    def paired(self, pairs: Iterable[Pair]) -> Iterator[Pair]:
        """``pairs`` (a source entry each, its target not looked for) with the target
        the manifest holds at each source entry's destination."""
        rows, cut, prefix, vouch = self.rows, self.cut, self.prefix, self.vouch
        for source, target in pairs:
            if target is None and isinstance(source, tuple):
                dest = prefix + source[0][cut:]
                row = rows.get(dest)
                if row is not None:
                    status = source[1]
                    if vouch and isinstance(status, os.stat_result) \
                            and row[0] == status.st_size and same_mtime(row[1], status.st_mtime):
                        target = dest, status  # vouched for: skipped on its stat
                    else:
                        target = dest, FileStatus(dest, row[0], row[1])
            yield source, target
