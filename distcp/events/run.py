"""The run's own events: START when it begins, COMPLETE or FAIL when it ends (driver).

Sent on the driver around the run (a dry run sends none). Before START, what earlier
runs could not deliver is sent from the outbox, so a consumer receives events in the
order they happened.

The OpenLineage client that makes the events takes about 0.2 s to import, a tenth of a
small copy on the warm engine. An event is therefore made when it is delivered (START
to the default log waits for the state folder anyway), and ``import_ahead`` imports the
client in a thread while the driver only waits for the copy tasks.
"""

from __future__ import annotations

import datetime as dt
import importlib
import sys
import threading
from collections.abc import Mapping, Sequence
from contextlib import suppress
from functools import partial
from types import TracebackType
from typing import Any, Self

from distcp.events.sinks import EventSink
from distcp.summary import Summary


class RunEvents:
    """``with RunEvents(...) as events: return events.end(run())``: a run that raises
    sends FAIL with the error's text."""

    def __init__(self, sink: EventSink, job_id: str, destination: str,
                 sources: Sequence[str], enabled: bool = True) -> None:
        self.sink, self.job_id, self.enabled = sink, job_id, enabled
        self.destination, self.sources = destination, list(sources)
        self.ended = False

    def __enter__(self) -> Self:
        if self.enabled:
            self.sink.flush()
            self._send("START")
        return self

    def end(self, summary: Summary) -> Summary:
        """COMPLETE when every file was published, else FAIL naming the first failure."""
        if summary.ok:
            self._send("COMPLETE")
        else:
            failures = summary.failures + summary.catalog_failures
            first = f"; first: {failures[0].error}" if failures else ""
            self._send("FAIL", f"{summary.files_failed} file(s) and "
                               f"{len(summary.catalog_failures)} registration(s) failed{first}")
        return summary

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None and not self.ended:
            self._send("FAIL", f"{type(exc).__name__}: {exc}")

    def _send(self, state: str, error: str | None = None) -> None:
        if not self.enabled:
            return
        self.ended = state != "START"
        at = dt.datetime.now(dt.UTC).isoformat()  # when it happened, not when it is made
        self.sink.send(f"{self.job_id}-{state.lower()}",
                       partial(_run_event, state, self.job_id, self.destination,
                               tuple(self.sources), error, at))


def _run_event(state: str, job_id: str, destination: str, sources: Sequence[str],
               error: str | None, at: str) -> Mapping[str, Any]:
    from distcp.events import model  # the OpenLineage client: imported when used

    return model.to_dict(model.run_event(state, job_id, destination, sources, error, at))


_ahead = threading.Lock()


def import_ahead() -> None:
    """Import the OpenLineage client in a daemon thread, once per process: called when
    the driver is about to wait for the copy tasks, so that the import's CPU is spent
    while the main thread holds no GIL. A failed import is only tried again (and
    reported) where an event is made."""
    if "distcp.events.model" in sys.modules or not _ahead.acquire(blocking=False):
        return
    threading.Thread(target=_import_quietly, name="pydistcp-events-import",
                     daemon=True).start()


def _import_quietly() -> None:
    with suppress(Exception):  # made again, and reported, where an event is made
        importlib.import_module("distcp.events.model")
