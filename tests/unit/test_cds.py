"""The class-data-sharing archive's key, place and checks (distcp/spark/cds.py); the
archive itself is built and used by real JVMs in tests/e2e/test_cds.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from distcp.spark import cds
from distcp.spark.jvm import LOCAL_DRIVER_JVM, base_conf, check_java
from distcp.spark.session import jvm_conf

JARS = [("spark-core_2.13-4.3.0.jar", 17_000_000), ("py4j-0.10.9.9.jar", 120_000)]
KEY = ("/usr/lib/jvm/java-17/bin/java", 'openjdk version "17.0.15"', "4.3.0", JARS,
       LOCAL_DRIVER_JVM)


def test_key_is_stable_and_ignores_jar_order() -> None:
    java, version, pyspark, jars, flags = KEY
    assert cds.archive_key(*KEY) == cds.archive_key(java, version, pyspark, jars[::-1], flags)
    assert len(cds.archive_key(*KEY)) == 20


@pytest.mark.parametrize("change", [
    lambda k: (k[0].replace("17", "21"), *k[1:]),                        # another java
    lambda k: (k[0], 'openjdk version "17.0.16"', *k[2:]),               # another build
    lambda k: (*k[:2], "4.3.1", *k[3:]),                                 # another pyspark
    lambda k: (*k[:3], [*k[3], ("extra.jar", 10)], k[4]),                # a jar added
    lambda k: (*k[:3], [(k[3][0][0], 17_000_001), k[3][1]], k[4]),       # a jar replaced
    lambda k: (*k[:3], k[3][:1], k[4]),                                  # a jar removed
    lambda k: (*k[:4], "-XX:+UseG1GC"),                                  # other JVM flags
])
def test_key_changes_with_what_makes_an_archive_invalid(change) -> None:  # type: ignore[no-untyped-def]
    assert cds.archive_key(*change(KEY)) != cds.archive_key(*KEY)


def test_dir_from_env_then_xdg_then_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PYDISTCP_CDS_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cds.cds_dir() == str(tmp_path / "xdg" / "pydistcp" / "cds")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cds.cds_dir() == str(tmp_path / "home" / ".cache" / "pydistcp" / "cds")
    monkeypatch.setenv("PYDISTCP_CDS_DIR", str(tmp_path / "mine"))
    assert cds.cds_dir() == str(tmp_path / "mine")


def fake_archive(path: Path, size: int = 4096) -> None:
    """A file with the magic and the size sidecar of a complete archive."""
    path.write_bytes(MAGIC + os.urandom(size))
    Path(f"{path}.size").write_text(str(size + 4))


MAGIC = bytes.fromhex("a8ab0bf0")


@pytest.fixture
def java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    monkeypatch.setenv("PYDISTCP_CDS_DIR", str(tmp_path / "cds"))
    monkeypatch.delenv("PYDISTCP_CDS", raising=False)
    return check_java()


def test_key_of_this_machine_names_the_archive(java: str, tmp_path: Path) -> None:
    path = cds.archive_path(java)
    assert os.path.dirname(path) == str(tmp_path / "cds")
    assert path.endswith(".jsa") and path == cds.archive_path(java)


def test_flags_only_for_an_archive_with_the_magic(java: str) -> None:
    path = Path(cds.archive_path(java))
    assert cds.archive_flags(java) == ""
    path.parent.mkdir(parents=True)
    path.write_bytes(os.urandom(4096))
    assert cds.archive_flags(java) == ""
    assert not path.exists()  # corrupt: deleted, so that it is rebuilt
    fake_archive(path)
    flags = cds.archive_flags(java)
    assert flags.split()[:2] == [f"-XX:SharedArchiveFile={path}", "-Xshare:auto"]
    assert "-Xlog:all=warning:stderr" in flags  # JVM warnings go to the Spark log
    Path(f"{path}.size").write_text("999999")  # a truncated archive crashes the JVM
    assert cds.archive_flags(java) == ""
    assert not path.exists() and not Path(f"{path}.size").exists()


def test_a_failed_start_drops_our_archive_and_our_flags_only(java: str) -> None:
    path = Path(cds.archive_path(java))
    path.parent.mkdir(parents=True)
    fake_archive(path)
    options = f"-Dlog4j.configurationFile=file:x {LOCAL_DRIVER_JVM} {cds.archive_flags(java)}"
    assert cds.drop_archive_of(options) == f"-Dlog4j.configurationFile=file:x {LOCAL_DRIVER_JVM}"
    assert not path.exists()
    assert cds.drop_archive_of(options) is None  # nothing of ours left: the error stands
    assert cds.drop_archive_of(LOCAL_DRIVER_JVM) is None


def test_disabled_by_env(java: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = Path(cds.archive_path(java))
    path.parent.mkdir(parents=True)
    fake_archive(path)
    monkeypatch.setenv("PYDISTCP_CDS", "0")
    assert cds.archive_flags(java) == ""
    assert cds.build_archive(java) is None
    assert cds.start_background_build(java) is False


def test_base_conf_adds_the_archive_for_local_masters_only(java: str, tmp_path: Path) -> None:
    path = Path(cds.archive_path(java))
    path.parent.mkdir(parents=True)
    fake_archive(path)
    log = str(tmp_path / "spark.log")
    local = jvm_conf(log, str(tmp_path), "local[2]")["spark.driver.extraJavaOptions"]
    assert f"{LOCAL_DRIVER_JVM} -XX:SharedArchiveFile={path} -Xshare:auto" in local
    cluster = jvm_conf(log, str(tmp_path), "spark://h:7077")["spark.driver.extraJavaOptions"]
    assert "SharedArchiveFile" not in cluster
    assert "SharedArchiveFile" not in base_conf(log, str(tmp_path), "local[2]")[
        "spark.driver.extraJavaOptions"]  # the recorder's JVM: no archive


def test_rejection_in_the_spark_log_deletes_the_archive(java: str, tmp_path: Path) -> None:
    path = Path(cds.archive_path(java))
    path.parent.mkdir(parents=True)
    fake_archive(path)
    log = tmp_path / "spark.log"
    log.write_text("WARNING: Using incubator modules: jdk.incubator.vector\n")
    assert cds.drop_if_rejected(java, str(log)) is False and path.exists()
    log.write_text("[0.09s][warning][cds,dynamic] Unable to use shared archive. The top "
                   f"archive failed to load: {path}\n")
    assert cds.drop_if_rejected(java, str(log)) is True and not path.exists()


def test_one_builder_at_a_time(java: str) -> None:
    directory = os.path.dirname(cds.archive_path(java))
    assert cds.builder_pid(directory) is None
    with cds._lock(directory, owner=True) as held:  # what a running builder holds
        assert held
        assert cds.builder_pid(directory) == os.getpid()
        assert cds.build_archive(java) is None  # "another process is building it"
        assert cds.start_background_build(java) is False
    assert cds.builder_pid(directory) is None
