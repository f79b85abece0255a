"""``--log-file``: one JSON line per decision and per outcome of a run (driver).

The summary counts; this log names. A scheduler or an auditor reads which file was
copied, skipped, deleted or failed and why, without parsing the human output:
``{"time": ..., "job_id": ..., "event": "copied", "path": SRC, "destination": DST, ...}``.

Events: ``decision`` (``action`` copy/skip/delete and the planner's ``reason``) for
every planned entry, then the outcomes: ``copied``, ``failed`` (``reason``: the
error), ``not-published`` (verified but its file set failed: kept for the next run),
``deleted``, and ``not-copied`` for source entries the listing left out (links,
special files). Lines are appended and flushed one by one, so a killed run leaves a
log of what it decided and did up to that moment. Written on the driver only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any

from distcp.storage.filesystems import display

if TYPE_CHECKING:
    from distcp.model import TaskResult
    from distcp.planning.plan import Plan
    from distcp.storage.filesystems import Skipped


class RunLog:
    """Appends events to ``path``; with no path every call does nothing."""

    def __init__(self, path: str | None, job_id: str) -> None:
        self.job_id = job_id
        self._out: IO[str] | None = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115

    def event(self, event: str, **fields: Any) -> None:
        if self._out is None:
            return
        record = {"time": round(time.time(), 3), "job_id": self.job_id, "event": event}
        record.update({k: v for k, v in fields.items() if v not in (None, "")})
        self._out.write(json.dumps(record, sort_keys=False) + "\n")
        self._out.flush()

    def plan(self, plan: Plan) -> None:
        """Every decision of the planner, with its reason."""
        if self._out is None:
            return
        for dataset in plan.datasets:
            for action, actions in (("copy", dataset.copy), ("skip", dataset.skip)):
                for a in actions:
                    self.event("decision", action=action, path=display(a.file.origin.url),
                               destination=display(a.file.destination), reason=a.reason,
                               bytes=a.file.origin.size)
            for url in dataset.delete:
                self.event("decision", action="delete", destination=display(url),
                           reason="not in source")

    def not_copied(self, entries: Iterable[Skipped]) -> None:
        for e in entries:
            self.event("failed" if e.failure else "not-copied", path=display(e.path),
                       reason=e.reason)

    def results(self, event: str, results: Iterable[TaskResult]) -> None:
        """``copied``/``not-published`` for staged outputs, ``failed`` for failures."""
        for r in results:
            if not r.ok:
                self.event("failed", path=display(r.origin), destination=display(r.destination),
                           reason=r.message)
            elif r.staging:
                self.event(event, path=display(r.origin), destination=display(r.destination),
                           bytes=r.bytes_written, checksum=r.checksum,
                           recovered=r.attempt == "recovered" or None)

    def deleted(self, urls: Iterable[str]) -> None:
        for url in urls:
            self.event("deleted", destination=display(url))

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None


#: For code that takes a log but is called without one.
NO_LOG = RunLog(None, "")
