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
#: How long a deletion slows file creation here at most (the dirty window, 5 minutes).
WINDOW_S = 300.0
#: Seconds between probes, and the longest wait: the window and two minutes more.
EVERY_S, AT_MOST_S = 10.0, WINDOW_S + 120.0


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


#: The file under a benchmark's work folder that says when it last deleted many files.
DELETED_AT = ".deleted-at"


def deleted(workdir: Path) -> None:
    """Note in ``workdir`` that a benchmark just deleted many files there (its emptied
    copies): the next benchmark run waits the window out (``after_deletion``), where a
    probe in one block group can pass while the copies' groups are still slow (a B
    run started a minute after another's deletion: `cp -a` 1.33 s by the median against
    0.46 s in the run before it, benchmarks/RESULTS.md, 2026-12-04)."""
    (workdir / DELETED_AT).write_text(f"{time.time():.0f}\n")


def after_deletion(workdir: Path) -> float:
    """Wait until ``WINDOW_S`` has passed since the deletion ``deleted`` noted in
    ``workdir``; returns the seconds waited."""
    try:
        at = float((workdir / DELETED_AT).read_text())
    except (OSError, ValueError):
        return 0.0
    left = at + WINDOW_S - time.time()
    if left <= 0:
        return 0.0
    print(f"[settle] the last benchmark deleted its copies {WINDOW_S - left:.0f} s ago: "
          f"waiting {left:.0f} s for their inodes", flush=True)
    time.sleep(left)
    return left


def clear(workdir: Path) -> None:
    """Remove the probes' files (after the last timed run)."""
    shutil.rmtree(workdir / ".probe", ignore_errors=True)
