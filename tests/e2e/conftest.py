from tests.fixtures.spark_cluster import (  # noqa: F401
    spark_connect_server,
    spark_standalone,
    spark_two_workers,
)
