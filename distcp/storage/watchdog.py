"""The bound of one remote operation, all its retries included (driver and executor).

A server that stops answering must not hang a run: every remote request of a backend
that can hang (S3's, through s3fs and the lean path) runs under a watchdog of
``watchdog_seconds()``. The driver reads the bound once per run
(``PYDISTCP_S3_TIMEOUT``, the name users know) into ``TaskSpec.request_timeout``;
tasks run ``bounded_by`` it, so executors never read their own environment per
request.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager

#: Seconds one remote operation (all its retries) may take before it is abandoned as
#: hung; ``PYDISTCP_S3_TIMEOUT`` overrides it (tests set a few seconds).
WATCHDOG_S = 300.0
TIMEOUT_ENV = "PYDISTCP_S3_TIMEOUT"

#: The bound the running task was given (``bounded_by``); empty outside tasks.
_TASK_BOUND: list[float] = []


def watchdog_seconds() -> float:
    """The bound of one remote operation: the task's (``bounded_by``), else
    ``PYDISTCP_S3_TIMEOUT`` if it is a positive number, else WATCHDOG_S."""
    if _TASK_BOUND:
        return _TASK_BOUND[-1]
    raw = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        return WATCHDOG_S
    return value if value > 0 and math.isfinite(value) else WATCHDOG_S


@contextmanager
def bounded_by(seconds: float | None) -> Iterator[None]:
    """Run a task with the bound the driver read (None: the environment's, as before).

    Executors then never read the environment per request; the bound is the same for
    every thread of the task (its copy threads, its progress ticker).
    """
    if seconds is None:
        yield
        return
    _TASK_BOUND.append(seconds)
    try:
        yield
    finally:
        _TASK_BOUND.pop()
