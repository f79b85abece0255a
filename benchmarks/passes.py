#!/usr/bin/env python
"""What each pass over a big file's bytes costs a core: the bound of issue 37's target A.

    python benchmarks/passes.py [--rounds 5] [--mib 1024] [--workdir DIR]

Target A asks pydistcp's copy phase of 8 × 256 MiB (local → local) for 1.5× the
throughput of ``cp -a``. ``cp -a`` moves the bytes once, in the kernel
(``copy_file_range``), on one core, and reads nothing back. A copy by pydistcp must
also hash the source's bytes (the digest comes from bytes read from the source) and,
with ``--verify digest`` (the default), hash the copy read back. This script times
those passes alone, in plain Python, over ``--mib`` MiB of page-cached source per
process, one process (one core) and then two at once (both cores, each its own files),
interleaved in rounds; the medians are seconds per GiB a process.

The ways measured, each 256 KiB at a time as pydistcp's loop takes them:

- ``read``: ``preadv`` of the source;
- ``read+hash``: and xxh3-128 of it;
- ``read+hash+write``: and ``pwrite`` to a new file (a copy without verify);
- ``pydistcp``: and the piece read back and hashed (pydistcp's loop with the verify);
- ``copy_into``: pydistcp's own function for it (``distcp.storage.local.copyfile``), with
  its verify: how far the tool's code is from the bare loop;
- ``kernel``: ``copy_file_range`` alone (``cp -a``'s way, no digest);
- ``kernel+readbacks``: the kernel's copy, then the source and the copy read back and
  hashed piece by piece (the digest and the verify around the kernel's copy).

How to read it: A's copy phase cannot go under the ``pydistcp`` line's seconds per
GiB with both cores busy (each process copies half the bytes), and ``cp -a`` takes the
``kernel`` line's seconds per GiB on one core for all of them: twice the one over the
other is the most the loop can reach against ``cp -a``, printed last for the loop, for
``copy_into`` and for the loop without its verify.

Run it alone. This machine's host slows a run that writes into pages the guest has
handed back to it two to four times (the system time triples; the kernel's copy is hit
too), and pages freed a moment ago are not handed back yet: so each timed run follows
an untimed run of the same way, whose pages it reuses. Read the minimums beside the
medians all the same.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import xxhash

from distcp.checksum import Digest
from distcp.storage.buffers import ReadBuffer
from distcp.storage.local.copyfile import copy_into

PIECE = 256 << 10
FILE = 256 << 20
#: copy_into's buffer, as a copying process holds one.
BUFFER = ReadBuffer(8 << 20)
WAYS = ("read", "read+hash", "read+hash+write", "pydistcp", "copy_into", "kernel",
        "kernel+readbacks")


def sources(folder: Path, mib: int, process: int) -> list[Path]:
    """The process's page-cached source files (made once, random bytes)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(max(1, (mib << 20) // FILE)):
        path = folder / f"p{process}-{i}.bin"
        if not path.exists() or path.stat().st_size != FILE:
            with open(path, "wb") as out:
                out.writelines(os.urandom(16 << 20) for _ in range(FILE // (16 << 20)))
        files.append(path)
    for path in files:  # into the page cache, as a warm benchmark's source is
        with open(path, "rb") as f:
            while f.read(16 << 20):
                pass
    return files


def one_file(way: str, src: Path, dst: Path, view: memoryview) -> None:
    if way == "copy_into":
        with open(src, "rb") as f:
            fd, _digest = copy_into(f.fileno(), str(dst), BUFFER, fresh=os.fstat(f.fileno()),
                                    check=Digest())
            os.close(fd)
        return
    s = os.open(src, os.O_RDONLY)
    d = os.open(dst, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        size, pos = os.fstat(s).st_size, 0
        digest, check = xxhash.xxh3_128(), xxhash.xxh3_128()
        while pos < size:
            if way.startswith("kernel"):
                n = os.copy_file_range(s, d, PIECE, pos, pos)
                if way == "kernel+readbacks":
                    digest.update(view[:os.preadv(s, [view], pos)])
                    check.update(view[:os.preadv(d, [view[:n]], pos)])
            else:
                n = os.preadv(s, [view], pos)
                if way != "read":
                    digest.update(view[:n])
                if way in ("read+hash+write", "pydistcp"):
                    os.pwrite(d, view[:n], pos)
                if way == "pydistcp":
                    check.update(view[:os.preadv(d, [view[:n]], pos)])
            pos += n
    finally:
        os.close(s)
        os.close(d)


def run(way: str, files: list[Path], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    view = memoryview(bytearray(PIECE))
    for i, src in enumerate(files):
        one_file(way, src, out / f"{i}.bin", view)


def timed(way: str, shares: list[list[Path]], out: Path) -> float:
    """Wall seconds of ``way`` over each share, each in its own forked process at once."""
    shutil.rmtree(out, ignore_errors=True)
    begun = time.perf_counter()
    children = []
    for k, files in enumerate(shares):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                run(way, files, out / str(k))
            except BaseException:  # noqa: BLE001 - reported by the exit status
                code = 1
            os._exit(code)
        children.append(pid)
    failed = [pid for pid in children if os.waitpid(pid, 0)[1]]
    took = time.perf_counter() - begun
    shutil.rmtree(out, ignore_errors=True)
    if failed:
        sys.exit(f"passes: {way} failed in {len(failed)} process(es)")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mib", type=int, default=1024, help="source MiB a process copies")
    parser.add_argument("--workdir", type=Path,
                        default=Path(__file__).parent / "data" / "passes")
    args = parser.parse_args()
    shares = [sources(args.workdir / "src", args.mib, k) for k in range(2)]
    gib = args.mib / 1024
    seen: dict[tuple[str, int], list[float]] = {}
    for r in range(args.rounds):
        for way in WAYS[r % len(WAYS):] + WAYS[:r % len(WAYS)]:  # each round starts elsewhere
            for cores in (1, 2):
                timed(way, shares[:cores], args.workdir / "out")  # untimed: see the docstring
                took = timed(way, shares[:cores], args.workdir / "out") / gib
                seen.setdefault((way, cores), []).append(took)
                print(f"[round {r + 1}/{args.rounds}] {way:17} {cores} core(s) "
                      f"{took:.3f} s/GiB", file=sys.stderr)
    print(f"\n{os.cpu_count()} cores; {args.mib} MiB a process, page-cached; "
          f"{args.rounds} interleaved rounds, median (min-max) seconds per GiB a process\n")
    print("| way | one core | both cores at once |\n|---|---|---|")
    median = {key: statistics.median(v) for key, v in seen.items()}
    for way in WAYS:
        cells = [f"{median[way, c]:.3f} ({min(seen[way, c]):.3f}-{max(seen[way, c]):.3f})"
                 for c in (1, 2)]
        print(f"| {way} | {cells[0]} | {cells[1]} |")
    cp = median["kernel", 1]

    def against_cp(way: str) -> str:
        return f"{2 * cp / median[way, 2]:.2f}×"

    print(f"\nAgainst cp -a ({cp:.3f} s/GiB on one core), on both cores: the bare loop "
          f"{against_cp('pydistcp')}, pydistcp's copy_into {against_cp('copy_into')}, "
          f"the loop without the verify {against_cp('read+hash+write')}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
