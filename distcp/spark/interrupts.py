"""Ctrl-C while a Spark session runs: a plain KeyboardInterrupt, remembered (driver).

An interrupt reaches the main thread wherever it waits, often inside a py4j call,
and the call that follows it through the same gateway can fail with a Py4JError
("Answer from Java side is empty"). Such a failure is the interrupt's echo, not a
failed job: the flag lets the one place that submits jobs tell the two apart, so
a Ctrl-C always ends the run with exit 130, never with every file "failed".
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_INTERRUPTED = threading.Event()


def interrupted() -> bool:
    """Whether Ctrl-C reached this process while a session ran."""
    return _INTERRUPTED.is_set()


def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    _INTERRUPTED.set()
    raise KeyboardInterrupt


@contextmanager
def plain_interrupts() -> Iterator[None]:
    """Ctrl-C as a plain (remembered) KeyboardInterrupt while our session runs.

    PySpark's SIGINT handler calls ``cancelAllJobs`` through the gateway the main thread
    is blocked in; py4j then logs the reentrant call's tracebacks on the root logger
    (``logging.exception``: tens of lines on stderr, kept off the terminal by
    ``spark.session``). We end the JVM ourselves on interrupt, so raising is enough.
    """
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _on_interrupt) if main else None
    try:
        yield
    finally:
        if main and previous is not None:
            signal.signal(signal.SIGINT, previous)
