#!/usr/bin/env python
"""The floor: pydistcp's per-file work done by plain Python, with nothing around it.

    python benchmarks/floor.py SRC DST [--processes N] [--verify digest|size]

Copies the tree SRC to DST (DST made, as ``cp -a SRC DST`` makes it) in N forked
processes (default: one per core), each taking whole files, the largest first, to the
least loaded process. Each file gets what a copy by pydistcp's copying processes gives
it, and nothing else: its source opened and read, the bytes hashed (xxh3-128,
pydistcp's digest) and written to a new file, its mode and mtime set, then (``--verify
digest``, pydistcp's default) read back and hashed, the two digests compared. (A big file
is read, hashed and written here; pydistcp hashes it while the kernel copies it, the
same passes over its bytes.) There is no start of a tool, no lock, no plan, no state, no journal, no
progress, no staging folder and no publish.

Why it exists: issue 37's targets are ratios to peers, and on a machine whose kernel
work per file is costly (this project's: file creation, page allocation) the time such a
copy cannot go under decides whether a target can be met at all. ``bench_copy.py``
runs it as the tool ``floor`` in the same interleaved rounds as ``cp -a``, rclone and
pydistcp; pydistcp's distance from it is the tool's own cost. It is a floor for many
small files (data set B) only: a big file's copy by the kernel, pydistcp's way, beats
this plain loop (A: 1.71 s against pydistcp's 1.08 s on 2026-12-02), so bench_copy.py
runs it on B alone.

Exit status 0, or 1 with a line naming the file whose read-back differed.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path

import xxhash

#: Bytes read, hashed and written at a time.
BUFFER = 8 << 20


def listed(src: Path, dst: Path) -> list[tuple[str, str, os.stat_result]]:
    """Every regular file under ``src`` with its target under ``dst``; the folders made."""
    files = []
    for folder, _subfolders, names in os.walk(src):
        target = dst / os.path.relpath(folder, src)
        target.mkdir(parents=True, exist_ok=True)
        for name in names:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                files.append((path, str(target / name), st))
    return files


def shares(files: list[tuple[str, str, os.stat_result]], n: int
           ) -> list[list[tuple[str, str, os.stat_result]]]:
    """``files`` cut into ``n`` lists of about equal bytes, the largest file first."""
    out: list[list[tuple[str, str, os.stat_result]]] = [[] for _ in range(n)]
    load = [0] * n
    for f in sorted(files, key=lambda f: -f[2].st_size):
        k = load.index(min(load))
        out[k].append(f)
        load[k] += f[2].st_size
    return out


def copy_one(src: str, dst: str, st: os.stat_result, buffer: bytearray, verify: str
             ) -> None:
    view = memoryview(buffer)
    digest = xxhash.xxh3_128()
    fd = os.open(src, os.O_RDONLY)
    try:
        out = os.open(dst, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            while n := os.readv(fd, [buffer]):
                digest.update(view[:n])
                done = 0
                while done < n:
                    done += os.write(out, view[done:n])
            os.fchmod(out, stat.S_IMODE(st.st_mode))
            os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
            if os.fstat(out).st_size != st.st_size:
                raise OSError(f"{dst}: size differs after the copy")
            if verify == "digest":
                back, pos = xxhash.xxh3_128(), 0
                while n := os.preadv(out, [buffer], pos):
                    back.update(view[:n])
                    pos += n
                if back.digest() != digest.digest():
                    raise OSError(f"{dst}: read back differs from its source")
        finally:
            os.close(out)
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[2])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--verify", choices=("digest", "size"), default="digest")
    args = ap.parse_args(argv)
    if not args.src.is_dir():
        ap.error(f"{args.src}: not a folder")
    pids = []
    for share in shares(listed(args.src, args.dst), max(1, args.processes)):
        pid = os.fork()
        if pid == 0:  # a child ends in os._exit
            code = 0
            try:
                buffer = bytearray(BUFFER)
                for src, dst, st in share:
                    copy_one(src, dst, st, buffer, args.verify)
            except OSError as exc:
                print(f"floor: {exc}", file=sys.stderr, flush=True)
                code = 1
            os._exit(code)
        pids.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    return 0 if not any(codes) else 1


if __name__ == "__main__":
    sys.exit(main())
