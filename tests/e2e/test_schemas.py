"""pydistcp's Spark schemas, built in Python (distcp.spark.schemas), are what Spark's own
parser makes of the same DDL strings, on the suite's real local session."""

from __future__ import annotations

from typing import Any

import pytest

from distcp.planning import joined as jp
from distcp.spark import arrow, manifest
from distcp.spark.schemas import local_frame, range_schema, struct
from distcp.storage import treelisting as tl

pytestmark = pytest.mark.e2e

#: Every type name the builder knows, spelled as DDL may spell it.
EVERY_TYPE = ("a INT, `b c` smallint, d tinyint, e float, f timestamp, g date, h short, "
              "i byte, j integer")
SCHEMAS = (arrow.ITEM_SCHEMA, arrow.RESULT_SCHEMA, jp.OUT_SCHEMA, tl.ROW_SCHEMA,
           manifest.SEGMENT_SCHEMA, EVERY_TYPE)


@pytest.mark.parametrize("ddl", SCHEMAS)
def test_each_schema_is_what_spark_parses(spark: Any, ddl: str) -> None:
    assert struct(ddl) == spark.createDataFrame([], ddl).schema


def test_rows_and_ranges_keep_their_schema(spark: Any) -> None:
    df = local_frame(spark, [(1, b"x"), (2, None)], arrow.ITEM_SCHEMA)
    assert df.schema == struct(arrow.ITEM_SCHEMA) and df.count() == 2
    assert spark.range(0, 3).schema == range_schema()


@pytest.mark.parametrize("ddl", ["a array<int>", "a decimal(10,2)", "a struct<b: int>",
                                 "a", "a int b int", "a unknowntype"])
def test_anything_but_a_flat_list_of_simple_types_is_refused(ddl: str) -> None:
    with pytest.raises(ValueError, match="not a flat schema"):
        struct(ddl)
