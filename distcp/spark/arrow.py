"""How pydistcp runs work on Spark: pickled items in, pickled results out (driver and executor).

Both Spark jobs of a run (copying the WorkUnits, joining the part files of split
files) send a list of picklable items, one task per item, and collect lists of
TaskResults. They go through ``mapInArrow`` (not RDDs) so that the same job runs on
Spark Connect and on clusters without RDD access. This module holds both sides of
that exchange: the driver's submit-and-collect (``run_pickled``) and the executor's
Arrow adapter (``map_pickled``), which calls plain Python (``distcp.copying.task``,
``distcp.copying.join``) that never imports pyspark itself.

An item may have a million results (an archive's members), so the executor never
holds an item's results together: it pickles them one by one as the item yields
them, into rows of at most ROW_BYTES, and sends the rows in Arrow batches of about
BATCH_BYTES. A row's payload is a run of pickles read back with one Unpickler.
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import Any

from distcp import collection
from distcp.spark.interrupts import interrupted
from distcp.spark.pandasprobe import skip_pandas_probe
from distcp.spark.schemas import known, local_frame, range_schema, struct

#: Rows sent: an item's id and its pickle.
ITEM_SCHEMA = "unit_id long, payload binary"
#: Rows returned: an item's id and pickles of some of its results, one after another.
RESULT_SCHEMA = "unit_id long, results binary"
#: Pickled bytes of results per row, and of rows per Arrow batch sent (about).
ROW_BYTES = 256 << 10
BATCH_BYTES = 1 << 20

#: Runs one Arrow batch's items (unpickled): the results of each item, in order; each
#: item's are read to the end before the next item's are asked for.
BatchRunner = Callable[[list[Any]], Iterable[Iterable[Any]]]
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
        df = local_frame(spark, [(n, pickle.dumps(item)) for n, item in items], ITEM_SCHEMA)
        try:
            rows = df.mapInArrow(partial(map_pickled, runner), struct(RESULT_SCHEMA)).collect()
        except Exception as exc:
            if interrupted():  # the gateway broken by Ctrl-C, not a failed job
                raise KeyboardInterrupt from exc
            raise
    return _drained(rows)


def _drained(rows: list[Any]) -> list[Any]:
    """The results of ``rows``, each row dropped once read: the pickles (a few hundred
    MiB for a million files) are let go while the results they hold are made, so the two
    are never all in memory at once."""
    rows.reverse()
    results: list[Any] = []
    while rows:
        results.extend(unpickled(rows.pop()["results"]))
    return results


def unpickled(payload: bytes) -> Iterator[Any]:
    """The results of one row, as ``pickled_rows`` wrote them."""
    reader = pickle.Unpickler(io.BytesIO(payload))
    while True:
        try:
            yield reader.load()
        except EOFError:
            return


def _one_task_each(spark: Any, count: int) -> AbstractContextManager[None]:
    """One partition, hence one task, per item; the session's setting put back after."""
    return session_setting(spark, _PARALLELISM_KEY, str(count))


@contextmanager
def session_setting(spark: Any, key: str, value: str) -> Iterator[None]:
    """The session's ``key`` set to ``value`` for the block, its own value put back after."""
    previous = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    except KeyboardInterrupt:
        # Not put back: Ctrl-C may have broken the gateway mid-call, and a failing call
        # here would replace the interrupt with a Py4JError that fails every file (the
        # session is ended after an interrupt anyway).
        raise
    except BaseException:
        _put_back(spark, key, previous)
        raise
    _put_back(spark, key, previous)


def _put_back(spark: Any, key: str, previous: str | None) -> None:
    if previous is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, previous)


def map_pickled(runner: RunnerFactory, batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow`` function (executor side): unpickle each batch's items, run them,
    and yield their results, pickled, in rows under the items' ids as they come."""
    skip_pandas_probe()
    run = runner(attempt_id())
    with collection.paused():  # one result per file, none in a cycle (distcp.collection)
        for batch in batches:
            ids = batch.column("unit_id").to_pylist()
            items = [pickle.loads(p) for p in batch.column("payload").to_pylist()]
            rows: list[tuple[int, bytes]] = []
            size = 0
            for item_id, results in zip(ids, run(items)):
                for payload in pickled_rows(results):
                    rows.append((item_id, payload))
                    size += len(payload)
                    if size >= BATCH_BYTES:
                        yield _record_batch(rows)
                        rows, size = [], 0
            if rows:
                yield _record_batch(rows)


def pickled_rows(results: Iterable[Any], row_bytes: int = ROW_BYTES) -> Iterator[bytes]:
    """``results`` pickled one by one into payloads of about ``row_bytes`` each (one
    Pickler per payload: repeated strings, such as the dataset, are written once)."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, pickle.HIGHEST_PROTOCOL)
    for result in results:
        pickler.dump(result)
        if buffer.tell() >= row_bytes:
            yield buffer.getvalue()
            buffer = io.BytesIO()
            pickler = pickle.Pickler(buffer, pickle.HIGHEST_PROTOCOL)
    if buffer.tell():
        yield buffer.getvalue()


def _record_batch(rows: list[tuple[int, bytes]]) -> Any:
    import pyarrow as pa

    return pa.RecordBatch.from_arrays(
        [pa.array([i for i, _ in rows], pa.int64()), pa.array([p for _, p in rows], pa.binary())],
        names=["unit_id", "results"])


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


#: Runs one item (unpickled) on the executor and yields Arrow record batches of the
#: frame's schema.
FrameRunner = Callable[[Any], Iterator[Any]]


def frame_of(spark: Any, items: Sequence[Any], runner: FrameRunner, schema: str) -> Any:
    """A DataFrame of ``schema`` made by running each item in a task of its own.

    Unlike ``run_pickled`` nothing is collected: the result stays distributed for the
    next job (a listing joined with another). One partition per item comes from
    ``spark.range`` itself, so it holds whenever the frame is evaluated (a session
    setting would have to outlive this call); the items travel in the function's
    closure, so keep them small (a listing task is a few hundred bytes).
    """
    payloads = [pickle.dumps(item) for item in items]
    ids = known(spark.range(0, len(payloads), 1, max(1, len(payloads))), range_schema())
    return ids.mapInArrow(partial(map_frame, runner, payloads), struct(schema))


def map_frame(runner: FrameRunner, payloads: Sequence[bytes], batches: Iterator[Any]
              ) -> Iterator[Any]:
    """``mapInArrow`` function of ``frame_of`` (executor side): run the items whose ids
    the batches hold, yielding their batches as they come (memory bounded by one)."""
    with collection.paused():  # listing and copy tasks: one row per entry, no cycles
        for batch in batches:
            for item_id in batch.column(0).to_pylist():
                yield from runner(pickle.loads(payloads[item_id]))
