"""Wait until creating files on the benchmark's filesystem costs what it normally does.

This project's machine has ext4 without a journal. There, the kernel does not hand out
an inode deleted less than 60 s ago, or 5 minutes while its inode-table block is still
dirty in memory (``recently_deleted`` in ``fs/ext4/ialloc.c``). Each new file's
allocation skips every such inode, one buffer lookup each, from the start of the group.
So for 3-5 minutes after a tree of many files is deleted, every file created on that
filesystem costs ~15 times more kernel time: measured on 2026-12-01, 2,000 files of one
byte took 31-38 µs each, then 450-540 µs each for 3-4 minutes after 100,000 files were
deleted, `sync` or not (benchmarks/RESULTS.md, 2026-12-01). A tool timed in that window
is timed against the kernel, not its peers: this was the "weather" of earlier entries.

``settle(folder)`` probes the cost of a file's creation every few seconds and returns
once it is normal again. Give it the folder the timed copies are made in: ext4 keeps a
folder's subfolders in or near its own block group, and the penalty is per group (on
2026-12-01 a probe under the benchmark's top folder passed minutes after 600,000 files
were removed elsewhere, and the copies made next had copy phases twice those of a
quieter run: likely another group still in its window). The probe's files are kept
(deleting them would start the window again) under ``<folder>/.probe``;
``clear(folder)``, or removing the folder, removes them when nothing is timed any more.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

#: A file's creation costs less than this when no deletion is recent (31-38 µs here).
NORMAL_US = 100.0
#: Files each probe creates.
PROBE_FILES = 300
#: Seconds between probes, and the longest wait (the dirty window is 5 minutes).
EVERY_S, AT_MOST_S = 10.0, 420.0


def probe(workdir: Path) -> float:
    """Microseconds per file to create ``PROBE_FILES`` one-byte files in a new folder, the
    better of two tries (a new folder's first files sometimes cost 10 times more alone)."""
    return min(_probe(workdir), _probe(workdir))


def _probe(workdir: Path) -> float:
    folder = workdir / ".probe" / f"p{time.time_ns()}"
    folder.mkdir(parents=True)
    start = time.perf_counter()
    for n in range(PROBE_FILES):
        fd = os.open(folder / f"f{n}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b"x")
        os.close(fd)
    return (time.perf_counter() - start) / PROBE_FILES * 1e6


def settle(workdir: Path, what: str = "") -> float:
    """Wait until a file's creation under ``workdir`` is normal (at most ``AT_MOST_S``);
    returns the seconds waited, and says so when it waited."""
    start = time.monotonic()
    cost = probe(workdir)
    while cost > NORMAL_US and time.monotonic() - start < AT_MOST_S:
        time.sleep(EVERY_S)
        cost = probe(workdir)
    waited = time.monotonic() - start
    if cost > NORMAL_US:
        print(f"[settle] {what}creating a file still costs {cost:.0f} µs after "
              f"{waited:.0f} s: timing anyway", flush=True)
    elif waited > EVERY_S:
        print(f"[settle] {what}waited {waited:.0f} s for a deletion's inodes "
              f"(now {cost:.0f} µs a file)", flush=True)
    return waited


def clear(workdir: Path) -> None:
    """Remove the probes' files (after the last timed run)."""
    shutil.rmtree(workdir / ".probe", ignore_errors=True)
