"""The warm engine for real: a persistent local Spark Connect server that CLI runs reuse,
started, announced, shared, stopped when idle, and lost mid-run like a worker. Its runs
ask for Spark's copy (``PYDISTCP_COPYING=spark``): plans this small are otherwise copied
by the run's own process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from distcp.spark import daemon
from distcp.spark.session import opens_cheaply
from tests.conftest import cli_env, run_cli, tree
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e


def engines(engine_dir: Path) -> list[dict]:
    out = run_cli("engine", "status", "--json", env={"PYDISTCP_COPYING": "spark", "PYDISTCP_ENGINE_DIR": str(engine_dir)})
    assert out.returncode == 0, out.stderr
    return [e for e in json.loads(out.stdout) if e["running"]]


def make_files(root: Path, count: int, size: int) -> None:
    root.mkdir(parents=True)
    for i in range(count):
        (root / f"f{i:03d}.bin").write_bytes(os.urandom(size))


@pytest.fixture(autouse=True)
def _engines_stopped(tmp_path: Path) -> Iterator[None]:
    """Each test's engines are stopped when it ends, also when it fails (an engine
    left behind would run on, idle, for its 30 minutes)."""
    yield
    run_cli("engine", "stop", "--all", env={"PYDISTCP_COPYING": "spark", "PYDISTCP_ENGINE_DIR": str(tmp_path / "engines")})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/cmdline").read_bytes().find(b"SparkConnectServer") >= 0
    except (OSError, ProcessLookupError):
        return False


def test_start_announce_reuse_concurrent_runs_and_stop(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"PYDISTCP_COPYING": "spark", "PYDISTCP_ENGINE_DIR": str(tmp_path / "engines")}
    src = tmp_path / "src"
    make_files(src, 20, 10_000)
    (src / "sub").mkdir()
    (src / "sub" / "x.txt").write_text("x\n")

    first = run_cli("copy", str(src), str(tmp_path / "d1"), "--engine", "warm", "--no-progress",
                    env=env)
    assert first.returncode == 0, first.stderr
    announce = [line for line in first.stderr.splitlines() if "warm Spark engine" in line]
    assert len(announce) == 1 and "'pydistcp engine stop'" in announce[0]
    assert tree(tmp_path / "d1") == tree(src)
    [running] = engines(tmp_path / "engines")
    assert running["current"] and _alive(running["pid"])
    # --listing auto takes a running engine as a cheap session (for the same settings)
    monkeypatch.setenv("PYDISTCP_ENGINE_DIR", env["PYDISTCP_ENGINE_DIR"])
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    assert opens_cheaply("local[*]", {}, "auto")
    assert not opens_cheaply("local[*]", {"spark.sql.shuffle.partitions": "3"}, "auto")

    # auto (the default) uses it; two runs at once share it; nobody announces again
    procs = [subprocess.Popen([sys.executable, "-m", "distcp", "copy", str(src),
                               str(tmp_path / f"c{i}"), "--no-progress", "--summary-json",
                               str(tmp_path / f"c{i}.json")],
                              env=cli_env({**env, "PYDISTCP_ENGINE": "auto"}),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    for i, proc in enumerate(procs):
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert "warm Spark engine" not in err
        assert tree(tmp_path / f"c{i}") == tree(src)
        log = json.loads((tmp_path / f"c{i}.json").read_text())["log_file"]
        assert "used the warm engine" in Path(log).read_text()
    again = run_cli("copy", str(src), str(tmp_path / "d1"), "--engine", "warm", env=env)
    assert "copied 0 files" in again.stdout

    # other settings are another engine, never this one silently
    other = run_cli("copy", str(src), str(tmp_path / "d2"), "--engine", "auto",
                    "--conf", "spark.sql.shuffle.partitions=3", "--summary-json",
                    str(tmp_path / "d2.json"), env=env)
    assert other.returncode == 0, other.stderr
    log = json.loads((tmp_path / "d2.json").read_text())["log_file"]
    assert "used the warm engine" not in Path(log).read_text()

    stop = run_cli("engine", "stop", env=env)
    assert stop.returncode == 0 and "stopped 1 warm engine" in stop.stdout
    assert engines(tmp_path / "engines") == []
    assert not _alive(running["pid"])
    assert "no warm engine was running" in run_cli("engine", "stop", env=env).stdout


def python_daemons(jvm: int) -> set[int]:
    """The Python worker daemons (``distcp.spark.daemon``) the engine's JVM started."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if parent == jvm and b"distcp.spark.daemon" in cmdline:
            found.add(int(entry.name))
    return found


def test_start_readies_the_python_workers_the_first_run_uses(tmp_path: Path) -> None:
    """``engine start`` runs a job that copies nothing, so the Python worker daemon is up
    before the first run; that run is served by it instead of starting its own."""
    env = {"PYDISTCP_COPYING": "spark", "PYDISTCP_ENGINE_DIR": str(tmp_path / "engines")}
    start = run_cli("engine", "start", env=env)
    assert start.returncode == 0, start.stderr
    assert "starting the engine's Python workers" in start.stderr
    assert "warning" not in start.stderr
    [running] = engines(tmp_path / "engines")
    daemons = python_daemons(running["pid"])
    assert len(daemons) == 1
    src = tmp_path / "src"
    make_files(src, 3, 100)
    run = run_cli("copy", str(src), str(tmp_path / "dst"), "--engine", "warm", env=env)
    assert run.returncode == 0, run.stderr
    assert "using the warm engine (local[*])" in run.stderr  # not a JVM of its own
    assert "starting Spark" not in run.stderr
    assert tree(tmp_path / "dst") == tree(src)
    assert python_daemons(running["pid"]) == daemons
    # new workers (a run a minute after the last gets them) are forked with the copy
    # task's modules loaded, by a daemon that started no thread
    check = subprocess.run([sys.executable, "-c", FORKED_WITH, str(tmp_path / "check.log")],
                           env=cli_env({**env, "PYDISTCP_ENGINE": "warm"}), capture_output=True,
                           text=True, timeout=300, check=False)
    assert check.stdout.strip() == repr([(daemon.PRELOAD, 1)]), check.stderr[-2000:]
    # nothing of the engine listens beyond this machine: its gRPC, driver and block
    # manager ports are on loopback
    assert listening(running["pid"]) and all(
        ip in ("127.0.0.1", "::1") for ip in listening(running["pid"])), \
        listening(running["pid"])
    run_cli("engine", "stop", env=env)


def listening(pid: int) -> list[str]:
    """The addresses the process ``pid`` listens on over TCP (IPv4-mapped ones as IPv4),
    read from /proc: its socket inodes, then the kernel's tables of listening sockets."""
    import ipaddress

    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] != "0A" or cols[9] not in inodes:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(cols[1].split(":")[0])
            # the kernel prints each 32-bit word in host (little-endian) order
            packed = b"".join(raw[i:i + 4][::-1] for i in range(0, width, 4))
            ip = ipaddress.ip_address(packed)
            mapped = getattr(ip, "ipv4_mapped", None)
            found.append(str(mapped or ip))
    return found


#: Run in a client process: what the engine's Python workers were forked with.
FORKED_WITH = """
import os, sys
from distcp.spark.arrow import run_pickled
from distcp.spark.session import spark_session

def forked(attempt):
    def run(items):
        threads = len(os.listdir(f"/proc/{os.getppid()}/task"))
        for _ in items:
            yield iter([(getattr(sys.modules["__main__"], "preloaded", None), threads)])
    return run

with spark_session("local[*]", {}, sys.argv[1], engine="warm") as spark:
    print(sorted(set(run_pickled(spark, [(0, None), (1, None)], forked))))
"""


def test_engine_stops_itself_when_idle(tmp_path: Path) -> None:
    env = {"PYDISTCP_COPYING": "spark", "PYDISTCP_ENGINE_DIR": str(tmp_path / "engines")}
    start = run_cli("engine", "start", "--idle-timeout", "2s", env=env)
    assert start.returncode == 0, start.stderr
    assert "warm engine started" in start.stdout
    [running] = engines(tmp_path / "engines")
    deadline = time.monotonic() + 60
    while _alive(running["pid"]) and time.monotonic() < deadline:
        time.sleep(1)
    assert not _alive(running["pid"])
    assert engines(tmp_path / "engines") == []


def test_server_killed_mid_run_is_a_lost_worker_and_the_rerun_finishes(tmp_path: Path) -> None:
    env = {"PYDISTCP_COPYING": "spark", "PYDISTCP_ENGINE_DIR": str(tmp_path / "engines")}
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_files(src, 200, 1 << 20)
    assert run_cli("engine", "start", env=env).returncode == 0
    [running] = engines(tmp_path / "engines")
    staging = dst / ".pydistcp" / "staging"

    def kill_when_copying() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if staging.exists() and any(p.is_file() for p in staging.rglob("*")):
                os.kill(running["pid"], signal.SIGKILL)
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_when_copying)
    killer.start()
    run = run_cli("copy", str(src), str(dst), "--engine", "warm", "--no-progress", env=env)
    killer.join()
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert not list(dst.glob("*.bin"))  # the file set was not published

    rerun = run_cli("copy", str(src), str(dst), "--engine", "warm", "--no-progress", env=env)
    assert rerun.returncode == 0, rerun.stderr
    assert "warm Spark engine" in rerun.stderr  # a new one
    assert tree(dst) == tree(src)
    run_cli("engine", "stop", env=env)


def test_executor_environment_travels_with_the_job(tmp_path: Path,
                                                  s3: S3Server) -> None:  # noqa: F811
    """A crash point set in the client's environment reaches the warm server's workers
    (and is gone again for the next run on the same workers); so do S3 credentials set
    only in the client's environment, to every kind of task of a tree planned on Spark
    (planning tasks write the copy-rows files to the destination's staging). What only
    the run that started the engine had (a proxy that answers nothing, a passphrase) is
    neither in the server's environment nor seen by a later run's tasks."""
    env = {"PYDISTCP_COPYING": "spark", "PYDISTCP_ENGINE_DIR": str(tmp_path / "engines")}
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_files(src, 6, 1000)
    dead_proxy, secret = "http://127.0.0.1:9", "engine-start-only-passphrase"
    crashed = run_cli("copy", str(src), str(dst), "--engine", "warm", "--no-progress",
                      "--parallelism", "1", env={**env, "DISTCP_CRASH_AT": "after_stage:1",
                                                 "HTTP_PROXY": dead_proxy,
                                                 "HTTPS_PROXY": dead_proxy,
                                                 "PYDISTCP_GPG_PASSPHRASE": secret})
    assert crashed.returncode == 1, crashed.stderr
    server_env = Path(f"/proc/{engines(tmp_path / 'engines')[0]['pid']}/environ").read_bytes()
    assert dead_proxy.encode() not in server_env and secret.encode() not in server_env
    assert not list(dst.glob("*.bin"))
    rerun = run_cli("copy", str(src), str(dst), "--engine", "warm", "--no-progress", env=env)
    assert rerun.returncode == 0, rerun.stderr
    assert tree(dst) == tree(src)
    to_s3 = run_cli("copy", str(src), "s3://dst/env", "--engine", "warm", "--no-progress",
                    "--listing", "spark", env={**env, **s3.env})
    assert to_s3.returncode == 0, to_s3.stderr
    assert {k.removeprefix("env/"): v for k, v in s3.objects("dst", "env/").items()
            if ".pydistcp" not in k} == {p.name: p.read_bytes() for p in src.iterdir()}
    run_cli("engine", "stop", env=env)
