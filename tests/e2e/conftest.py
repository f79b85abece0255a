from tests.fixtures.spark_cluster import spark_standalone, spark_connect_server  # noqa: F401
