"""A dataset's manifest as a Spark DataFrame, read from its Parquet segments (driver).

The manifest folder (``StateStore.folder_of``) holds one segment per published
file set plus merged ones; every row carries ``seq`` (its publish's position in the
dataset's history) and ``deleted`` (a tombstone). Per destination the row with the
highest ``seq`` is the truth, which is what this reads, on the executors: planning
can join a source listing with it without the driver ever holding the manifest.
"""

from __future__ import annotations

from typing import Any

#: The manifest's columns, as ``StateStore.manifest_of`` gives them per destination.
MANIFEST_COLUMNS = ("destination", "size", "mtime", "digest", "guid")
#: A segment's schema (``distcp.state.manifest``), given so an empty folder reads too.
SEGMENT_SCHEMA = ("destination STRING, size BIGINT, mtime DOUBLE, digest STRING, guid STRING, "
                  "seq BIGINT, deleted BOOLEAN")


def manifest_frame(spark: Any, folder: str) -> Any:
    """The manifest under ``folder``: one row per published destination.

    Only ``*.parquet`` files are read: a write cut short by a crash leaves a
    temporary file beside the segments (removed by the next merge).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = spark.read.schema(SEGMENT_SCHEMA).option("pathGlobFilter", "*.parquet") \
        .parquet(folder)
    newest = Window.partitionBy("destination").orderBy(F.col("seq").desc())
    return (rows.withColumn("_rank", F.row_number().over(newest))
            .where((F.col("_rank") == 1) & ~F.col("deleted"))
            .select(*MANIFEST_COLUMNS))
