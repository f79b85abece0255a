"""Spark adapters and the engine runtime: the only importer of pyspark (driver and executor).

The driver's side submits jobs and runs the sessions, the JVM and the warm engine;
the executors' side is the ``mapInArrow`` adapter (``arrow``), the Python worker
daemon (``daemon``) and the probe that spares a task pandas' import (``pandasprobe``).
"""
