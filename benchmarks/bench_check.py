#!/usr/bin/env python
"""``pydistcp check`` against ``rclone check``: a copy compared with its source.

    python benchmarks/bench_check.py [--rounds N] [--files 500,2000] [--workdir DIR]

Data (generated with a fixed seed in the work folder): N files of 1-64 KiB in 20
folders, copied once by pydistcp (so its state holds the source's digests), one byte of
one copy flipped with its size and mtime kept, which every tool must find. Interleaved
rounds, each tool a fresh process, cold (no engine):

- ``pydistcp``: the default (``--copying auto``: a few files read in the check's own
  processes, no Spark job);
- ``pydistcp-spark``: ``--copying spark`` (a Spark job of its own: every check before
  2026-11-30);
- ``pydistcp-both``: ``--no-stored-digests`` (both sides read, as rclone does);
- ``rclone``: ``rclone check --checksum`` (MD5 of both sides; ``--checkers 4``).

Writes benchmarks/results/check.json (not kept in git: results worth keeping go to
benchmarks/RESULTS.md, dated).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
PYDISTCP = [sys.executable, "-m", "distcp"]
TOOLS = ("pydistcp", "pydistcp-spark", "pydistcp-both", "rclone")


def make_tree(root: Path, files: int) -> None:
    rng = random.Random(files)
    for i in range(files):
        d = root / f"d{i % 20:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.bin").write_bytes(rng.randbytes(rng.randint(1 << 10, 64 << 10)))


def flip_one_byte(path: Path) -> None:
    """One bit of ``path`` changed in place, its mtime put back: only contents tell."""
    st = path.stat()
    with open(path, "r+b") as f:
        first = f.read(1)
        f.seek(0)
        f.write(bytes([first[0] ^ 1]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def command(tool: str, src: Path, dst: Path) -> list[str]:
    if tool == "rclone":
        exe = shutil.which("rclone", path=os.path.dirname(sys.executable)) or "rclone"
        return [exe, "check", "--checksum", "--checkers", "4", str(src), str(dst),
                "--exclude", ".pydistcp/**"]
    flags = {"pydistcp-spark": ["--copying", "spark"],
             "pydistcp-both": ["--no-stored-digests"]}.get(tool, [])
    return [*PYDISTCP, "check", str(src), str(dst), "--no-progress", "--engine", "cold",
            "--master", "local[2]", *flags]


def one(tool: str, src: Path, dst: Path) -> float:
    t = time.monotonic()
    r = subprocess.run(command(tool, src, dst), capture_output=True, text=True, check=False,
                       stdin=subprocess.DEVNULL)
    took = time.monotonic() - t
    # each must find the flipped byte, and only it: exit 1, the one file named
    if r.returncode != 1 or "d00/f0.bin" not in r.stdout + r.stderr:
        raise RuntimeError(f"{tool} did not find the flipped byte: {r.returncode} "
                           f"{r.stderr[-2000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", default="500,2000")
    ap.add_argument("--workdir")
    opts = ap.parse_args()
    work = Path(opts.workdir or tempfile.mkdtemp(prefix="pydistcp-check-"))
    out: dict[str, Any] = {"machine": {"when": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                       "cpus": os.cpu_count(),
                                       "platform": platform.platform()}}
    for files in (int(n) for n in opts.files.split(",")):
        src, dst = work / f"src{files}", work / f"dst{files}"
        shutil.rmtree(src, ignore_errors=True)
        shutil.rmtree(dst, ignore_errors=True)
        make_tree(src, files)
        subprocess.run([*PYDISTCP, "copy", str(src), str(dst), "--no-progress"], check=True,
                       capture_output=True)
        flip_one_byte(dst / "d00" / "f0.bin")
        times: dict[str, list[float]] = {t: [] for t in TOOLS}
        for rnd in range(opts.rounds):
            order = TOOLS[rnd % len(TOOLS):] + TOOLS[:rnd % len(TOOLS)]
            for tool in order:
                times[tool].append(round(one(tool, src, dst), 2))
                print(f"  {files} {tool} round {rnd}: {times[tool][-1]:.2f}s", flush=True)
        med = {t: round(statistics.median(v), 2) for t, v in times.items()}
        out[str(files)] = {"median_s": med, "runs_s": times,
                           "ratio_to_rclone": {t: round(v / med["rclone"], 2)
                                               for t, v in med.items()}}
        print(json.dumps({files: out[str(files)]["median_s"]}), flush=True)
    if not opts.workdir:
        shutil.rmtree(work, ignore_errors=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "check.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
