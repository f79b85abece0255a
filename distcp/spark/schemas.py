"""pydistcp's Spark schemas, built here instead of asked of the server (driver).

On Spark Connect (the warm engine, ``--master sc://``) every DDL string given to
``createDataFrame`` or ``mapInArrow`` is parsed by the server, one request each, and a
DataFrame made from local rows does not know its own schema: ``mapInArrow`` asks the
server for its columns, one more request. A copy job paid three such round trips
before its real one (10-40 ms each on the warm engine, measured here). pydistcp's
schemas are flat lists of simple columns, so ``struct`` builds them in Python, and
``local_frame`` / ``known`` give a DataFrame the schema it is known to have.

Classic sessions get the same values: a StructType is what Spark parses the string to
(tests/e2e/test_schemas.py checks each schema against Spark's own parser).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any

#: DDL type names (lower case) -> the PySpark type class's name.
_TYPES = {"string": "StringType", "long": "LongType", "bigint": "LongType",
          "int": "IntegerType", "integer": "IntegerType", "short": "ShortType",
          "smallint": "ShortType", "byte": "ByteType", "tinyint": "ByteType",
          "double": "DoubleType", "float": "FloatType", "boolean": "BooleanType",
          "binary": "BinaryType", "timestamp": "TimestampType", "date": "DateType"}
_COLUMN = re.compile(r"\s*(?:`([^`]+)`|(\w+))\s+(\w+)\s*")


@cache
def struct(ddl: str) -> Any:
    """The StructType of a flat DDL list (``name type, `name` type``): nullable columns,
    as Spark parses them. A ValueError for anything else (nested or parametrised
    types), which pydistcp's own schemas never hold."""
    from pyspark.sql import types

    fields = []
    for column in ddl.split(","):
        match = _COLUMN.fullmatch(column)
        kind = _TYPES.get(match.group(3).lower()) if match else None
        if match is None or kind is None:
            raise ValueError(f"not a flat schema of simple types: {ddl!r}")
        fields.append(types.StructField(match.group(1) or match.group(2),
                                        getattr(types, kind)(), True))
    return types.StructType(fields)


def local_frame(spark: Any, rows: Sequence[tuple[Any, ...]], ddl: str) -> Any:
    """``spark.createDataFrame(rows, ddl)`` without asking the server anything."""
    schema = struct(ddl)
    return known(spark.createDataFrame(rows, schema), schema)


def known(df: Any, schema: Any) -> Any:
    """``df``, told its schema: a Spark Connect DataFrame otherwise asks the server the
    first time it is needed (a classic one, or a PySpark without that cache, is left
    as it is: it only means one more request)."""
    if getattr(df, "_cached_schema", False) is None:
        df._cached_schema = schema
    return df


def range_schema() -> Any:
    """The schema of ``spark.range``: one non-nullable ``id`` column."""
    from pyspark.sql import types

    return types.StructType([types.StructField("id", types.LongType(), False)])
