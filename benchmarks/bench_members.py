"""One task expanding an archive of many tiny members: its peak RSS and wall, by size.

    python benchmarks/bench_members.py [--members 200000 1000000]

For each size, builds (once, under benchmarks/data/members/, git-ignored) a .tar.gz of
that many 8-byte members in directories of 1,000, then runs in a fresh child process
what a Spark task runs for it with ``--convert untar``: ``distcp.spark.arrow.map_pickled``
over ``distcp.copying.task.unit_runner``, fed a real Arrow batch, every result batch
read back as the JVM would (``tests/fixtures/members.py``). It reports the child's
peak RSS (``ru_maxrss``: the Python worker's, pyarrow and pydistcp imported) and the
task's wall time (staging every member as a local file, journaling and sending every
result). The target (issue 11): an archive of 1,000,000 members within 256 MiB.

Writes benchmarks/results/members.md (and .json); the .md is the run's table, not kept in
git: results worth keeping go to benchmarks/RESULTS.md, dated.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from tests.fixtures.members import make_tgz, task_peak

DATA = HERE / "data" / "members"
RESULTS = HERE / "results"


def measure(members: int) -> dict[str, object]:
    DATA.mkdir(parents=True, exist_ok=True)
    archive = DATA / f"m{members}.tar.gz"
    if not archive.exists():
        t = time.monotonic()
        make_tgz(archive.with_suffix(".tmp"), members).rename(archive)
        print(f"built {archive.name} in {time.monotonic() - t:.0f} s", flush=True)
    work = DATA / f"work-{members}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        out = task_peak(archive, work, timeout=7200)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert out["results"] == members + 1 and not out["failed"], out
    row = {"members": members, "archive_bytes": archive.stat().st_size, **out}
    print(json.dumps(row), flush=True)
    return row


def write(rows: list[dict[str, object]]) -> None:
    machine = f"{platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "members.json").write_text(json.dumps({"machine": machine, "rows": rows},
                                                     indent=1) + "\n")
    lines = ["# One task expanding an archive of tiny members (bench_members.py)", "",
             (f"Machine: {machine}. Each member 8 bytes, 1,000 per directory, staged as a "
              "local file; results journaled and sent in Arrow batches."), "",
             "| members | .tar.gz | task wall | peak RSS of the task process |",
             "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['members']:,} | {int(r['archive_bytes']) / 2**20:.1f} MiB "  # type: ignore[call-overload]
                     f"| {r['seconds']} s | {r['peak_rss_mib']} MiB |")
    (RESULTS / "members.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, nargs="+", default=[10_000, 200_000, 1_000_000])
    args = parser.parse_args()
    write([measure(n) for n in args.members])


if __name__ == "__main__":
    main()
