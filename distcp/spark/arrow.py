"""The one way pydistcp runs work on Spark: pickled items in, pickled results out.

Both Spark jobs of a run (copying the WorkUnits, joining the part files of split
files) send a list of picklable items, one task per item, and collect lists of
TaskResults. They go through ``mapInArrow`` (not RDDs) so that the same job runs on
Spark Connect and on clusters without RDD access. This module holds both sides of
that exchange: the driver's submit-and-collect (``run_pickled``) and the executor's
Arrow adapter (``map_pickled``), which calls plain Python (``distcp.copying.task``,
``distcp.copying.join``) that never imports pyspark itself.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from distcp.spark.interrupts import interrupted

#: Rows sent: an item's id and its pickle.
ITEM_SCHEMA = "unit_id long, payload binary"
#: Rows returned: the item's id and the pickle of its list of results.
RESULT_SCHEMA = "unit_id long, results binary"

#: Runs one Arrow batch's items (unpickled) and returns one list of results per item.
BatchRunner = Callable[[list[Any]], list[list[Any]]]
#: Called once per Spark task attempt, on the executor, with the attempt's id.
RunnerFactory = Callable[[str], BatchRunner]

_PARALLELISM_KEY = "spark.sql.leafNodeDefaultParallelism"


def run_pickled(spark: Any, items: Sequence[tuple[int, Any]], runner: RunnerFactory
                ) -> list[Any]:
    """One Spark job, one task per ``(id, item)``; the results of every item, flattened.

    Spark's own failures (a lost executor, a task failed too often) propagate as
    whatever exception Spark raises: the caller turns them into failed results.
    """
    with _one_task_each(spark, len(items)):
        df = spark.createDataFrame([(n, pickle.dumps(item)) for n, item in items], ITEM_SCHEMA)
        try:
            rows = df.mapInArrow(partial(map_pickled, runner), RESULT_SCHEMA).collect()
        except Exception as exc:
            if interrupted():  # the gateway broken by Ctrl-C, not a failed job
                raise KeyboardInterrupt from exc
            raise
    return [r for row in rows for r in pickle.loads(row["results"])]


@contextmanager
def _one_task_each(spark: Any, count: int) -> Iterator[None]:
    """One partition, hence one task, per item; the session's setting put back after."""
    previous = spark.conf.get(_PARALLELISM_KEY, None)
    spark.conf.set(_PARALLELISM_KEY, str(count))
    try:
        yield
    except KeyboardInterrupt:
        # Not put back: Ctrl-C may have broken the gateway mid-call, and a failing call
        # here would replace the interrupt with a Py4JError that fails every file (the
        # session is ended after an interrupt anyway).
        raise
    except BaseException:
        _put_back(spark, previous)
        raise
    _put_back(spark, previous)


def _put_back(spark: Any, previous: str | None) -> None:
    if previous is None:
        spark.conf.unset(_PARALLELISM_KEY)
    else:
        spark.conf.set(_PARALLELISM_KEY, previous)


def map_pickled(runner: RunnerFactory, batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow`` function (executor side): unpickle each batch's items, run them,
    and yield the pickled lists of results under the items' ids."""
    import pyarrow as pa

    run = runner(attempt_id())
    for batch in batches:
        ids = batch.column("unit_id").to_pylist()
        items = [pickle.loads(p) for p in batch.column("payload").to_pylist()]
        out = [pickle.dumps(results) for results in run(items)]
        yield pa.RecordBatch.from_arrays(
            [pa.array(ids, pa.int64()), pa.array(out, pa.binary())], names=["unit_id", "results"])


def attempt_id() -> str:
    """partition, attempt and stage: unique per task attempt (workers are reused, so no PID)."""
    try:
        from pyspark import TaskContext

        tc = TaskContext.get()
    except ImportError:
        tc = None
    if tc is None:
        return f"local{os.getpid()}"
    return f"s{tc.stageId()}p{tc.partitionId()}a{tc.attemptNumber()}"
