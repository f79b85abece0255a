#!/usr/bin/env python
"""The S3 client itself: pydistcp's hand-written requests against obstore (issue 39, point 1).

    python benchmarks/bench_clients.py [--rounds N] [--only get,put-small,put-big,list]

pydistcp's S3 path signs and sends its requests by hand (``distcp.storage.s3.lean`` and
``wire``), because botocore's and urllib3's per-request CPU made small objects slow.
``obstore`` (the Rust ``object_store`` crate, which Arrow and DataFusion use) is the
maintained client that could replace it. This compares the two on the work the copy path
does, against one ``rclone serve s3`` on loopback, each measurement in a fresh process,
the clients interleaved round by round, after a round that only warms the server (its first
listing of 100,000 files costs it three times the CPU of the next):

- ``get``: 20,000 objects of 64 B read whole with If-Match of the listed ETag, each
  written to a local file (S3 -> local of small files). 32 in flight (a task's
  SMALL_IN_FLIGHT).
- ``put-small``: 2,000 local files of 1-64 KiB, one PutObject each (per-file
  visibility), 16 in flight.
- ``put-big``: 1 GiB in 4 files, multipart in 8 MiB parts, 4 parts of a file in flight
  (the task's PARTS_IN_FLIGHT), the 4 files at once.
- ``list``: 100,000 keys under one prefix, every key's size, mtime and ETag.

Clients: ``lean`` is pydistcp's own functions (``ops.get_if_match``, ``ops.put``,
``ops.create``/``upload_part``/``complete``, ``listing.find_keys``), exactly what a task
calls; ``obstore`` is obstore's synchronous calls from the same number of threads;
``obstore-async`` is its async calls, as many in flight on one event loop. Each run
reports wall seconds, the client's CPU seconds and the server's CPU seconds (on two
cores the server's share is what the client leaves it). Writes
benchmarks/results/clients.json (not kept: worth keeping goes to RESULTS.md, dated).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from bench_s3 import KEY, SECRET, start_server  # noqa: E402

CASES = ("get", "put-small", "put-big", "list")
CLIENTS = ("lean", "obstore", "obstore-async")
IN_FLIGHT = {"get": 32, "put-small": 16, "put-big": 4, "list": 1}
PART = 8 << 20
GETS, SMALL, LISTED = 20_000, 2_000, 100_000


def make_data(root: Path, work: Path) -> None:
    """The served bucket's objects (files under rclone's root) and the upload sources."""
    rng = random.Random(7)
    done = work / ".done"
    if done.exists():
        return
    for i in range(GETS):
        p = root / "s3" / "bench" / "get" / f"d{i % 50}" / f"o{i}"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(i.to_bytes(8, "big") * 8)
    for i in range(LISTED):
        p = root / "s3" / "bench" / "list" / f"d{i % 100}" / f"k{i}"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
    for i in range(SMALL):
        p = work / "small" / f"s{i}.bin"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(rng.randbytes(rng.randint(1024, 64 * 1024)))
    for i in range(4):
        p = work / "big" / f"f{i}.bin"
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "wb") as f:
            for _ in range(32):
                f.write(os.urandom(8 << 20))
    done.write_text("ok")


# --- the child: one client, one case, in a fresh process ------------------------------------

def s3fs_fs(endpoint: str) -> Any:
    from distcp.storage import filesystems as fsutil

    options = {"key": KEY, "secret": SECRET, "client_kwargs": {"endpoint_url": endpoint,
                                                                "region_name": "us-east-1"}}
    return fsutil.filesystem("s3://bench", options)[0]


def obstore_store(endpoint: str) -> Any:
    from obstore.store import S3Store

    return S3Store("bench", endpoint=endpoint, access_key_id=KEY, secret_access_key=SECRET,
                   region="us-east-1", virtual_hosted_style_request=False,
                   client_options={"allow_http": True, "pool_max_idle_per_host": "64"})


def listed_etags(endpoint: str) -> list[tuple[str, str]]:
    from obstore import list as olist

    store = obstore_store(endpoint)
    return [(o["path"], o["e_tag"] or "") for batch in olist(store, "get", chunk_size=1000)
            for o in batch]


def child(case: str, client: str, endpoint: str, work: Path, out: Path) -> dict[str, Any]:
    """Run ``case`` with ``client``; its wall and CPU seconds (setup untimed)."""
    n = IN_FLIGHT[case]
    keys = listed_etags(endpoint) if case == "get" else []
    small = sorted((work / "small").iterdir()) if case == "put-small" else []
    big = sorted((work / "big").iterdir()) if case == "put-big" else []
    fs = s3fs_fs(endpoint) if client == "lean" else None
    store = obstore_store(endpoint) if client != "lean" else None
    if fs is not None and case != "list":
        from distcp.storage.s3 import ops
        ops.head(fs, "s3://bench/get/d0/o0")  # the session and its credentials: untimed
    out.mkdir(parents=True, exist_ok=True)
    prefix = f"up-{client}-{os.getpid()}"
    work_fn = {"get": _get, "put-small": _put_small, "put-big": _put_big, "list": _list}[case]
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.monotonic()
    count = work_fn(client, fs, store, n, keys=keys, small=small, big=big, out=out,
                    prefix=prefix)
    wall = time.monotonic() - t
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {"wall_s": wall, "client_cpu_s": cpu, "count": count}


def _threads(n: int, fn: Any, items: list[Any]) -> int:
    with ThreadPoolExecutor(n) as pool:
        return sum(1 for _ in pool.map(fn, items))


def _async(n: int, coroutine: Any, items: list[Any]) -> int:
    async def run() -> int:
        gate = asyncio.Semaphore(n)

        async def one(item: Any) -> None:
            async with gate:
                await coroutine(item)
        await asyncio.gather(*(one(i) for i in items))
        return len(items)
    return asyncio.run(run())


def _write(out: Path, key: str, data: bytes) -> None:
    with open(out / key.replace("/", "_"), "wb") as f:
        f.write(data)


def _get(client: str, fs: Any, store: Any, n: int, *, keys: list[tuple[str, str]], out: Path,
         **_: Any) -> int:
    if client == "lean":
        from distcp.storage.s3 import ops
        return _threads(n, lambda ke: _write(out, ke[0], ops.get_if_match(
            fs, f"s3://bench/{ke[0]}", ke[1])), keys)
    import obstore
    if client == "obstore":
        return _threads(n, lambda ke: _write(out, ke[0], obstore.get(
            store, ke[0], options={"if_match": ke[1]}).bytes().to_bytes()), keys)

    async def one(ke: tuple[str, str]) -> None:
        got = await obstore.get_async(store, ke[0], options={"if_match": ke[1]})
        _write(out, ke[0], (await got.bytes_async()).to_bytes())
    return _async(n, one, keys)


def _put_small(client: str, fs: Any, store: Any, n: int, *, small: list[Path], prefix: str,
               **_: Any) -> int:
    if client == "lean":
        from distcp.storage.s3 import uploads
        return _threads(n, lambda p: uploads.put_whole(
            fs, f"s3://bench/{prefix}/{p.name}", p.read_bytes()), small)
    import obstore
    if client == "obstore":
        return _threads(n, lambda p: obstore.put(store, f"{prefix}/{p.name}", p.read_bytes(),
                                                 use_multipart=False), small)

    async def one(p: Path) -> None:
        await obstore.put_async(store, f"{prefix}/{p.name}", p.read_bytes(),
                                use_multipart=False)
    return _async(n, one, small)


def _put_big(client: str, fs: Any, store: Any, n: int, *, big: list[Path], prefix: str,
             **_: Any) -> int:
    if client == "lean":
        from distcp.storage.s3 import ops

        def one(p: Path) -> None:
            url = f"s3://bench/{prefix}/{p.name}"
            upload = ops.create(fs, url)
            with open(p, "rb") as f, ThreadPoolExecutor(4) as parts:
                sent = list(parts.map(lambda i: (i + 1, ops.upload_part(
                    fs, url, upload, i + 1, _read_at(f, i * PART)), PART),
                    range(p.stat().st_size // PART)))
            ops.complete(fs, url, upload, sent)
        return _threads(len(big), one, big)
    import obstore
    if client == "obstore":
        return _threads(len(big), lambda p: obstore.put(
            store, f"{prefix}/{p.name}", p, chunk_size=PART, max_concurrency=4), big)

    async def one_async(p: Path) -> None:
        await obstore.put_async(store, f"{prefix}/{p.name}", p, chunk_size=PART,
                                max_concurrency=4)
    return _async(len(big), one_async, big)


def _read_at(f: Any, at: int) -> bytes:
    return os.pread(f.fileno(), PART, at)


def _list(client: str, fs: Any, store: Any, n: int, **_: Any) -> int:
    if client == "lean":
        from distcp.storage.s3 import listing
        found = listing.find_keys(fs, "s3://bench/list")
        return len(found or {})
    import obstore
    if client == "obstore":
        return sum(len(b) for b in obstore.list(store, "list", chunk_size=1000))

    async def run() -> int:
        total = 0
        async for batch in obstore.list(store, "list", chunk_size=1000):
            total += len(batch)
        return total
    return asyncio.run(run())


# --- the parent: server, rounds, table ------------------------------------------------------

def server_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--workdir", type=Path,
                    default=Path(tempfile.gettempdir()) / "pydistcp-bench-clients")
    ap.add_argument("--child", nargs=4, metavar=("CASE", "CLIENT", "ENDPOINT", "OUT"))
    args = ap.parse_args()
    if args.child:
        case, client, endpoint, out = args.child
        print(json.dumps(child(case, client, endpoint, args.workdir, Path(out))))
        return
    cases = [c for c in args.only.split(",") if c]
    clients = [c for c in args.clients.split(",") if c]
    work, root = args.workdir, args.workdir / "served"
    make_data(root, work)
    server, endpoint = start_server("rclone", root)
    env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "PYTHONPATH": str(HERE.parent)}
    runs: dict[str, dict[str, list[dict[str, float]]]] = {c: {k: [] for k in clients}
                                                          for c in cases}
    try:
        for rnd in range(-1, args.rounds):  # round -1 warms the server's caches: not kept
            for case in cases:
                turn = clients[rnd % len(clients):] + clients[:rnd % len(clients)]
                for client in turn:
                    out = work / "out" / f"{case}-{client}-{rnd}"
                    os.sync()
                    before = server_cpu(server.pid)
                    r = subprocess.run([sys.executable, __file__, "--workdir", str(work),
                                        "--child", case, client, endpoint, str(out)],
                                       env=env, capture_output=True, text=True)
                    if r.returncode != 0:
                        raise RuntimeError(f"{case} {client}: {r.stderr[-3000:]}")
                    got = json.loads(r.stdout.strip().splitlines()[-1])
                    got["server_cpu_s"] = server_cpu(server.pid) - before
                    if rnd >= 0:
                        runs[case][client].append(got)
                    shutil.rmtree(out, ignore_errors=True)
                    for up in (root / "s3" / "bench").glob("up-*"):
                        shutil.rmtree(up, ignore_errors=True)
                    print(f"  {case} {client} round {rnd}: {got['wall_s']:.2f} s wall, "
                          f"{got['client_cpu_s']:.2f} s client CPU, "
                          f"{got['server_cpu_s']:.2f} s server CPU ({got['count']})",
                          flush=True)
    finally:
        server.terminate()
        server.wait()
    result = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus",
              "cases": {}}
    for case, by in runs.items():
        med = {c: {k: round(statistics.median(r[k] for r in v), 3)
                   for k in ("wall_s", "client_cpu_s", "server_cpu_s")} for c, v in by.items()}
        result["cases"][case] = {"median": med, "runs": by,
                                 "wall_ratio_to_lean": {c: round(m["wall_s"] / med["lean"]["wall_s"], 2)
                                                        for c, m in med.items()}
                                 if "lean" in med else {}}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "clients.json").write_text(json.dumps(result, indent=1))
    print("case       client          wall s   client CPU s   server CPU s   wall/lean")
    for case, section in result["cases"].items():
        for client, m in section["median"].items():
            ratio = section["wall_ratio_to_lean"].get(client, "")
            print(f"{case:10} {client:15} {m['wall_s']:7.2f} {m['client_cpu_s']:13.2f} "
                  f"{m['server_cpu_s']:14.2f}   {ratio}")


if __name__ == "__main__":
    main()
