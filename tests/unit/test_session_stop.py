"""A local run's end does not wait for PySpark's accumulator server (0.9 s of every
cold run's end here: its handler polls the JVM's connection once a second).

The session is a stand-in with the two attributes ``_stop`` touches: a real
SparkContext's stop is what every cold end-to-end test does.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from distcp.spark.session import _stop


class SlowServer:
    """An accumulator server whose shutdown waits until the test lets it go."""

    def __init__(self) -> None:
        self.release, self.closed = threading.Event(), threading.Event()

    def shutdown(self) -> None:
        assert self.release.wait(30)
        self.closed.set()


def test_stop_returns_while_the_accumulator_server_still_closes() -> None:
    server = SlowServer()
    stopped: list[Any] = []
    sc = SimpleNamespace(_accumulatorServer=server)
    spark = SimpleNamespace(_sc=sc, stop=lambda: stopped.append(sc._accumulatorServer))
    _stop(spark, "unused.log")
    assert stopped == [None]  # PySpark's stop no longer finds it to wait for
    assert not server.closed.is_set()
    server.release.set()
    assert server.closed.wait(30)  # and it still closes, in the background


def test_a_session_without_one_stops_as_before() -> None:
    stopped: list[bool] = []
    _stop(SimpleNamespace(stop=lambda: stopped.append(True)), "unused.log")
    assert stopped == [True]
