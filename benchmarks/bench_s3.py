#!/usr/bin/env python
"""S3 benchmarks against a local S3 server: upload throughput, skew, resume.

    python benchmarks/bench_s3.py [--rounds N] [--server rclone|moto] [--only up,skew,resume]
                                  [--workdir DIR]

(a) ``up``: local -> S3 upload of the same data by ``pydistcp copy``, ``rclone copy``
    (``--transfers 4``) and ``aws s3 cp --recursive``, against one local server
    (``rclone serve s3`` by default: BASELINE.md found moto caps small objects at about
    300/s whatever the client). Data: 1 GiB in 4 files, and 2,000 files of 1-64 KiB.
    Reported as medians and as ratios to the fastest peer.
(b) ``skew``: one 2 GiB file plus 1,000 small files, local -> local on ``local[2]``,
    with and without ``--split-size 256M``. The ideal is total bytes / the best
    single-stream throughput (pydistcp's own copy phase on the 2 GiB file alone) / 2 cores;
    the copy phase (summary ``copy_s``) is compared with it, and the whole wall time
    (which includes Spark's start) is reported next to it.
(c) ``resume``: a 1 GiB file split into 8 ranges to S3; a task is killed after its
    second range (``DISTCP_CRASH_AT=after_range:2``), then the run is repeated: bytes
    sent again, bytes saved, and both wall times.

The secret used is a fake one, passed through the environment (never argv).
Writes benchmarks/results/s3.json and s3.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
MIB = 1 << 20
KEY, SECRET = "AKIABENCH0000000001", "bench-secret-not-real"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(kind: str, root: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    if kind == "rclone":
        exe = shutil.which("rclone", path=os.path.dirname(sys.executable)) or "rclone"
        env = {**os.environ, "RCLONE_AUTH_KEY": f'"{KEY},{SECRET}"'}
        cmd = [exe, "serve", "s3", "--addr", f"127.0.0.1:{port}", str(root / "s3")]
    else:
        env = dict(os.environ)
        cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"http://127.0.0.1:{port}"
        time.sleep(0.1)
    raise RuntimeError(f"{kind} server did not start")


def client(endpoint: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=KEY, aws_secret_access_key=SECRET)


def aws_env(endpoint: str) -> dict[str, str]:
    return {**os.environ, "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true", "PYDISTCP_LOG_DIR": "/tmp/pydistcp-bench-logs",
            "RCLONE_CONFIG_S3_TYPE": "s3", "RCLONE_CONFIG_S3_PROVIDER": "Other",
            "RCLONE_CONFIG_S3_ACCESS_KEY_ID": KEY, "RCLONE_CONFIG_S3_SECRET_ACCESS_KEY": SECRET,
            "RCLONE_CONFIG_S3_ENDPOINT": endpoint}


def make_data(work: Path) -> dict[str, Path]:
    rng = random.Random(7)
    sets = {"big": work / "big", "small": work / "small", "skew": work / "skew",
            "one": work / "one"}
    if not (work / ".done").exists():
        shutil.rmtree(work, ignore_errors=True)
        for i in range(4):
            write_random(sets["big"] / f"f{i}.bin", 256 * MIB)
        for i in range(2000):
            p = sets["small"] / f"d{i % 20}" / f"s{i}.bin"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(rng.randbytes(rng.randint(1024, 64 * 1024)))
        write_random(sets["one"] / "huge.bin", 2048 * MIB)
        (sets["skew"]).mkdir(parents=True)
        os.link(sets["one"] / "huge.bin", sets["skew"] / "huge.bin")
        for i in range(1000):
            (sets["skew"] / f"s{i}.bin").write_bytes(rng.randbytes(rng.randint(1024, 64 * 1024)))
        write_random(work / "resume" / "g.bin", 1024 * MIB)
        (work / ".done").write_text("ok")
    sets["resume"] = work / "resume"
    return sets


def write_random(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for _ in range(size // (8 * MIB)):
            f.write(os.urandom(8 * MIB))


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return time.monotonic() - t, r


def upload(tool: str, src: Path, endpoint: str, prefix: str,
           summary: Path) -> tuple[float, dict[str, Any]]:
    env = aws_env(endpoint)
    if tool == "pydistcp":
        cmd = [sys.executable, "-m", "distcp", "copy", str(src), f"s3://bench/{prefix}",
               "--no-progress", "--master", "local[2]", "--summary-json", str(summary)]
    elif tool == "rclone":
        exe = shutil.which("rclone", path=os.path.dirname(sys.executable)) or "rclone"
        cmd = [exe, "copy", str(src), f"s3:bench/{prefix}", "--transfers", "4"]
    else:
        cmd = ["aws", "s3", "cp", "--recursive", "--only-show-errors", str(src),
               f"s3://bench/{prefix}"]
    seconds, r = timed(cmd, env)
    if r.returncode != 0:
        raise RuntimeError(f"{tool} failed: {r.stderr[-2000:]}")
    extra = json.loads(summary.read_text()) if tool == "pydistcp" else {}
    return seconds, extra


def empty_bucket(endpoint: str) -> None:
    c = client(endpoint)
    pages = c.get_paginator("list_objects_v2").paginate(Bucket="bench")
    for page in pages:
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        for i in range(0, len(keys), 1000):
            c.delete_objects(Bucket="bench", Delete={"Objects": keys[i:i + 1000]})


def bench_upload(sets: dict[str, Path], endpoint: str, rounds: int, tmp: Path) -> dict:
    out: dict[str, Any] = {}
    for name in ("big", "small"):
        times: dict[str, list[float]] = {"pydistcp": [], "rclone": [], "aws": []}
        tools = list(times)
        for rnd in range(rounds):
            for tool in tools[rnd % 3:] + tools[:rnd % 3]:
                empty_bucket(endpoint)
                seconds, _ = upload(tool, sets[name], endpoint, f"{name}-{tool}",
                                    tmp / "s.json")
                times[tool].append(seconds)
                print(f"  {name} {tool} round {rnd}: {seconds:.2f}s", flush=True)
        med = {t: statistics.median(v) for t, v in times.items()}
        best = min(med["rclone"], med["aws"])
        out[name] = {"median_s": med, "runs_s": times,
                     "ratio_to_best_peer": {t: round(v / best, 2) for t, v in med.items()}}
    return out


def pydistcp_local(src: Path, dst: Path, split: str | None, tmp: Path) -> tuple[float, dict]:
    shutil.rmtree(dst, ignore_errors=True)
    cmd = [sys.executable, "-m", "distcp", "copy", str(src), str(dst), "--no-progress",
           "--master", "local[2]", "--summary-json", str(tmp / "k.json")]
    if split:
        cmd += ["--split-size", split]
    seconds, r = timed(cmd, aws_env("http://unused"))
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    summary = json.loads((tmp / "k.json").read_text())
    shutil.rmtree(dst, ignore_errors=True)
    subprocess.run(["sync"])
    return seconds, summary


def bench_skew(sets: dict[str, Path], rounds: int, tmp: Path) -> dict:
    dst = tmp / "skew-dst"
    single = [pydistcp_local(sets["one"], dst, None, tmp)[1]["phases"]["copy_s"]
              for _ in range(rounds)]
    best_stream = (2048 * MIB) / min(single)
    total = sum(p.stat().st_size for p in sets["skew"].iterdir())
    ideal = total / best_stream / 2
    out: dict[str, Any] = {"best_single_stream_MBps": round(best_stream / 1e6, 1),
                           "ideal_copy_s": round(ideal, 2)}
    for label, split in (("whole", None), ("split-256M", "256M")):
        runs = [pydistcp_local(sets["skew"], dst, split, tmp) for _ in range(rounds)]
        copy_s = statistics.median(s["phases"]["copy_s"] for _, s in runs)
        out[label] = {"wall_s": round(statistics.median(w for w, _ in runs), 2),
                      "copy_s": round(copy_s, 2), "copy_vs_ideal": round(copy_s / ideal, 2)}
        print(f"  skew {label}: {out[label]}", flush=True)
    return out


def bench_resume(sets: dict[str, Path], endpoint: str, tmp: Path) -> dict:
    empty_bucket(endpoint)
    base = [sys.executable, "-m", "distcp", "copy", str(sets["resume"]), "s3://bench/resume",
            "--no-progress", "--master", "local[2]", "--split-size", "128M",
            "--summary-json", str(tmp / "r.json")]
    env = aws_env(endpoint)
    killed_s, r1 = timed(base, {**env, "DISTCP_CRASH_AT": "after_range:2"})
    rerun_s, r2 = timed(base, env)
    if r2.returncode != 0:
        raise RuntimeError(r2.stderr[-2000:])
    s = json.loads((tmp / "r.json").read_text())
    return {"file_MiB": 1024, "ranges": 8, "killed_run_s": round(killed_s, 2),
            "killed_run_rc": r1.returncode, "rerun_s": round(rerun_s, 2),
            "ranges_resumed": s["ranges_resumed"], "bytes_saved": s["bytes_resumed"],
            "bytes_sent_again": s["bytes_read"]}


def render(res: dict[str, Any]) -> str:
    lines = [f"# S3 benchmarks ({res['date']}, {res['machine']}; server: {res['server']})", "",
             "Medians of the rounds; a busy 2-core machine shared with other test runs, so",
             "absolute numbers move between runs; the ratios are what to compare.", ""]
    if "up" in res:
        lines += ["## (a) local -> S3 upload", "",
                  "| data | pydistcp | rclone copy --transfers 4 | aws s3 cp --recursive | "
                  "pydistcp / best peer |", "|---|---|---|---|---|"]
        for name, label in (("big", "1 GiB in 4 files"), ("small", "2,000 files of 1-64 KiB")):
            m = res["up"][name]["median_s"]
            ratio = res["up"][name]["ratio_to_best_peer"]["pydistcp"]
            lines.append(f"| {label} | {m['pydistcp']:.2f} s | {m['rclone']:.2f} s | "
                         f"{m['aws']:.2f} s | {ratio}x |")
        lines += ["", "pydistcp's time includes starting Spark (a JVM and its Python workers) "
                  "in a fresh process.", ""]
    if "skew" in res:
        k = res["skew"]
        lines += ["## (b) skew: one 2 GiB file + 1,000 small files, local -> local, local[2]", "",
                  f"Best single stream (pydistcp copy phase, the 2 GiB file alone): "
                  f"{k['best_single_stream_MBps']} MB/s; ideal copy phase on 2 cores: "
                  f"{k['ideal_copy_s']} s.", "",
                  "| | wall (with Spark start) | copy phase | copy phase / ideal |",
                  "|---|---|---|---|"]
        for label in ("whole", "split-256M"):
            v = k[label]
            lines.append(f"| {label} | {v['wall_s']} s | {v['copy_s']} s | "
                         f"{v['copy_vs_ideal']}x |")
        lines.append("")
    if "resume" in res:
        r = res["resume"]
        lines += ["## (c) resume: 1 GiB split into 8 ranges to S3, a task killed after its "
                  "second range", "",
                  f"Killed run {r['killed_run_s']} s (exit {r['killed_run_rc']}); re-run "
                  f"{r['rerun_s']} s: {r['ranges_resumed']} ranges resumed, "
                  f"{r['bytes_saved'] / MIB:.0f} MiB saved, "
                  f"{r['bytes_sent_again'] / MIB:.0f} MiB sent again.", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server", choices=["rclone", "moto"], default="rclone")
    ap.add_argument("--only", default="up,skew,resume")
    ap.add_argument("--workdir", default=str(HERE / "data" / "s3"))
    args = ap.parse_args()
    sets = make_data(Path(args.workdir))
    tmp = Path(tempfile.mkdtemp(prefix="bench-s3-"))
    proc, endpoint = start_server(args.server, tmp)
    res: dict[str, Any] = {"date": dt.date.today().isoformat(), "server": args.server,
                           "machine": f"{os.cpu_count()} cores, {platform.python_version()}"}
    try:
        client(endpoint).create_bucket(Bucket="bench")
        only = args.only.split(",")
        if "up" in only:
            res["up"] = bench_upload(sets, endpoint, args.rounds, tmp)
        if "skew" in only:
            res["skew"] = bench_skew(sets, max(1, args.rounds - 1), tmp)
        if "resume" in only:
            res["resume"] = bench_resume(sets, endpoint, tmp)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "s3.json").write_text(json.dumps(res, indent=2))
    (RESULTS / "s3.md").write_text(render(res))
    print(render(res))


if __name__ == "__main__":
    main()
