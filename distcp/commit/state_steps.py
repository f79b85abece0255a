"""Commit steps that change dataset state or tell the world about published data.

Each is idempotent by a marker: the sequence id is recorded in the state it
changed (or the event file is named after it), so a replay after a crash
between execute and removal of the sequence changes nothing twice.
"""

from __future__ import annotations

import json
import logging
import time
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from distcp.commit.state import DatasetState, StateStore, write_atomic
from distcp.commit.steps import CommitContext, CommitStep
from distcp.storage import filesystems as fsutil

events_log = logging.getLogger("pydistcp.events")


@dataclass(frozen=True)
class _StateChange(CommitStep):
    """A change to one dataset's state, idempotent by its marker: the sequence id and
    the step's suffix, recorded in the state in the same save as the change, so that
    neither a replay (verify) nor a second execute applies it twice."""

    marker_suffix: ClassVar[str] = ""
    sequence_id: str
    urn: str

    @property
    def marker(self) -> str:
        return f"{self.sequence_id}:{self.marker_suffix}"

    def verify(self, ctx: CommitContext) -> bool:
        return self.marker in _store(ctx).load(self.urn).applied

    def execute(self, ctx: CommitContext) -> None:
        store = _store(ctx)
        state = store.load(self.urn)
        if self.marker in state.applied:
            return  # applied already: applying again would record the sequence twice
        self.apply(state)
        state.applied.append(self.marker)
        store.save(state)

    @abstractmethod
    def apply(self, state: DatasetState) -> None:
        """Change ``state`` in memory; ``execute`` marks and saves it."""


@dataclass(frozen=True)
class AdvanceWatermark(_StateChange):
    """Merge the published files into the manifest and move the watermark forward.

    ``entries`` are (destination, size, origin mtime, digest, guid); ``removed``
    are destinations deleted by this sequence. The watermark (newest origin
    mtime published) only ever grows, and only here, next to its data.
    """

    kind: ClassVar[str] = "watermark"
    marker_suffix: ClassVar[str] = "wm"
    watermark: float | None
    entries: tuple[tuple[str, int, float, str, str], ...]
    removed: tuple[str, ...] = ()

    def apply(self, state: DatasetState) -> None:
        for dest in self.removed:
            state.manifest.pop(dest, None)
        for dest, size, mtime, digest, guid in self.entries:
            state.manifest[dest] = [size, mtime, digest, guid]
        if self.watermark is not None:
            state.watermark = max(state.watermark or self.watermark, self.watermark)


@dataclass(frozen=True)
class RecordRun(_StateChange):
    """Append this run's outcome for the dataset to its history."""

    kind: ClassVar[str] = "record-run"
    marker_suffix: ClassVar[str] = "run"
    job_id: str
    file_set: str
    status: str
    files: int
    nbytes: int
    started: float

    def apply(self, state: DatasetState) -> None:
        state.runs.append({"job_id": self.job_id, "file_set": self.file_set,
                           "status": self.status, "files": self.files, "bytes": self.nbytes,
                           "started": self.started, "ended": time.time()})


@dataclass(frozen=True)
class EmitEvent(CommitStep):
    """Data-availability event: a JSON document under ``events/`` and a log line.

    The document is named after the sequence, so a replay emits it once.
    """

    kind: ClassVar[str] = "event"
    sequence_id: str
    urn: str
    file_set: str
    destination_root: str
    files: int
    nbytes: int

    def url(self, ctx: CommitContext) -> str:
        return fsutil.join(ctx.state_root, "events", f"{self.sequence_id}.json")

    def verify(self, ctx: CommitContext) -> bool:
        fs, path = ctx.fs(self.url(ctx))
        return bool(fs.exists(path))

    def execute(self, ctx: CommitContext) -> None:
        body: dict[str, Any] = {"event": "data_available", "dataset": self.urn,
                                "file_set": self.file_set, "files": self.files,
                                "bytes": self.nbytes, "destination": self.destination_root,
                                "time": time.time()}
        write_atomic(self.url(ctx), json.dumps(body).encode(), ctx.dst_options)
        events_log.info("data available: %s", json.dumps(body, sort_keys=True))


def _store(ctx: CommitContext) -> StateStore:
    return StateStore(ctx.state_root, ctx.dst_options, ctx.state_cache)
