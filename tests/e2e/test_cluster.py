"""The real ``pydistcp`` CLI against real Spark daemons: a standalone master +
worker, and a Spark Connect server (fixtures in tests/fixtures/spark_cluster.py).

Needs Java 17+ and, for the Spark Connect test, ``pip install 'pydistcp[connect]'``
(grpcio, grpcio-status, googleapis-common-protos, zstandard).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PYDISTCP, cli_env, run_cli, tree
from tests.fixtures.spark_cluster import MASTER, SparkConnectUrl, SparkMaster, TwoWorkers

pytestmark = [pytest.mark.cluster, pytest.mark.e2e]

CLI_TIMEOUT = 600  # the machine is shared: be generous, but never hang

# Executors log their tasks at INFO to stderr, i.e. into the worker's
# work/<app-id>/<executor-id>/stderr: proof of where the tasks ran.
EXECUTOR_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = info
"""


def make_tree(root: Path) -> int:
    """Nested dirs, a unicode name with a space, a 0-byte file, an empty dir and a
    few MiB of random data, with mixed modes and fixed mtimes. Returns the file count."""
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "a" / "b" / "c" / "random.bin").write_bytes(os.urandom(3 << 20))
    (root / "a" / "b" / "more.bin").write_bytes(os.urandom((1 << 20) + 12345))
    (root / "a" / "ünïcödé näme.txt").write_text("grüße, 世界\n" * 500, encoding="utf-8")
    (root / "a" / "zero").write_bytes(b"")
    (root / "top.csv").write_text("id,v\n1,2\n")
    (root / "a" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "a" / "run.sh").chmod(0o750)
    (root / "top.csv").chmod(0o444)
    (root / "a" / "b").chmod(0o700)
    for i, p in enumerate(sorted(root.rglob("*"), reverse=True)):
        os.utime(p, (1_600_000_000 + i, 1_600_000_000 + i))
    return sum(1 for p in root.rglob("*") if p.is_file())


def copy_and_check(tmp_path: Path, master: str, *extra: str) -> dict:
    src, dst, sj = tmp_path / "src", tmp_path / "dst", tmp_path / "summary.json"
    files = make_tree(src)
    total = sum(p.stat().st_size for p in src.rglob("*") if p.is_file())
    result = run_cli("copy", str(src), str(dst), "--master", master, "--no-progress",
                     "--summary-json", str(sj), "--log-dir", str(tmp_path / "logs"), *extra,
                     timeout=CLI_TIMEOUT)
    assert result.returncode == 0, (result.stdout, result.stderr, _driver_log(tmp_path))
    assert tree(dst) == tree(src)  # bytes, modes and mtimes, directories included
    assert (dst / "empty").is_dir() and (dst / "a" / "zero").stat().st_size == 0
    s = json.loads(sj.read_text())
    assert (s["ok"], s["files_copied"], s["files_failed"], s["bytes_copied"]) == (
        True, files, 0, total), s
    assert (s["files_skipped"], s["files_deleted"], s["failures"]) == (0, 0, []), s
    assert f"copied {files} files" in result.stdout
    return s


def _driver_log(tmp_path: Path) -> str:
    logs = sorted((tmp_path / "logs").glob("spark-*.log"))
    return logs[-1].read_text(errors="replace")[-4000:] if logs else "(no driver log)"


def test_copy_on_standalone_cluster_runs_in_worker_executor(
        tmp_path: Path, spark_standalone: SparkMaster) -> None:
    work = spark_standalone.worker_dir
    apps_before = {p.name for p in work.iterdir()}
    props = tmp_path / "executor-log4j2.properties"
    props.write_text(EXECUTOR_LOG4J)

    copy_and_check(tmp_path, spark_standalone, "--conf",
                   f"spark.executor.extraJavaOptions=-Dlog4j.configurationFile=file:{props}")

    # The master registered the CLI's application and gave it an executor on our worker.
    new_apps = sorted(p for p in work.iterdir() if p.name not in apps_before)
    assert len(new_apps) == 1, (new_apps, spark_standalone.log(MASTER).read_text()[-3000:])
    app = new_apps[0]
    master_log = spark_standalone.log(MASTER).read_text(errors="replace")
    assert f"Registered app pydistcp with ID {app.name}" in master_log
    assert f"Launching executor {app.name}/" in master_log
    # ... and that executor, a separate JVM launched by the worker, ran the tasks.
    stderrs = list(app.glob("*/stderr"))
    assert stderrs, list(app.rglob("*"))
    text = "\n".join(p.read_text(errors="replace") for p in stderrs)
    assert "Spark Executor Command:" in text and "CoarseGrainedExecutorBackend" in text
    assert f'"--app-id" "{app.name}"' in text
    # Task ids, not line counts: the worker may write the tail of an executor's stderr
    # twice when it stops the executor at the end of the application.
    started = set(re.findall(r"Executor: Running task .*\(TID (\d+)\)", text))
    finished = set(re.findall(r"Executor: Finished task .*\(TID (\d+)\)", text))
    assert started and finished == started, text[-3000:]


def test_copy_on_spark_connect_server(tmp_path: Path,
                                      spark_connect_server: SparkConnectUrl) -> None:
    log = spark_connect_server.log()
    before = log.read_text(errors="replace").count("Finished task")

    s = copy_and_check(tmp_path, spark_connect_server)

    # The tasks ran in the server's JVM (the client has no JVM at all).
    after = log.read_text(errors="replace").count("Finished task")
    assert after > before, log.read_text(errors="replace")[-3000:]
    assert s["phases"]["copy_s"] > 0
    # The client's spark.stop() ends its session only, never the shared server.
    assert spark_connect_server.alive()


def test_a_job_on_spark_connect_asks_the_server_nothing_but_to_run_it(
        spark_connect_server: SparkConnectUrl) -> None:
    """The schemas of a job's rows and results are known to the client (no DDL to parse,
    no schema to fetch): the only analysis requests left are none."""
    from pyspark.sql import SparkSession

    from distcp.copying.task import idle_runner
    from distcp.spark.arrow import run_pickled

    environment = dict(os.environ)  # create() marks this process as a Connect client
    spark = SparkSession.builder.remote(spark_connect_server).create()
    asked: list[str] = []
    analyze = spark.client._analyze

    def spy(method: str, **kwargs: Any) -> Any:
        asked.append(method)
        return analyze(method, **kwargs)

    spark.client._analyze = spy
    try:
        assert run_pickled(spark, [(n, None) for n in range(3)], idle_runner) == []
    finally:
        spark.stop()
        # ... (SPARK_CONNECT_MODE_ENABLED), which every later CLI run would inherit
        os.environ.clear()
        os.environ.update(environment)
    assert asked == [], asked


@pytest.mark.parametrize("listing", ["driver", "spark"])
def test_a_worker_killed_mid_copy_is_a_lost_node_and_the_job_finishes(
        tmp_path: Path, spark_two_workers: TwoWorkers, listing: str) -> None:
    """Two workers of one core; once worker 1's executor runs a copy task, worker 1 and
    all it launched are SIGKILLed. Spark gives its tasks to worker 2; the run ends 0 with
    the destination identical, and no file is published twice or missing. With
    ``--listing spark`` the files to copy and their results stay in the tasks' files
    (the thin coordinator): the retried task reads its chunks again and writes its own
    results file, and only the report that reached the driver names one."""
    src, dst, sj = tmp_path / "src", tmp_path / "dst", tmp_path / "summary.json"
    for i in range(32):
        (src / f"d{i % 4}").mkdir(parents=True, exist_ok=True)
        (src / f"d{i % 4}" / f"f{i:02}.bin").write_bytes(os.urandom(64 << 10))
    props = tmp_path / "executor-log4j2.properties"
    props.write_text(EXECUTOR_LOG4J)
    # 0.25 s after each staged file: a Spark task (16 files here) lasts 4 s, ample for the
    # kill below (polled every 0.2 s) to land inside worker 1's task
    env = cli_env({"DISTCP_SLOW_AT": "after_stage=0.25"})
    run = subprocess.Popen(
        [*PYDISTCP, "copy", str(src), str(dst), "--master", spark_two_workers, "--tasks", "8",
         "--listing", listing, "--no-progress", "--summary-json", str(sj), "--log-dir", str(tmp_path / "logs"),
         "--conf", f"spark.executor.extraJavaOptions=-Dlog4j.configurationFile=file:{props}"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        deadline = time.monotonic() + CLI_TIMEOUT
        while not (_running_task(spark_two_workers.work_dirs[1]) and _copying(dst)):
            assert run.poll() is None, run.communicate()
            assert time.monotonic() < deadline, "worker 1 never ran a task"
            time.sleep(0.2)
        spark_two_workers.kill_worker(1)
        out, err = run.communicate(timeout=CLI_TIMEOUT)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, (out, err, _driver_log(tmp_path))
    assert tree(dst) == tree(src)
    s = json.loads(sj.read_text())
    assert (s["ok"], s["files_copied"], s["files_failed"]) == (True, 32, 0), s
    # Worker 1 died inside a task (started, never finished); worker 2 ran what it lost,
    # and no attempt left a staged file behind.
    lost = "\n".join(p.read_text(errors="replace")
                     for p in spark_two_workers.work_dirs[1].glob("*/*/stderr"))
    started = set(re.findall(r"Executor: Running task .*\(TID (\d+)\)", lost))
    finished = set(re.findall(r"Executor: Finished task .*\(TID (\d+)\)", lost))
    assert started - finished, lost[-3000:]
    assert _running_task(spark_two_workers.work_dirs[2])
    assert list((dst / ".pydistcp" / "staging").rglob("*.bin")) == []


def _copying(dst: Path) -> bool:
    """Whether a copy task staged a file (planning on Spark runs tasks before)."""
    return any(p.is_file() for p in (dst / ".pydistcp" / "staging").glob("*/u*/**/*"))


def _running_task(work: Path) -> bool:
    return any("Executor: Running task" in p.read_text(errors="replace")
               for p in work.glob("*/*/stderr"))


def test_a_continuous_copy_on_the_standalone_cluster_runs_its_batches_there(
        tmp_path: Path, spark_standalone: SparkMaster) -> None:
    """The query's driver is this client (client mode); the catch-up and each batch copy
    in jobs of the cluster's executors. Files written once the query runs are published
    once each; SIGTERM ends it with exit 0."""
    import signal

    from tests.e2e.test_continuous import Writer, _start, _status, announced_sets, files_of

    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "first.bin").write_bytes(b"there before the start")
    work = spark_standalone.worker_dir
    apps_before = {p.name for p in work.iterdir()}
    proc = _start(src, dst, "--master", spark_standalone, "--log-dir", str(tmp_path / "logs"))
    begun = time.monotonic()
    while _status(dst / ".pydistcp")["state"] != "running" and time.monotonic() - begun < 300:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    writer = Writer(src, seconds=2, every=0.1)
    writer.start()
    writer.join()
    while files_of(dst) != files_of(src) and time.monotonic() - begun < 300:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGTERM)
    _out, err = proc.communicate(timeout=CLI_TIMEOUT)
    assert proc.returncode == 0, (err, _driver_log(tmp_path))
    assert files_of(dst) == files_of(src) and writer.written >= 10
    assert sum(announced_sets(dst).values()) == len(files_of(src))  # each once
    new_apps = [p for p in work.iterdir() if p.name not in apps_before]
    assert len(new_apps) == 1  # one application: the catch-up and every batch
    status = _status(dst / ".pydistcp")
    assert status["state"] == "stopped" and status["batches"] >= 1
