"""Catalog registration planning (distcp.commit.catalog_steps): pure, no Spark."""

from __future__ import annotations

import pytest

from distcp.configuration import CopyConfiguration
from distcp.errors import ConfigurationError
from distcp.summary import Summary
from distcp.commit.catalog_steps import (
    CatalogTarget,
    add_partitions_sql,
    partitions_of,
    pattern_problem,
    table_problem,
)

ROOT = "s3://b/t"


def test_key_value_folders_give_one_partition_each_located_at_the_deepest() -> None:
    files = [f"{ROOT}/dt=2024-01-01/hr=07/a.parquet", f"{ROOT}/dt=2024-01-01/hr=07/b.parquet",
             f"{ROOT}/dt=2024-01-01/hr=08/c.parquet", f"{ROOT}/_SUCCESS",
             f"{ROOT}/country=a%2Fb/x", "s3://b/other/dt=1/f"]
    assert partitions_of(CatalogTarget("d.t"), ROOT + "/", files) == (
        ((("country", "a/b"),), f"{ROOT}/country=a%2Fb"),  # Hive's %-escaping undone
        ((("dt", "2024-01-01"), ("hr", "07")), f"{ROOT}/dt=2024-01-01/hr=07"),
        ((("dt", "2024-01-01"), ("hr", "08")), f"{ROOT}/dt=2024-01-01/hr=08"),
    )


def test_a_pattern_reads_numbered_folders_and_skips_files_too_shallow() -> None:
    target = CatalogTarget("d.t", "dt={0}-{1}-{2}/hr={3}")
    files = [f"{ROOT}/2024/05/06/07/a", f"{ROOT}/2024/05/06/07/sub/b", f"{ROOT}/2024/05/06/c"]
    assert partitions_of(target, ROOT, files) == (
        ((("dt", "2024-05-06"), ("hr", "07")), f"{ROOT}/2024/05/06/07"),)


def test_statements_are_batched_quoted_and_name_s3_as_hadoop_does() -> None:
    parts = [((("k", "it's \\ odd"),), "s3://b/t/k=1"), ((("k", "2"),), "/t/k=2"),
             ((("k", "3"),), "/t/k=3")]
    sql = add_partitions_sql("db.t", parts, batch=2)
    assert sql == [
        ("ALTER TABLE `db`.`t` ADD IF NOT EXISTS PARTITION (`k` = 'it\\'s \\\\ odd') "
        "LOCATION 's3a://b/t/k=1' PARTITION (`k` = '2') LOCATION '/t/k=2'"),
        "ALTER TABLE `db`.`t` ADD IF NOT EXISTS PARTITION (`k` = '3') LOCATION '/t/k=3'",
    ]


@pytest.mark.parametrize("table,problem", [
    ("db.t", None), ("t", None), ("db.t.x", "--catalog-table: not DB.TABLE: 'db.t.x'"),
    ("db.`t`", "--catalog-table: not DB.TABLE: 'db.`t`'"), ("", "--catalog-table: not DB.TABLE: ''"),
])
def test_table_names(table: str, problem: str | None) -> None:
    assert table_problem(table) == problem


@pytest.mark.parametrize("pattern,problem", [
    ("dt={0}-{1}-{2}/hr={3}", None),
    ("dt={0}{1}", None),
    ("dt", "each '/' part must be COLUMN=TEMPLATE, not 'dt'"),
    ("dt=x", "no {N} field names a directory"),
    ("dt={year}", "fields are directory numbers like {0}, not {year}"),
    ("dt={0:>4}", "fields are directory numbers like {0}, not {0}"),
    ("dt={0", "expected '}' before end of string"),
])
def test_patterns(pattern: str, problem: str | None) -> None:
    got = pattern_problem(pattern)
    assert got == (None if problem is None else f"--catalog-partitions {pattern!r}: {problem}")


def test_the_configuration_refuses_bad_catalog_settings_in_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigurationError, match=r"^--catalog-table: not DB.TABLE: 'a b'$"):
        CopyConfiguration.build([str(tmp_path)], str(tmp_path / "d"), catalog_table="a b")
    with pytest.raises(ConfigurationError, match=r"^--catalog-partitions needs --catalog-table$"):
        CopyConfiguration.build([str(tmp_path)], str(tmp_path / "d"), catalog_partitions="d={0}")


def test_a_pending_registration_without_spark_stays_pending_and_blocks_nothing(
        tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``pydistcp recover`` has no Spark session: the registration is reported apart,
    keeps its replay count (never set aside) and its dataset is not blocked."""
    from distcp.commit.log import CommitStepStore
    from distcp.commit.replay import replay_pending
    from distcp.commit.steps import CommitContext, CommitSequence
    from distcp.commit.catalog_steps import RegisterPartitions
    from distcp.state.bounds import Bounds

    store = CommitStepStore(str(tmp_path / "state"), {})
    step = RegisterPartitions("db.t", (((("dt", "1"),), f"{tmp_path}/dst/dt=1"),))
    store.persist(CommitSequence("urn:d", "all", (step,), "job-1-x"), "job-1")
    for _ in range(3):
        ctx = CommitContext({}, str(tmp_path / "state"),
                            bounds=Bounds(str(tmp_path / "dst"), str(tmp_path / "state")))
        blocked, tally = replay_pending(store, ctx, max_replays=1)
        assert blocked == set() and tally.failures == () and tally.sequences_set_aside == 0
        # left by a run that failed it already: pending, a failure of no later run
        assert tally.catalog_failures == ()
        assert [f.path for f in tally.catalog_pending] == ["urn:d"]
        assert "no Spark session" in tally.catalog_pending[0].error
        assert "'pydistcp cleanup DST --forget-registrations' drops it" in \
            tally.catalog_pending[0].error
        summary = Summary()
        summary.add(tally)
        assert summary.ok and "1 registration(s) of earlier runs still pending" in \
            summary.render()
    (pending,) = store.pending()
    assert pending.replays == 0 and pending.sequence.steps == (step,)
