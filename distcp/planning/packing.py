"""Pure packing of files into few, fat WorkUnits.

A Spark task costs about 24 ms here and a packed file about 20 µs (BASELINE.md):
the number of tasks must follow the cores, not the files. Files are packed by
bytes plus a per-file cost (the open/close/stat overhead expressed in bytes),
largest first onto the least-loaded unit (LPT), which keeps units within one
large file of each other (seed 002's MultiWorkUnit).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from distcp.model import CopyableFile, WorkUnit


def unit_count(n_files: int, cores: int, per_core: int = 2) -> int:
    """Tasks for ``n_files`` on ``cores``: a small multiple of the cores, for balance."""
    return max(0, min(n_files, max(1, cores) * per_core))


def pack(files: Sequence[CopyableFile], units: int, file_cost: int) -> list[WorkUnit]:
    """Distribute ``files`` over at most ``units`` WorkUnits of similar cost."""
    if not files:
        return []
    units = max(1, min(units, len(files)))
    heap: list[tuple[int, int]] = [(0, i) for i in range(units)]
    bins: list[list[CopyableFile]] = [[] for _ in range(units)]
    for f in sorted(files, key=lambda f: (-f.origin.size, f.origin.url)):
        load, i = heapq.heappop(heap)
        bins[i].append(f)
        heapq.heappush(heap, (load + f.origin.size + file_cost, i))
    return [WorkUnit(i, tuple(b)) for i, b in enumerate(bins) if b]
