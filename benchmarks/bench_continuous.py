"""Continuous replication (issue 40): how long a file waits between its arrival and its
publication, and the rate that is sustained.

A writer adds small files (1 KiB, written beside and renamed in, as a landing folder is
fed) at 10, 100 and 1,000 files per second for ``--seconds``; meanwhile one of:

- ``pydistcp``: ``pydistcp copy SRC DST --continuous --interval I``, its own session;
- ``pydistcp-warm``: the same on the warm engine (started here first): the query runs
  in the engine;
- ``rclone``: ``rclone copy SRC DST`` in a loop, sleeping ``I`` between runs;
- ``cron``: ``pydistcp copy SRC DST`` every ``--cron`` seconds (60: a crontab's tick),

copies to a local destination that a poller scans every 50 ms: a file's latency is the
time from its rename into the source to the poller first seeing it at the destination
(published files appear whole, by rename, for every tool here). After the writer stops,
each tool gets up to ``--drain`` seconds to catch up; files never seen count as lost.

Run: ``python benchmarks/bench_continuous.py [--rates 10,100,1000] [--seconds 60]
[--interval 1] [--tools pydistcp,pydistcp-warm,rclone,cron]``. Writes
``benchmarks/results/continuous.json``; figures worth keeping go to
``benchmarks/RESULTS.md``, dated. Run it alone: other work on two cores moves every
figure here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PYDISTCP = [sys.executable, "-m", "distcp"]


class Writer(threading.Thread):
    """``rate`` files a second for ``seconds``, 1 KiB each, in 10 folders; the arrival
    time of each (its rename into the source)."""

    def __init__(self, root: Path, rate: float, seconds: float) -> None:
        super().__init__(daemon=True)
        self.root, self.rate, self.seconds = root, rate, seconds
        self.arrived: dict[str, float] = {}

    def run(self) -> None:
        tmp = self.root.parent / "incoming"
        tmp.mkdir(exist_ok=True)
        for d in range(10):
            (self.root / f"d{d}").mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        n = 0
        payload = os.urandom(1024)
        while (elapsed := time.monotonic() - start) < self.seconds:
            due = int(elapsed * self.rate) + 1
            while n < due:
                rel = f"d{n % 10}/f{n:07d}.bin"
                staged = tmp / f"{n}"
                staged.write_bytes(payload)
                os.rename(staged, self.root / rel)
                self.arrived[rel] = time.time()
                n += 1
            time.sleep(min(0.01, 1 / self.rate))


class Poller(threading.Thread):
    """Scans the destination every 50 ms: when each file was first seen there."""

    def __init__(self, root: Path) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.seen: dict[str, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            now = time.time()
            for d in range(10):
                try:
                    names = os.listdir(self.root / f"d{d}")
                except FileNotFoundError:
                    continue
                for name in names:
                    if name.endswith(".bin"):
                        self.seen.setdefault(f"d{d}/{name}", now)
            time.sleep(0.05)


def _tool(name: str, src: Path, dst: Path, interval: float, cron: float, env: dict[str, str]
          ) -> tuple[subprocess.Popen[bytes] | None, threading.Event]:
    """Start the tool; a loop of runs (rclone, cron) is a thread started here."""
    stop = threading.Event()
    if name.startswith("pydistcp-") or name == "pydistcp":
        proc = subprocess.Popen([*PYDISTCP, "copy", str(src), str(dst), "--continuous",
                                 "--interval", str(interval), "--settle", "0",
                                 "--no-progress"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        return proc, stop
    if name == "rclone":
        cmd, every = ["rclone", "copy", "--transfers", "4", str(src), str(dst)], interval
    else:
        cmd, every = [*PYDISTCP, "copy", str(src), str(dst), "--no-progress"], cron

    def loop() -> None:
        while not stop.is_set():
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           check=False)
            stop.wait(every)

    threading.Thread(target=loop, daemon=True).start()
    return None, stop


def measure(tool: str, rate: float, seconds: float, interval: float, cron: float,
            drain: float, work: Path) -> dict[str, Any]:
    src, dst = work / "src", work / "dst"
    shutil.rmtree(work, ignore_errors=True)
    src.mkdir(parents=True)
    env = {**os.environ, "PYDISTCP_ENGINE": "warm" if tool == "pydistcp-warm" else "cold"}
    poller = Poller(dst)
    poller.start()
    proc, stop = _tool(tool, src, dst, interval, cron, env)
    if proc is not None:  # steady state: the query's source has listed once
        first = dst / ".pydistcp" / "continuous" / "waiting.json"
        while not first.exists():
            time.sleep(0.1)
    writer = Writer(src, rate, seconds)
    writer.start()
    writer.join()
    end = time.time() + drain
    while time.time() < end and len(poller.seen) < len(writer.arrived):
        time.sleep(0.2)
    stop.set()
    if proc is not None:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=120)
    poller.stop.set()
    poller.join()
    waits = sorted(poller.seen[k] - t for k, t in writer.arrived.items() if k in poller.seen)
    first = min(writer.arrived.values())
    last_seen = max(poller.seen.values(), default=first)
    return {"tool": tool, "rate": rate, "seconds": seconds, "interval": interval,
            "files": len(writer.arrived), "published": len(waits),
            "lost": len(writer.arrived) - len(waits),
            "p50": round(statistics.median(waits), 3) if waits else None,
            "p95": round(waits[int(0.95 * (len(waits) - 1))], 3) if waits else None,
            "max": round(waits[-1], 3) if waits else None,
            "sustained_per_s": round(len(waits) / max(last_seen - first, 1e-9), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="10,100,1000")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--cron", type=float, default=60.0)
    ap.add_argument("--drain", type=float, default=90.0)
    ap.add_argument("--tools", default="pydistcp,rclone,cron")
    args = ap.parse_args()
    if "pydistcp-warm" in args.tools.split(","):
        subprocess.run([*PYDISTCP, "engine", "start"], check=True,
                       env={**os.environ, "PYDISTCP_ENGINE": "warm"})
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-continuous-") as tmp:
        for rate in (float(r) for r in args.rates.split(",")):
            for tool in args.tools.split(","):
                row = measure(tool, rate, args.seconds, args.interval, args.cron, args.drain,
                              Path(tmp) / tool)
                print(json.dumps(row), flush=True)
                rows.append(row)
    out = HERE / "results" / "continuous.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"when": time.strftime("%Y-%m-%d %H:%M"),
                               "cores": os.cpu_count(), "rows": rows}, indent=2) + "\n")
    print(f"written: {out}")


if __name__ == "__main__":
    main()
