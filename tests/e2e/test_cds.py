"""Class-data sharing with real JVMs: a cold ``pydistcp copy`` starts a detached builder,
later runs give the archive to the driver JVM, and a bad archive only costs time.

The archive is built once for the module (~40-90 s on a busy 2-core machine).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distcp.spark import cds
from distcp.spark.jvm import check_java
from tests.conftest import cli_env, run_cli, tree
from tests.fixtures.processes import CmdlineWatcher

pytestmark = pytest.mark.e2e


def copy(tmp: Path, cds_dir: Path, **env: str) -> tuple[subprocess.CompletedProcess[str],
                                                          list[bytes]]:
    """A CLI copy of 5 tiny files with this CDS dir; the run and its java command lines."""
    src, dst = tmp / "src", tmp / f"dst-{time.monotonic_ns()}"
    if not src.exists():
        src.mkdir()
        for i in range(5):
            (src / f"f{i}.txt").write_text(f"file {i}\n")
    with CmdlineWatcher() as watcher:
        # --copying spark: a plan this small is otherwise copied with no JVM at all
        run = run_cli("copy", str(src), str(dst), "--copying", "spark",
                      env={"PYDISTCP_CDS_DIR": str(cds_dir),
                           "PYDISTCP_LOG_DIR": str(tmp / "logs"), **env})
    assert run.returncode == 0, run.stderr
    assert tree(dst) == tree(src)
    # This run's driver JVM only (its log4j file is in this test's log dir), not a JVM an
    # earlier test of the session left running (the in-process API tests' session).
    javas = [c for c in watcher.seen.values()
             if b"org.apache.spark.deploy.SparkSubmit" in c and str(tmp / "logs").encode() in c]
    assert javas, "no driver JVM seen"
    return run, javas


def archive_of(cds_dir: Path) -> Path:
    saved = os.environ.get("PYDISTCP_CDS_DIR")
    os.environ["PYDISTCP_CDS_DIR"] = str(cds_dir)
    try:
        return Path(cds.archive_path(check_java()))
    finally:
        if saved is None:
            del os.environ["PYDISTCP_CDS_DIR"]
        else:
            os.environ["PYDISTCP_CDS_DIR"] = saved


def stop_builder(cds_dir: Path) -> None:
    """Stop the detached builder a run of this test started (its own process group)."""
    pid = cds.builder_pid(str(cds_dir))
    if pid:
        os.killpg(pid, signal.SIGTERM)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The archive, built the automatic way: a cold run starts the background builder."""
    tmp = tmp_path_factory.mktemp("cds")
    cds_dir = tmp / "cds"
    archive = archive_of(cds_dir)
    first, javas = copy(tmp, cds_dir)
    assert not any(b"SharedArchiveFile" in j for j in javas)
    # announced once, in one line, with the way to turn it off
    assert first.stderr.count(cds.announcement(str(cds_dir))) == 1, first.stderr
    deadline = time.monotonic() + 240
    while not (archive.exists() and cds.builder_pid(str(cds_dir)) is None):
        assert time.monotonic() < deadline, (cds_dir / "build.log").read_text()
        time.sleep(1)
    assert archive.stat().st_size > 50 << 20  # ~150 MiB with pyspark 4.3 and JDK 17
    yield archive
    stop_builder(cds_dir)


def test_a_run_gives_the_archive_to_the_driver_jvm(built: Path, tmp_path: Path) -> None:
    run, javas = copy(tmp_path, built.parent)
    assert all(f"-XX:SharedArchiveFile={built}".encode() in j for j in javas)
    assert "warning" not in (run.stdout + run.stderr).lower()  # JVM warnings: Spark log only
    assert "start-up archive" not in run.stderr  # announced by the first build only
    status = subprocess.run([sys.executable, "-m", "distcp.spark.cds", "status"],
                            capture_output=True, text=True, env=cli_env(
                                {"PYDISTCP_CDS_DIR": str(built.parent)}), check=False)
    assert status.returncode == 0
    assert status.stdout.startswith(f"CDS on; archive {built}: ") and "MiB" in status.stdout


def test_build_when_it_exists_is_cheap(built: Path) -> None:
    t = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "distcp.spark.cds", "build"], check=False,
                         capture_output=True, text=True,
                         env=cli_env({"PYDISTCP_CDS_DIR": str(built.parent)}))
    assert out.returncode == 0 and out.stdout.startswith(f"CDS archive exists: {built}")
    assert time.monotonic() - t < 10


def test_disabled_by_env(built: Path, tmp_path: Path) -> None:
    _, javas = copy(tmp_path, built.parent, PYDISTCP_CDS="0")
    assert not any(b"SharedArchiveFile" in j for j in javas)
    assert sorted(p.name for p in built.parent.iterdir()) == sorted(
        [built.name, f"{built.name}.size", "build.lock", "build.log"])  # no new builder


def test_an_archive_of_another_jvm_is_rejected_and_deleted(tmp_path: Path) -> None:
    """A real archive, but of Spark's launcher JVM (another classpath): the JVM warns
    (into the Spark log), runs without it, and the run deletes it and starts a builder.
    (An archive of ``java -version`` would not do: its empty classpath fits any.)"""
    import pyspark

    cds_dir = tmp_path / "cds"
    archive = archive_of(cds_dir)
    cds_dir.mkdir()
    jars = Path(pyspark.__file__).parent / "jars"
    launcher = str(next(jars.glob("spark-launcher_*.jar")))
    subprocess.run([check_java(), f"-XX:ArchiveClassesAtExit={archive}", "-cp", launcher,
                    "org.apache.spark.launcher.Main", "org.apache.spark.deploy.SparkSubmit",
                    "--version"], capture_output=True, check=False, timeout=120)
    Path(f"{archive}.size").write_text(str(archive.stat().st_size))
    try:
        run, javas = copy(tmp_path, cds_dir)
        assert all(f"-XX:SharedArchiveFile={archive}".encode() in j for j in javas)
        assert "warning" not in (run.stdout + run.stderr).lower()
        (log,) = (tmp_path / "logs").glob("spark-*.log")
        assert "Unable to use shared archive" in log.read_text()
        assert not archive.exists()
        assert cds.builder_pid(str(cds_dir)) or archive.exists()  # being rebuilt
    finally:
        stop_builder(cds_dir)


def test_a_truncated_archive_never_fails_a_run(built: Path, tmp_path: Path) -> None:
    """JDK 17 dies of SIGBUS on a truncated archive: the run starts once more without it
    and deletes it (here its size sidecar matches, as if the disk had lost the tail)."""
    cds_dir = tmp_path / "cds"
    archive = archive_of(cds_dir)
    cds_dir.mkdir()
    with open(built, "rb") as f:
        archive.write_bytes(f.read(200_000))
    Path(f"{archive}.size").write_text("200000")
    try:
        run, _ = copy(tmp_path, cds_dir)
        assert "A fatal error has been detected" in run.stdout  # the first JVM died
        assert list(cds_dir.glob("hs_err_pid*.log"))  # its crash report: not in the cwd
        assert not archive.exists()
    finally:
        stop_builder(cds_dir)
