"""Catalog registration (``--catalog-table``, distcp.commit.catalog_steps) on real Spark.

In-process tests use the suite's shared session and its in-memory catalog (cheap, no
new JVM); the Hive test runs pydistcp between two other processes on one embedded
Derby metastore (Derby embedded admits one JVM at a time): a table made by one
process, partitions registered by pydistcp, rows read back by a third.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import distcp
from distcp.commit.catalog_steps import RegisterPartitions
from distcp.commit.steps import CommitContext, CommitStep
from distcp.errors import CatalogError
from tests.conftest import cli_env, run_cli

pytestmark = pytest.mark.e2e


def _parquet(path: Path, ids: list[int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int32())}), path)


class _Records(logging.Handler):
    """Keeps what a logger emitted."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _rows(spark: Any, table: str) -> list[tuple[Any, ...]]:
    spark.sql(f"REFRESH TABLE {table}")
    return [tuple(r) for r in spark.sql(f"SELECT * FROM {table} ORDER BY id").collect()]


def test_a_missing_table_leaves_the_data_published_and_the_next_run_registers(
        spark: Any, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _parquet(src / "dt=2024-01-01" / "part-0.parquet", [1, 2])
    _parquet(src / "dt=2024-01-02" / "part-0.parquet", [3])
    first = distcp.copy(str(src), str(dst), catalog_table="h4_api.events", progress=False)
    assert first.files_copied == 2 and first.failures == [] and not first.ok
    assert [f.path for f in first.catalog_failures] == [str(dst)]
    assert "h4_api.events" in first.catalog_failures[0].error
    assert "the data is published" in first.catalog_failures[0].error
    for day in ("dt=2024-01-01", "dt=2024-01-02"):  # published, byte for byte
        assert (dst / day / "part-0.parquet").read_bytes() == \
            (src / day / "part-0.parquet").read_bytes()
    (pending,) = (dst / ".pydistcp" / "commits").glob("*.json")  # kept for the next run
    steps = json.loads(pending.read_text())["steps"]
    assert [s["kind"] for s in steps] == ["catalog-partitions"]  # the data steps are done

    # Still no table: the next run retries, reports it pending, and is not failed by it,
    # and PySpark logs no error with its Java stack for it (the one line says it all).
    from pyspark.logger import PySparkLogger

    logged = _Records()
    PySparkLogger.getLogger("SQLQueryContextLogger").addHandler(logged)
    try:
        middle = distcp.copy(str(src), str(dst), catalog_table="h4_api.events", progress=False)
    finally:
        PySparkLogger.getLogger("SQLQueryContextLogger").removeHandler(logged)
    assert logged.records == []
    assert middle.ok and middle.catalog_failures == [] and middle.files_copied == 0
    assert [f.path for f in middle.catalog_pending] == [str(src)]  # the dataset
    assert "h4_api.events" in middle.catalog_pending[0].error
    assert "--forget-registrations" in middle.catalog_pending[0].error

    spark.sql("CREATE DATABASE IF NOT EXISTS h4_api")
    spark.sql(f"CREATE TABLE h4_api.events (id INT, dt STRING) USING parquet "
              f"PARTITIONED BY (dt) LOCATION '{dst}'")
    assert _rows(spark, "h4_api.events") == []  # the catalog knows no partition yet
    _parquet(src / "dt=2024-01-03" / "part-0.parquet", [4])
    second = distcp.copy(str(src), str(dst), catalog_table="h4_api.events", progress=False)
    assert second.ok and second.files_copied == 1 and second.sequences_replayed == 1
    assert second.files_recovered == 0  # the replay registered; it published nothing
    assert second.partitions_registered == 3  # two by the replay, one new
    assert not list((dst / ".pydistcp" / "commits").glob("*.json"))
    assert _rows(spark, "h4_api.events") == [
        (1, "2024-01-01"), (2, "2024-01-01"), (3, "2024-01-02"), (4, "2024-01-03")]


def test_a_pattern_maps_dated_folders_to_partition_columns(spark: Any, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _parquet(src / "2024" / "05" / "06" / "07" / "a.parquet", [1])
    _parquet(src / "2024" / "05" / "06" / "08" / "b.parquet", [2, 3])
    spark.sql("CREATE DATABASE IF NOT EXISTS h4_api")
    spark.sql(f"CREATE TABLE h4_api.hourly (id INT, dt STRING, hr INT) USING parquet "
              f"PARTITIONED BY (dt, hr) LOCATION '{dst}'")
    s = distcp.copy(str(src), str(dst), catalog_table="h4_api.hourly",
                    catalog_partitions="dt={0}-{1}-{2}/hr={3}", progress=False)
    assert s.ok and s.partitions_registered == 2
    assert _rows(spark, "h4_api.hourly") == [(1, "2024-05-06", 7), (2, "2024-05-06", 8),
                                             (3, "2024-05-06", 8)]
    desc = spark.sql("DESCRIBE FORMATTED h4_api.hourly PARTITION (dt='2024-05-06', hr=8)")
    locations = [r[1] for r in desc.collect() if r[0] == "Location"]  # partition's, table's
    assert locations == [f"file:{dst}/2024/05/06/08", f"file:{dst}"]


def test_the_step_verifies_against_the_catalog_and_round_trips(spark: Any,
                                                                tmp_path: Path) -> None:
    """The commit-step contract (tests/unit/test_commit_steps_contract.py) for the kind
    that needs a catalog: verify() False before, True after; execute() twice is one."""
    spark.sql("CREATE DATABASE IF NOT EXISTS h4_api")
    spark.sql(f"CREATE TABLE h4_api.step (id INT, k STRING) USING parquet PARTITIONED BY (k) "
              f"LOCATION '{tmp_path}'")
    odd = "a'b/c=d %e"  # quoted in SQL, escaped in SHOW PARTITIONS
    step = RegisterPartitions("h4_api.step", (((("k", odd),), str(tmp_path / "x")),
                                               ((("k", "2"),), str(tmp_path / "y"))))
    ctx = CommitContext(spark=lambda: spark)
    assert not step.verify(ctx)
    step.execute(ctx)
    assert step.verify(ctx)
    step.execute(ctx)
    listed = sorted(r[0] for r in spark.sql("SHOW PARTITIONS h4_api.step").collect())
    assert len(listed) == 2
    back = CommitStep.from_dict(json.loads(json.dumps(step.to_dict())))
    assert back == step and back.verify(ctx)
    with pytest.raises(CatalogError, match="no Spark session"):
        step.verify(CommitContext())
    with pytest.raises(CatalogError, match="h4_api.nope"):
        RegisterPartitions("h4_api.nope", step.partitions).verify(ctx)


#: The driver JVM starts as a cold pydistcp run's does (C1 only, serial GC, the suite's
#: class-data-sharing archive when it is built): about a third of the default start's
#: time here, which two of these processes pay per test.
HIVE = """
import sys
from pyspark.sql import SparkSession
from distcp.spark import cds, jvm
root = sys.argv[1]
spark = (SparkSession.builder.master("local[1]").enableHiveSupport()
         .config("spark.driver.extraJavaOptions",
                 f"{jvm.LOCAL_DRIVER_JVM} {cds.archive_flags(jvm.check_java())}")
         .config("spark.sql.warehouse.dir", root + "/warehouse")
         .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                 "jdbc:derby:;databaseName=" + root + "/metastore;create=true")
         .getOrCreate())
for statement in sys.argv[2:]:
    for row in spark.sql(statement).collect():
        print("\\t".join(str(v) for v in row))
spark.stop()
"""


def _hive(root: Path, *statements: str) -> list[str]:
    """Run SQL in a process of its own on the Derby metastore under ``root``."""
    out = subprocess.run([sys.executable, "-c", HIVE, str(root), *statements], cwd=root,
                         env=cli_env(), capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.splitlines()


def test_hive_metastore_sees_the_partitions_and_a_new_session_reads_the_rows(
        tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _parquet(src / "dt=2024-01-01" / "part-0.parquet", [1, 2])
    _parquet(src / "dt=2024-01-02" / "part-0.parquet", [3])
    conf = ["--conf", "spark.sql.catalogImplementation=hive",
            "--conf", f"spark.sql.warehouse.dir={tmp_path}/warehouse",
            "--conf", ("spark.hadoop.javax.jdo.option.ConnectionURL="
                      f"jdbc:derby:;databaseName={tmp_path}/metastore;create=true")]
    args = ["copy", str(src), str(dst), "--catalog-table", "web.visits", "--no-progress", *conf]
    # No table yet: the data is published, the registration fails apart (exit 1).
    first = run_cli(*args, "--summary-json", str(tmp_path / "first.json"), cwd=tmp_path)
    assert first.returncode == 1, first.stderr
    assert "pydistcp: CATALOG FAILED" in first.stderr and "web" in first.stderr
    assert first.stderr.count("CATALOG FAILED") == 1 and "\tat org.apache" not in first.stderr
    assert "Traceback" not in first.stderr  # one line, no Java or Python stack
    assert "pydistcp: FAILED" not in first.stderr
    assert "catalog: 0 partition(s) registered; 1 registration(s) failed" in first.stdout
    summary = json.loads((tmp_path / "first.json").read_text())
    assert summary["files_copied"] == 2 and summary["failures"] == []
    assert len(summary["catalog_failures"]) == 1
    assert (dst / "dt=2024-01-02" / "part-0.parquet").read_bytes() == \
        (src / "dt=2024-01-02" / "part-0.parquet").read_bytes()

    _hive(tmp_path, "CREATE DATABASE web",
          f"CREATE TABLE web.visits (id INT) PARTITIONED BY (dt STRING) STORED AS PARQUET "
          f"LOCATION '{dst}'")
    _parquet(src / "dt=2024-01-03" / "part-0.parquet", [4])
    second = run_cli(*args, "--summary-json", str(tmp_path / "second.json"), cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    summary = json.loads((tmp_path / "second.json").read_text())
    assert summary["partitions_registered"] == 3 and summary["files_copied"] == 1
    assert "catalog: 3 partition(s) registered\n" in second.stdout

    out = _hive(tmp_path, "SHOW PARTITIONS web.visits",
                "SELECT dt, id FROM web.visits ORDER BY id")
    assert out == ["dt=2024-01-01", "dt=2024-01-02", "dt=2024-01-03",
                   "2024-01-01\t1", "2024-01-01\t2", "2024-01-02\t3", "2024-01-03\t4"]
    assert os.path.isdir(tmp_path / "metastore")
