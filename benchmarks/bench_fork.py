#!/usr/bin/env python
"""The fork against separate runs: three destinations in one run (each source file read
once) versus three runs of ``pydistcp copy`` over the same data, one per destination.

    python benchmarks/bench_fork.py [--rounds N] [--engine cold|warm]

Data (generated once with a fixed seed under benchmarks/data/fork/): big = 4 x 64 MiB,
small = 2,000 files of 1-16 KiB in 20 directories. The three branches are plain local
copies (the case where the fork saves only the reads and the runs' fixed costs; a
converter branch adds its own work to both sides alike). Every round runs the fork and
the three separate runs, into fresh destinations, checked by file count and bytes;
medians are reported with the fork's queue statistics. The target (issue 12): the fork
in at most 0.6x the time of the three runs together.

Writes benchmarks/results/fork.json and fork.md (the run's table, not kept in git: results
worth keeping go to benchmarks/RESULTS.md, dated).
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
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "fork"
RESULTS = HERE / "results"
PYDISTCP = [sys.executable, "-m", "distcp"]


def make_data() -> dict[str, Path]:
    rng = random.Random(12)
    sets = {"big": DATA / "big", "small": DATA / "small"}
    if not sets["big"].exists():
        tmp = DATA / "big.tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        for i in range(4):
            (tmp / f"f{i}.bin").write_bytes(rng.randbytes(64 << 20))
        tmp.rename(sets["big"])
    if not sets["small"].exists():
        tmp = DATA / "small.tmp"
        for i in range(2000):
            d = tmp / f"d{i % 20:02d}"
            d.mkdir(parents=True, exist_ok=True)
            (d / f"f{i}.bin").write_bytes(rng.randbytes(rng.randint(1 << 10, 16 << 10)))
        tmp.rename(sets["small"])
    return sets


def tree_size(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file() and ".pydistcp" not in p.parts]
    return len(files), sum(p.stat().st_size for p in files)


def run(args: list[str], engine: str, summary: Path) -> tuple[float, dict[str, Any]]:
    env = {**os.environ, "PYDISTCP_ENGINE": engine, "PYTHONPATH": str(HERE.parent)}
    t = time.monotonic()
    proc = subprocess.run([*PYDISTCP, *args, "--no-progress", "--summary-json", str(summary)],
                          env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t
    if proc.returncode:
        raise SystemExit(f"pydistcp failed: {proc.stderr[-2000:]}")
    return wall, json.loads(summary.read_text())


def one_round(src: Path, work: Path, engine: str) -> dict[str, Any]:
    expected = tree_size(src)
    dsts = [work / f"b{n}" for n in range(3)]
    fork_wall, fork = run(["copy", str(src), str(dsts[0]), "--fork", str(dsts[1]),
                           "--fork", str(dsts[2])], engine, work / "fork.json")
    assert all(tree_size(d) == expected for d in dsts), "fork copy incomplete"
    for d in dsts:
        shutil.rmtree(d)
    subprocess.run(["sync"], check=False)
    separate, copy_s = 0.0, 0.0
    for d in dsts:
        wall, one = run(["copy", str(src), str(d)], engine, work / "one.json")
        assert tree_size(d) == expected, "copy incomplete"
        separate += wall
        copy_s += one["phases"].get("copy_s", 0.0)
    for d in dsts:
        shutil.rmtree(d)
    subprocess.run(["sync"], check=False)
    return {"fork_s": fork_wall, "separate_s": separate,
            "fork_copy_s": fork["phases"].get("copy_s", 0.0), "separate_copy_s": copy_s,
            "bytes_read": fork["bytes_read"],
            "queues": {k: v["queue"] for k, v in fork["branches"].items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engine", choices=["cold", "warm"], default="cold")
    opts = parser.parse_args()
    sets = make_data()
    work = DATA / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if opts.engine == "warm":
        subprocess.run([*PYDISTCP, "engine", "start"], check=True)
    rows = []
    for name, src in sets.items():
        rounds = [one_round(src, work, opts.engine) for _ in range(opts.rounds)]
        med = {k: statistics.median(r[k] for r in rounds)
               for k in ("fork_s", "separate_s", "fork_copy_s", "separate_copy_s")}
        row = {"data": name, "files_bytes": tree_size(src), **{k: round(v, 2)
                                                               for k, v in med.items()},
               "ratio": round(med["fork_s"] / med["separate_s"], 2),
               "copy_ratio": round(med["fork_copy_s"] / med["separate_copy_s"], 2)
               if med["separate_copy_s"] else None,
               "queues": rounds[-1]["queues"], "rounds": len(rounds)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    shutil.rmtree(work, ignore_errors=True)
    write(rows, opts.engine)


def write(rows: list[dict[str, Any]], engine: str) -> None:
    machine = (f"{platform.platform()}, {os.cpu_count()} cores, Python "
               f"{platform.python_version()}, engine {engine}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "fork.json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))
    lines = [f"Machine: {machine}", "",
             ("| data | fork, 3 branches (s) | 3 separate runs (s) | ratio (target <= 0.6) "
              "| copy phase: fork / separate (s) | slowest queue fill |"),
             "|---|---|---|---|---|---|"]
    for r in rows:
        fill = max(q["fill_ratio"] for q in r["queues"].values())
        lines.append(f"| {r['data']} ({r['files_bytes'][0]} files, "
                     f"{r['files_bytes'][1] / 2**20:.0f} MiB) | {r['fork_s']} | "
                     f"{r['separate_s']} | {r['ratio']} | {r['fork_copy_s']} / "
                     f"{r['separate_copy_s']} | {fill:.0%} |")
    (RESULTS / "fork.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
