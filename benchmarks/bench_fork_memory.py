#!/usr/bin/env python
"""One fork task's peak memory with a slow branch: a file read once into three local
branches, the third pausing per 1 MiB chunk (``DISTCP_SLOW_AT``), in a fresh process
running what a Spark task runs (tests/fixtures/forkpeak.py).

    python benchmarks/bench_fork_memory.py [--gib 1] [--slow 0.01]

Issue 12's target: a task's peak RSS under 256 MiB on a 1 GiB file with one branch ten
times slower. Measured alone on this machine: 159 MiB, the slow branch's queue 99 % full.
tests/unit/test_fork_memory.py asserts it. (One full-suite run reported 1,930 MiB: the
child's ``ru_maxrss``, which Linux carries over from the 1.9 GiB pytest parent across
exec; the fixture now reads the child's own ``VmHWM``.)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fixtures.forkpeak import fork_peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gib", type=int, default=1)
    parser.add_argument("--slow", type=float, default=0.01)
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-fork-memory-"))
    try:
        source = work / "big.bin"
        with open(source, "wb") as f:  # sparse: the read costs no disk
            f.seek((opts.gib << 30) - 1)
            f.write(b"x")
        out = fork_peak(source, work / "work", opts.slow)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
