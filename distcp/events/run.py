"""The run's own events: START when it begins, COMPLETE or FAIL when it ends (driver).

Sent on the driver around the run (a dry run sends none). Before START, what earlier
runs could not deliver is sent from the outbox, so a consumer receives events in the
order they happened.

An event is made when it is delivered: START to the default log waits for the state
folder, which a run that never makes it never makes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any, Self

from distcp.events import model
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
    return model.run_event(state, job_id, destination, sources, error, at)
