#!/usr/bin/env python
"""A Delta table replicated by pydistcp against ``rclone copy`` of its folder, and what a
reader of the destination sees meanwhile (issue 41, point 5).

    python benchmarks/bench_tables.py [--rounds N] [--engine cold|warm]

Data (written once with ``deltalake`` under benchmarks/data/tables/, git-ignored): a table
of 1,000 small Parquet files (10 appends of 100 partitions: versions 0-9), then a copy of
it with 10 new commits (9 appends of 10 files, then a delete of half the rows of 5 files,
which rewrites them: versions 10-19). Sized for a 2-core machine.

Every round runs, in a rotating order (the machine is shared: interleaving spreads its
noise over the three alike), each into a fresh destination:

- ``incremental``: ``pydistcp copy --finder delta`` of the newer table onto a
  destination that already holds versions 0-9 (only the 10 new versions are copied);
- ``full``: the same onto an empty destination (all 20 versions);
- ``rclone``: ``rclone copy --transfers 4`` of the table's folder, as bench_copy runs it.

During each copy a reader thread opens the destination table over and over, as a user
of it would (``deltalake.DeltaTable(dst)``), and checks that every file of the version it
sees is there: a read is ``ok``, ``no table`` (no commit yet: a reader is told there is
no table, which is true), ``failed`` (the open raised: a log it cannot read) or
``partial`` (a commit whose files are missing: the reader would fail or, worse, read
a wrong answer). Medians of wall times over rounds; the readers' counts summed over
rounds, and the most versions one reader saw whole.

Writes benchmarks/results/tables.json and tables.md (the run's table, not kept in git:
results worth keeping go to benchmarks/RESULTS.md, dated).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "tables"
RESULTS = HERE / "results"
PYDISTCP = [sys.executable, "-m", "distcp"]
KINDS = ("incremental", "full", "rclone")
#: The reader's outcomes, in the order reports print them.
READS = ("ok", "no table", "failed", "partial")


def make_tables() -> tuple[Path, Path]:
    """The table at version 9 (``base``) and the same table at version 19 (``new``)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    base, new = DATA / "base", DATA / "new"
    if new.exists():
        return base, new
    shutil.rmtree(DATA, ignore_errors=True)
    tmp = DATA / "base.tmp"

    def rows(first: int, parts: int, per: int = 20) -> Any:
        ids = list(range(first * per, (first + parts) * per))
        return pa.table({"p": [i // per for i in ids], "id": ids,
                         "name": [f"row-{i:08d}" for i in ids]})

    for v in range(10):  # versions 0-9: 100 partitions, one file each
        write_deltalake(str(tmp), rows(v * 100, 100), partition_by=["p"],
                        mode="append" if v else "error")
    tmp.rename(base)
    shutil.copytree(base, DATA / "new.tmp")
    for v in range(9):  # versions 10-18: 10 files each
        write_deltalake(str(DATA / "new.tmp"), rows(1000 + v * 10, 10), partition_by=["p"],
                        mode="append")
    # version 19: half the rows of 5 files deleted: those files rewritten
    DeltaTable(str(DATA / "new.tmp")).delete("p < 5 AND id % 2 = 0")
    (DATA / "new.tmp").rename(new)
    return base, new


def tree_size(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file() and ".pydistcp" not in p.parts]
    return len(files), sum(p.stat().st_size for p in files)


class Reader(threading.Thread):
    """Opens the table at ``uri`` until stopped and sorts each read (module docstring)."""

    def __init__(self, uri: Path) -> None:
        super().__init__(daemon=True)
        self.uri, self.done = uri, threading.Event()
        self.counts = dict.fromkeys(READS, 0)
        self.versions: set[int] = set()

    def run(self) -> None:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        while not self.done.is_set():
            try:
                dt = DeltaTable(str(self.uri))
                files = dt.file_uris()
            except TableNotFoundError:
                self.counts["no table"] += 1
                time.sleep(0.005)
                continue
            except Exception:  # noqa: BLE001 - any failure to open is what we count
                self.counts["failed"] += 1
                continue
            whole = all(os.path.exists(f.removeprefix("file://")) for f in files)
            self.counts["ok" if whole else "partial"] += 1
            if whole:
                self.versions.add(dt.version())

    def stop(self) -> dict[str, Any]:
        self.done.set()
        self.join()
        return {**self.counts, "versions_seen": len(self.versions)}


def command(kind: str, src: Path, dst: Path, summary: Path) -> list[str]:
    if kind == "rclone":
        return ["rclone", "copy", "--transfers", "4", str(src), str(dst)]
    return [*PYDISTCP, "copy", str(src), str(dst), "--finder", "delta", "--no-progress",
            "--summary-json", str(summary)]


def run_one(kind: str, base: Path, new: Path, work: Path, engine: str) -> dict[str, Any]:
    """One timed copy of ``kind`` with a reader on its destination, checked after."""
    dst = work / kind
    shutil.rmtree(dst, ignore_errors=True)
    if kind == "incremental":
        shutil.copytree(base, dst)  # what a replication up to version 9 left
    subprocess.run(["sync"], check=False)
    env = {**os.environ, "PYDISTCP_ENGINE": engine, "PYTHONPATH": str(HERE.parent)}
    reader = Reader(dst)
    reader.start()
    t = time.monotonic()
    proc = subprocess.run(command(kind, new, dst, work / "summary.json"), env=env,
                          capture_output=True, text=True, check=False)
    wall = time.monotonic() - t
    reads = reader.stop()
    if proc.returncode:
        raise SystemExit(f"{kind} failed: {proc.stderr[-2000:]}")
    from deltalake import DeltaTable

    assert tree_size(dst) == tree_size(new), f"{kind}: copy incomplete"
    assert DeltaTable(str(dst)).version() == 19, f"{kind}: not at version 19"
    out: dict[str, Any] = {"kind": kind, "wall_s": round(wall, 3), "reads": reads}
    if kind != "rclone":
        summary = json.loads((work / "summary.json").read_text())
        out["files_copied"] = summary["files_copied"]
    shutil.rmtree(dst)
    return out


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for kind in KINDS:
        mine = [r for r in runs if r["kind"] == kind]
        walls = [r["wall_s"] for r in mine]
        rows.append({"kind": kind, "median_s": round(statistics.median(walls), 2),
                     "min_s": min(walls), "max_s": max(walls),
                     "files_copied": mine[0].get("files_copied"),
                     "reads": {**{k: sum(r["reads"][k] for r in mine) for k in READS},
                               "versions_seen": max(r["reads"]["versions_seen"]
                                                    for r in mine)}})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engine", choices=["cold", "warm"], default="cold")
    opts = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from as_installed import write_bytecode

    write_bytecode()
    base, new = make_tables()
    work = DATA / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if opts.engine == "warm":
        subprocess.run([*PYDISTCP, "engine", "start"], check=True)
    runs = []
    for n in range(opts.rounds):
        for i in range(len(KINDS)):
            kind = KINDS[(n + i) % len(KINDS)]
            runs.append(run_one(kind, base, new, work, opts.engine))
            print(json.dumps(runs[-1]), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    write(summarize(runs), runs, opts, tree_size(base), tree_size(new))


def write(rows: list[dict[str, Any]], runs: list[dict[str, Any]], opts: Any,
          base: tuple[int, int], new: tuple[int, int]) -> None:
    rclone = subprocess.run(["rclone", "version"], capture_output=True, text=True,
                            check=False).stdout.split("\n")[0]
    machine = (f"{platform.platform()}, {os.cpu_count()} cores, Python "
               f"{platform.python_version()}, engine {opts.engine}, {rclone}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "tables.json").write_text(json.dumps(
        {"machine": machine, "rounds": opts.rounds, "table": {
            "base": {"versions": 10, "files": base[0], "bytes": base[1]},
            "new": {"versions": 20, "files": new[0], "bytes": new[1]}},
         "rows": rows, "runs": runs}, indent=2) + "\n")
    lines = [f"Machine: {machine}; {opts.rounds} rounds", "",
             (f"Table: {new[0]} files ({new[1] / 2**20:.1f} MiB) at version 19; "
              f"{base[0]} files at version 9"), "",
             ("| copy | median wall (s) | min–max | files copied | reads: ok / no table / "
              "failed / partial | versions a reader saw |"), "|---|---|---|---|---|---|"]
    for r in rows:
        reads = r["reads"]
        lines.append(f"| {r['kind']} | {r['median_s']} | {r['min_s']}–{r['max_s']} | "
                     f"{r['files_copied'] if r['files_copied'] is not None else '—'} | "
                     + " / ".join(str(reads[k]) for k in READS)
                     + f" | {reads['versions_seen']} |")
    (RESULTS / "tables.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
