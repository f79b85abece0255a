from tests.fixtures.spark_cluster import spark_connect_server, spark_standalone  # noqa: F401
