"""Stage 1: find datasets, list, decide what to copy, pack it into work units (driver and executor).

Reads only; everything decided here is a value (distcp.model) sent to executors.
Planning tasks (``joined``, ``paired``) run on the executors when a tree is planned on
Spark.
"""
