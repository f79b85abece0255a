"""Pure packing of files into few, fat WorkUnits (driver).

A Spark task costs about 24 ms here and a packed file about 20 µs (BASELINE.md):
the number of tasks must follow the cores, not the files. Files are packed by
bytes plus a per-file cost (the open/close/stat overhead expressed in bytes),
largest first onto the least-loaded unit (LPT), which keeps units within one
large file of each other (seed 002's MultiWorkUnit). The files of one destination
folder go as one piece while it is a small part of a unit's share: a task stages them
in one staging folder, which a local destination then publishes by one rename
(``distcp.storage.folders``) instead of a rename of each file.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from distcp.copying.copyrows import Chunk
from distcp.model import CopyableFile, WorkUnit

#: Files one WorkUnit holds at most. A unit travels to its task as one pickled row
#: (about 300 bytes a file): 1,000,000 files in 4 units made tasks of 77 MiB that ran a
#: local driver's 1 GiB heap out of memory; 10,000 files make rows of about 3 MiB, and
#: the extra tasks (100 for a million files, ~24 ms each) cost little.
MAX_UNIT_FILES = 10_000


#: Work a core's share must exceed (bytes plus ``--file-cost`` a file) for two tasks a
#: core: each wave of tasks costs ~70 ms on the warm engine (1-2 empty tasks 0.12 s,
#: 4: 0.20 s, 8: 0.32 s on 2 cores), more than the balance a second one buys on a
#: short job (8 × 256 MiB, 1 GiB a core: copy phase 0.74 s in 2 tasks, 0.78 s in 4).
TWO_A_CORE = 3 << 29


def per_core(tasks: int | None, cost: int, cores: int) -> int:
    """Tasks per core: one with ``--tasks N`` (exactly N) or when each core's share of
    ``cost`` is under TWO_A_CORE; else two, so that a core that is done early takes
    work a slower one would still be doing."""
    return 1 if tasks or cost <= TWO_A_CORE * max(1, cores) else 2


def unit_count(n_files: int, cores: int, per_core: int = 2,
               max_files: int = MAX_UNIT_FILES) -> int:
    """Tasks for ``n_files`` on ``cores``: a small multiple of the cores, for balance,
    and more when a unit would otherwise hold more than ``max_files`` files."""
    wanted = max(max(1, cores) * per_core, -(-n_files // max_files))
    return max(0, min(n_files, wanted))


def units_of(files: Sequence[CopyableFile], cores: int, tasks: int | None, file_cost: int
             ) -> list[WorkUnit]:
    """``files`` packed for ``cores`` (``--tasks N``: exactly N units), one or two units a
    core by the work's cost (``per_core``)."""
    cost = sum(f.origin.size for f in files) + len(files) * file_cost
    return pack(files, unit_count(len(files), cores, per_core(tasks, cost, cores)), file_cost)


#: A destination folder whose files cost at most this fraction of a unit's share goes
#: to one unit whole: LPT then keeps units within one such folder of each other. B's
#: 20,000 files in 200 folders, packed file by file, left each folder's files in four
#: units: three quarters of them were published by a rename each (0.85 s of a 3.9 s
#: cold run), where one rename of each staging folder publishes a folder whole.
FOLDER_SHARE = 8


def pack(files: Sequence[CopyableFile], units: int, file_cost: int) -> list[WorkUnit]:
    """Distribute ``files`` over at most ``units`` WorkUnits of similar cost, a small
    destination folder's files in one of them (``FOLDER_SHARE``)."""
    if not files:
        return []
    units = max(1, min(units, len(files)))
    folders: dict[str, list[CopyableFile]] = {}
    for f in files:
        folders.setdefault(f.destination.rpartition("/")[0], []).append(f)
    share = (sum(f.origin.size for f in files) + len(files) * file_cost) // units
    pieces: list[tuple[int, str, list[CopyableFile]]] = []
    for group in folders.values():
        cost = sum(f.origin.size for f in group) + len(group) * file_cost
        if cost * FOLDER_SHARE <= share:
            pieces.append((cost, min(f.origin.url for f in group), group))
        else:  # a folder too big to go whole: file by file
            pieces.extend((f.origin.size + file_cost, f.origin.url, [f]) for f in group)
    heap: list[tuple[int, int]] = [(0, i) for i in range(units)]
    bins: list[list[CopyableFile]] = [[] for _ in range(units)]
    for cost, _, group in sorted(pieces, key=lambda p: (-p[0], p[1])):
        load, i = heapq.heappop(heap)
        bins[i].extend(group)
        heapq.heappush(heap, (load + cost, i))
    return [WorkUnit(i, tuple(b)) for i, b in enumerate(bins) if b]


def pack_chunks(chunks: Sequence[Chunk], units: int, file_cost: int,
                max_files: int = MAX_UNIT_FILES) -> list[tuple[Chunk, ...]]:
    """``pack`` for chunks of files kept on the executors (``distcp.copying.copyrows``):
    largest cost first onto the least-loaded unit that has room for its files; a new
    unit when none has (a chunk holds at most ``copyrows.CHUNK`` files)."""
    if not chunks:
        return []
    bins: list[list[Chunk]] = [[] for _ in range(max(1, min(units, len(chunks))))]
    files = [0] * len(bins)
    heap: list[tuple[int, int]] = [(0, i) for i in range(len(bins))]
    for c in sorted(chunks, key=lambda c: (-(c.bytes + c.files * file_cost), c.url, c.index)):
        full: list[tuple[int, int]] = []
        while heap and files[heap[0][1]] + c.files > max_files:
            full.append(heapq.heappop(heap))
        if heap:
            load, i = heapq.heappop(heap)
        else:
            load, i = 0, len(bins)
            bins.append([])
            files.append(0)
        bins[i].append(c)
        files[i] += c.files
        heapq.heappush(heap, (load + c.bytes + c.files * file_cost, i))
        for entry in full:
            heapq.heappush(heap, entry)
    return [tuple(b) for b in bins if b]


def split_chunks(chunks: Sequence[Chunk], wanted: int, file_cost: int) -> list[Chunk]:
    """``chunks``, the costliest cut in two until there are ``wanted`` (or every one is a
    single file): a small tree, or a few big files, planned into one row group must
    still spread over the cores. A part's bytes are its share by files (the files of a
    row group are not sized one by one here)."""
    heap = [(-(c.bytes + c.files * file_cost), n, c) for n, c in enumerate(chunks)]
    heapq.heapify(heap)
    done: list[Chunk] = []
    serial = len(heap)
    while heap and len(heap) + len(done) < wanted:
        _, _, c = heapq.heappop(heap)
        if c.files < 2:
            done.append(c)
            continue
        half = c.files // 2
        share = c.bytes * half // c.files
        for part in (Chunk(c.url, c.index, half, share, c.first),
                     Chunk(c.url, c.index, c.files - half, c.bytes - share, c.first + half)):
            heapq.heappush(heap, (-(part.bytes + part.files * file_cost), serial, part))
            serial += 1
    return sorted([*done, *(c for _, _, c in heap)], key=lambda c: (c.url, c.index, c.first))
