"""A Spark JVM that ran out of memory mid-run is named as such, not as py4j's
"Connection refused" (which read like a storage failure: exit 3 with no cause, seen
when a million files went to 4 tasks)."""

from __future__ import annotations

from pathlib import Path

from distcp.errors import SparkUnavailableError
from distcp.spark.session import _lost_jvm, jvm_lost

LOG = """2026-11-24 19:42:58 WARN Utils: Your hostname resolves to a loopback address
2026-11-24 19:43:22 ERROR Executor: Exception in task 0.0 in stage 0.0 (TID 0)
java.lang.OutOfMemoryError: Java heap space
\tat org.apache.spark.sql.catalyst.expressions.UnsafeRow.getBinary(UnsafeRow.java:454)
2026-11-24 19:43:22 ERROR SparkUncaughtExceptionHandler: Uncaught exception in thread
java.lang.OutOfMemoryError: Java heap space
"""


def test_an_out_of_memory_log_turns_a_refused_connection_into_its_cause(tmp_path: Path
                                                                        ) -> None:
    log = tmp_path / "spark.log"
    log.write_text(LOG)
    assert jvm_lost(str(log)) == "java.lang.OutOfMemoryError: Java heap space"
    error = _lost_jvm(ConnectionRefusedError(111, "Connection refused"), str(log))
    assert isinstance(error, SparkUnavailableError)
    assert str(error) == (
        f"Spark's JVM died during the run (java.lang.OutOfMemoryError: Java heap space; "
        f"details in {log}): give it more memory, e.g. --conf spark.driver.memory=4g "
        "(spark.executor.memory on a cluster), and rerun; nothing unverified was published")


def test_other_failures_stay_what_they_are(tmp_path: Path) -> None:
    log = tmp_path / "spark.log"
    log.write_text(LOG.replace("java.lang.OutOfMemoryError", "java.io.IOException"))
    refused = ConnectionRefusedError(111, "Connection refused")
    assert jvm_lost(str(log)) is None
    assert _lost_jvm(refused, str(log)) is refused
    assert _lost_jvm(refused, str(tmp_path / "missing.log")) is refused


def test_only_the_end_of_a_long_log_is_read(tmp_path: Path) -> None:
    log = tmp_path / "spark.log"
    log.write_text(LOG + "x" * 2_000_000 + "\n")
    assert jvm_lost(str(log)) is None  # an old OOM far above the end is not this run's
    assert jvm_lost(str(log), tail=3_000_000) is not None
