#!/usr/bin/env python
"""Where a cold run's seconds go: a timeline of each process's marks, beside rclone.

    python benchmarks/timeline.py [--only B|C] [--rounds N] [--workdir DIR] [--cds]
                                  [--copying auto|driver|spark]

Each round runs one cold ``pydistcp copy`` (no warm engine; without the class-data-sharing
archive unless ``--cds``) with ``PYDISTCP_TIMELINE`` set, then ``rclone copy --transfers
4`` of the same data set (the order alternates per round), each into a fresh
destination. The client, the driver JVM's start, PySpark's worker daemons and the Python
workers all append their marks to the run's timeline file (``distcp/timeline.py``); the
table gives, for each mark, the median seconds since the client process was created
and since the mark before it, over the rounds. Data sets are bench_copy.py's (B: 20,000
x 1-64 KiB; C: 5 x 7 bytes), generated once. C is copied in the run's own process by
default (no JVM, no worker: ``distcp.run.here``); ``--copying spark`` shows what a Spark
job's start costs it.

Run it alone: other work on the two cores moves every figure (benchmarks/README.md).
Writes benchmarks/results/timeline.json and prints the table in Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_copy

#: The mark every offset is measured from.
ORIGIN = "client process created"


def parse(text: str) -> dict[str, float]:
    """Each mark's first time in a timeline file, in seconds since ``ORIGIN``."""
    first: dict[str, float] = {}
    for line in text.splitlines():
        at, _pid, name = line.split(" ", 2)
        first.setdefault(name, float(at))
        first[name] = min(first[name], float(at))
    start = first.get(ORIGIN, min(first.values(), default=0.0))
    return {name: round(at - start, 3) for name, at in first.items()}


def cold_run(src: Path, out: Path, cds: bool, copying: str = "auto"
             ) -> tuple[float, dict[str, float]]:
    """One cold copy: its wall time and its marks."""
    dst, timeline = out / "pydistcp", out / "timeline.txt"
    env = {**os.environ, "PYDISTCP_ENGINE": "cold", "PYDISTCP_TIMELINE": str(timeline)}
    if not cds:
        env["PYDISTCP_CDS"] = "0"
    t = time.monotonic()
    run = subprocess.run([*bench_copy.pydistcp_cmd(), "copy", str(src), str(dst),
                          "--no-progress", "--copying", copying], env=env,
                         capture_output=True, text=True, check=False)
    took = time.monotonic() - t
    if run.returncode != 0:
        raise SystemExit(f"pydistcp failed: {run.stderr[-500:]}")
    return took, parse(timeline.read_text())


def rclone_run(src: Path, out: Path) -> float:
    t = time.monotonic()
    subprocess.run(["rclone", "copy", "--transfers", "4", str(src), str(out / "rclone")],
                   check=True, capture_output=True)
    return time.monotonic() - t


def table(runs: list[dict[str, float]]) -> list[tuple[str, float, float]]:
    """(mark, median seconds since the origin, since the mark before), in time order;
    a mark missing from some rounds is the median of those that have it."""
    names = {name for run in runs for name in run}
    medians = {name: statistics.median(r[name] for r in runs if name in r) for name in names}
    order = {name: n for run in runs for n, name in enumerate(run)}  # ties: as written
    rows, before = [], 0.0
    for name, at in sorted(medians.items(), key=lambda item: (item[1], order[item[0]])):
        rows.append((name, at, round(at - before, 3)))
        before = at
    return rows


def markdown(name: str, rows: list[tuple[str, float, float]], pydistcp: list[float],
             rclone: list[float]) -> str:
    ours, theirs = statistics.median(pydistcp), statistics.median(rclone)
    lines = [f"### {bench_copy.DATASETS[name]['label']}, cold", "",
             (f"pydistcp {ours:.2f} s, rclone {theirs:.2f} s (medians of {len(pydistcp)} "
              f"rounds; ratio {ours / theirs:.2f})"), "",
             "| s since the client's creation | + s | mark |", "|---:|---:|---|"]
    lines += [f"| {at:.2f} | {delta:.2f} | {mark} |" for mark, at, delta in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["B", "C"], help="one data set (default: C, then B)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=bench_copy.DEFAULT_WORKDIR)
    ap.add_argument("--cds", action="store_true", help="with the start-up archive")
    ap.add_argument("--copying", choices=["auto", "driver", "spark"], default="auto",
                    help="who runs the copy tasks (pydistcp copy --copying): auto copies "
                         "C in the run's own process, spark shows Spark's start")
    args = ap.parse_args(argv)
    if shutil.which("rclone") is None:
        raise SystemExit("rclone is not installed: see benchmarks/README.md")
    result: dict[str, Any] = {"machine": bench_copy.machine_info(args.workdir),
                              "cds": args.cds, "copying": args.copying, "sets": {}}
    for name in [args.only] if args.only else ["C", "B"]:
        src = bench_copy.ensure_dataset(name, args.workdir)
        bench_copy.warm_cache(src)
        marks, ours, theirs = [], [], []
        for n in range(args.rounds):
            with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
                out = Path(tmp)
                if n % 2:
                    theirs.append(rclone_run(src, out))
                took, got = cold_run(src, out, args.cds, args.copying)
                if not n % 2:
                    theirs.append(rclone_run(src, out))
            ours.append(took)
            marks.append(got)
        rows = table(marks)
        result["sets"][name] = {"pydistcp_s": ours, "rclone_s": theirs, "marks": marks,
                                "table": rows}
        print(markdown(name, rows, ours, theirs), end="\n\n", flush=True)
    bench_copy.RESULTS.mkdir(exist_ok=True)
    (bench_copy.RESULTS / "timeline.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
