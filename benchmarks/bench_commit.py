"""Commit-side benchmarks (issue 3): publish cost and incremental reruns.

1. Publish one file set of N small staged files through pydistcp's commit
   sequence against a plain serial loop of the same operations: on a local disk
   PublishFiles (renames) against serial ``os.rename``; on a local S3 server (moto,
   started here) the zero-copy publish, CompleteUploads (a bounded pool of
   CompleteMultipartUpload requests, each then checked by HEAD) against serial
   completes of the same staged uploads. Column ``tasks``: the same sequence with its
   step carried out by publishing tasks (``--publishing spark``) on a ``local[2]``
   session started before (its start not counted).
2. Rerun of a copy of a 50,000-file tree in which 100 files changed:
   ``--incremental`` (plans against the state's manifest, lists no destination)
   against the default full diff (lists the destination), inside one Spark session.

Run: ``python benchmarks/bench_commit.py [--files 20000] [--s3-files 5000] [--rounds 3]``.
Writes ``benchmarks/results/commit.json`` and ``commit.md`` (the run's table, not kept in
git: results worth keeping go to ``benchmarks/RESULTS.md``, dated).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _stage_local(root: Path, n: int) -> list[tuple[str, str, int]]:
    staging, final = root / "staging", root / "final"
    staging.mkdir(parents=True)
    (final / "d").mkdir(parents=True)
    moves = []
    for i in range(n):
        p = staging / f"{i}"
        p.write_bytes(b"x" * 100)
        moves.append((str(p), str(final / "d" / f"f{i}"), 100))
    return moves


def _publish_with_sequence(step: Any, state: str, options: dict[str, Any],
                           spark: Any = None) -> float:
    """Seconds to publish through one commit sequence holding ``step``: persist, run,
    remove; with ``spark``, the step carried out by publishing tasks."""
    from distcp.commit.log import CommitStepStore
    from distcp.commit.steps import CommitContext, CommitSequence
    from distcp.spark.publish import run_on_spark

    def on_tasks(st: Any, c: Any) -> bool:
        run_on_spark(spark, st, c)
        return True

    ctx = CommitContext(dst_options=options, state_root=state,
                        fan_out=on_tasks if spark is not None else None)
    store = CommitStepStore(state, options)
    seq = CommitSequence("urn:bench", "all", (step,), "bench-seq")
    t = time.perf_counter()
    store.persist(seq, "bench")
    seq.run(ctx)
    store.remove(seq.id)
    return time.perf_counter() - t


def bench_local_publish(n: int, rounds: int, spark: Any) -> dict[str, float]:
    from distcp.commit.steps import PublishFiles

    ours: list[float] = []
    loop: list[float] = []
    tasks: list[float] = []
    for _ in range(rounds):
        for kind in ("ours", "loop", "tasks"):
            root = Path(tempfile.mkdtemp(prefix="pub-"))
            moves = _stage_local(root, n)
            if kind != "loop":
                (ours if kind == "ours" else tasks).append(_publish_with_sequence(
                    PublishFiles(tuple(moves)), str(root / "state"), {},
                    spark if kind == "tasks" else None))
            else:
                t = time.perf_counter()
                for s, d, _ in moves:
                    os.rename(s, d)
                loop.append(time.perf_counter() - t)
            shutil.rmtree(root)
    return {"files": n, "ours_s": statistics.median(ours), "serial_loop_s": statistics.median(loop),
            "tasks_s": statistics.median(tasks)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_s3_publish(n: int, rounds: int, spark: Any) -> dict[str, float]:
    """Zero-copy publish: complete N staged one-part uploads, ours against a serial loop."""
    from concurrent.futures import ThreadPoolExecutor

    import boto3
    import s3fs

    from distcp.commit.upload_steps import CompleteUploads  # imported before timing
    from distcp.storage import Staged, parse_staged
    from distcp.storage.s3 import ops as s3

    server, endpoint = _moto_server()
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                      AWS_DEFAULT_REGION="us-east-1")
    options = {"endpoint_url": endpoint, "key": "bench", "secret": "bench"}
    client = boto3.client("s3", endpoint_url=endpoint)
    fs = s3fs.S3FileSystem(**options)
    ours: list[float] = []
    loop: list[float] = []
    tasks: list[float] = []
    try:
        for r in range(rounds):
            for kind in ("ours", "loop", "tasks"):
                bucket = f"bench-{kind}-{r}"
                client.create_bucket(Bucket=bucket)

                def stage(i: int, bucket: str = bucket) -> Any:
                    url = f"s3://{bucket}/final/f{i}"
                    upload_id = s3.create(fs, url)
                    etag = s3.upload_part(fs, url, upload_id, 1, b"x" * 100)
                    return (Staged.upload(upload_id, url).text, url, 100, ((1, etag, 100),))

                with ThreadPoolExecutor(16) as pool:
                    uploads = list(pool.map(stage, range(n)))
                fs.invalidate_cache()
                if kind != "loop":
                    (ours if kind == "ours" else tasks).append(_publish_with_sequence(
                        CompleteUploads(tuple(uploads)), f"s3://{bucket}/state", options,
                        spark if kind == "tasks" else None))
                else:
                    t = time.perf_counter()
                    for staging, url, _, parts in uploads:
                        s3.complete(fs, url, parse_staged(staging).upload_id, parts)
                    loop.append(time.perf_counter() - t)
    finally:
        server.terminate()
        server.wait()
    return {"files": n, "ours_s": statistics.median(ours), "serial_loop_s": statistics.median(loop),
            "tasks_s": statistics.median(tasks)}


def _moto_server() -> tuple[subprocess.Popen[bytes], str]:
    """moto in its own process, as a real server is (in-process it would share our GIL)."""
    import urllib.request

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(endpoint, timeout=1)
            return proc, endpoint
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("moto server did not start")


def bench_incremental(files: int, changed: int, rounds: int) -> dict[str, float]:
    import distcp

    root = Path(tempfile.mkdtemp(prefix="incr-"))
    src, dst = root / "src", root / "dst"
    per_dir = 500
    for d in range(files // per_dir):
        (src / f"d{d:04d}").mkdir(parents=True)
        for i in range(per_dir):
            (src / f"d{d:04d}" / str(i)).write_bytes(b"x" * (i % 64))
    timings: dict[str, list[float]] = {"incremental": [], "full_diff": []}
    run = 0
    # the session main() started: distcp.copy uses the active one
    assert distcp.copy(str(src), str(dst)).ok
    for _ in range(rounds):
        for kind in ("incremental", "full_diff"):
            run += 1  # each timed run changes `changed` files nobody changed before
            for d in range(changed):
                (src / f"d{d:04d}" / str(run)).write_bytes(os.urandom(100))
            t = time.perf_counter()
            s = distcp.copy(str(src), str(dst), incremental=(kind == "incremental"))
            timings[kind].append(time.perf_counter() - t)
            assert s.ok and s.files_copied == changed, (kind, s.files_copied)
    shutil.rmtree(root)
    return {"files": files, "changed": changed,
            **{f"{k}_s": statistics.median(v) for k, v in timings.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--s3-files", type=int, default=5_000)
    ap.add_argument("--tree", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=("publish", "incremental"),
                    help="one part only (default: both)")
    args = ap.parse_args()
    from distcp.spark.session import spark_session

    log = Path(tempfile.mkdtemp(prefix="bench-commit-")) / "spark.log"
    with spark_session("local[2]", {}, str(log)) as spark:
        run_all(args, spark)


def run_all(args: argparse.Namespace, spark: Any) -> None:
    results: dict[str, Any] = {"machine": f"{os.cpu_count()} cores, Python {sys.version.split()[0]}",
                               "date": time.strftime("%Y-%m-%d")}
    steps: list[tuple[str, Callable[[], dict[str, float]]]] = [
        ("publish_local", lambda: bench_local_publish(args.files, args.rounds, spark)),
        ("publish_s3_moto", lambda: bench_s3_publish(args.s3_files, args.rounds, spark)),
        ("incremental_rerun", lambda: bench_incremental(args.tree, 100, args.rounds)),
    ]
    if args.only:
        steps = [(n, f) for n, f in steps if n.startswith(args.only) or
                 (args.only == "incremental" and n == "incremental_rerun")]
    for name, fn in steps:
        try:
            results[name] = fn()
        except Exception as exc:  # noqa: BLE001 - report, keep going
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
        print(name, json.dumps(results[name]), flush=True)
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    if args.only and (out / "commit.json").exists():  # keep the parts not run again
        results = {**json.loads((out / "commit.json").read_text()), **results}
    (out / "commit.json").write_text(json.dumps(results, indent=2))
    (out / "commit.md").write_text(render(results))
    print(render(results))


def render(r: dict[str, Any]) -> str:
    rows = ["| benchmark | pydistcp (driver) | publishing tasks | baseline | "
            "ratio (baseline / driver) |", "|---|---|---|---|---|"]
    for name, base in (("publish_local", "serial_loop_s"), ("publish_s3_moto", "serial_loop_s")):
        v = r.get(name, {})
        if "ours_s" in v:
            tasks = f"{v['tasks_s']:.2f} s" if "tasks_s" in v else "-"
            rows.append(f"| publish {v['files']} files, {name.split('_', 1)[1]} | "
                        f"{v['ours_s']:.2f} s | {tasks} | serial loop {v[base]:.2f} s | "
                        f"{v[base] / v['ours_s']:.2f}x |")
    v = r.get("incremental_rerun", {})
    if "incremental_s" in v:
        rows.append(f"| rerun, {v['files']} files, {v['changed']} changed | --incremental "
                    f"{v['incremental_s']:.2f} s | - | full diff {v['full_diff_s']:.2f} s | "
                    f"{v['full_diff_s'] / v['incremental_s']:.2f}x |")
    return f"{r['machine']}, {r['date']}\n\n" + "\n".join(rows) + "\n"


if __name__ == "__main__":
    main()
