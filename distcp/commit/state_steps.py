"""Commit steps that change dataset state or tell the world about published data (driver).

Each is idempotent by a marker: the sequence id is recorded in the state it
changed (or the event file is named after it), so a replay after a crash
between execute and removal of the sequence changes nothing twice. The manifest's
segment is written before the document that lists it: a crash between the two
leaves a file no document lists, written again (same name, same rows) by the replay.
"""

from __future__ import annotations

import json
import logging
import time
from abc import abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from distcp.checksum import ALGORITHM
from distcp.commit.steps import CommitContext, CommitStep, save_changed
from distcp.datasets.partitions import advance
from distcp.events import model
from distcp.events.sinks import EventSink
from distcp.faults import crash_point
from distcp.state.bounds import NAME
from distcp.state.manifest import COMPACT_AFTER, Entry
from distcp.state.store import DatasetState, StateStore, write_atomic

events_log = logging.getLogger("pydistcp.events")


@dataclass(frozen=True)
class _StateChange(CommitStep):
    """A change to one dataset's state, idempotent by its marker: the sequence id and
    the step's suffix, recorded in the state in the same save as the change, so that
    neither a replay (verify) nor a second execute applies it twice."""

    marker_suffix: ClassVar[str] = ""
    changes_state: ClassVar[bool] = True
    sequence_id: str
    urn: str

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        """None of its own: the state document and segments it writes are named by the
        dataset's URN through a digest (``StateStore``), never by a path in the record."""
        return iter(())

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
        self.apply(state, store)
        state.applied.append(self.marker)
        if ctx.unsaved is None:
            store.save(state)
        else:  # saved with the state steps after it, in one write (``CommitSequence.run``)
            ctx.unsaved[self.urn] = lambda: store.save(state)

    @abstractmethod
    def apply(self, state: DatasetState, store: StateStore) -> None:
        """Change ``state`` (writing what it lists, like a manifest segment);
        ``execute`` marks and saves it."""


@dataclass(frozen=True)
class AppendManifest(_StateChange):
    """Record the published files (and the deleted ones) in the dataset's manifest:
    one Parquet segment of this file set's entries, listed by the state document.

    ``entries`` are (destination, size, origin mtime, digest, guid); ``removed``
    are destinations deleted by this sequence. Earlier file sets' entries are not
    rewritten: publishing costs what the file set holds, not what the dataset holds.
    """

    kind: ClassVar[str] = "manifest-segment"
    marker_suffix: ClassVar[str] = "mf"
    entries: tuple[Entry, ...]
    removed: tuple[str, ...] = ()

    def apply(self, state: DatasetState, store: StateStore) -> None:
        store.append_segment(state, self.sequence_id, self.entries, self.removed)


@dataclass(frozen=True)
class CompactManifest(CommitStep):
    """Merge the dataset's newest manifest segments once there are more than
    ``threshold`` (``StateStore.compact``: merged file, then the document, then the
    old files). Done when the document lists no more than ``threshold`` segments and
    no replaced file still to remove."""

    kind: ClassVar[str] = "compact-manifest"
    changes_state: ClassVar[bool] = True  # reads the cached state; saves when it merges
    urn: str
    threshold: int = COMPACT_AFTER

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        return iter(())  # the dataset's own state, found by its URN's digest

    def verify(self, ctx: CommitContext) -> bool:
        state = _store(ctx).load(self.urn)
        # a version-1 manifest is a segment once saved, which may not have happened yet
        # (``CommitContext.unsaved``): counted as one, as a save before would have
        segments = len(state.segments) + (1 if state.legacy else 0)
        return segments <= self.threshold and not state.garbage

    def execute(self, ctx: CommitContext) -> None:
        save_changed(ctx.unsaved)  # a merge's crash safety: the document lists every segment
        store = _store(ctx)
        store.compact(store.load(self.urn), self.threshold)


@dataclass(frozen=True)
class AdvanceWatermark(_StateChange):
    """Move the watermark forward (newest origin mtime published): it only ever
    grows, and only here, next to its data.

    ``entries`` and ``removed`` are set only in sequences that an earlier version
    wrote to the commit log (the manifest was part of this step then): a replay
    records them as ``AppendManifest`` would.
    """

    kind: ClassVar[str] = "watermark"
    marker_suffix: ClassVar[str] = "wm"
    watermark: float | None
    entries: tuple[Entry, ...] = ()
    removed: tuple[str, ...] = ()

    def apply(self, state: DatasetState, store: StateStore) -> None:
        store.append_segment(state, self.sequence_id, self.entries, self.removed)
        if self.watermark is not None:
            state.watermark = max(state.watermark or self.watermark, self.watermark)


@dataclass(frozen=True)
class RecordWatermarks(_StateChange):
    """A stream dataset's watermarks after one partition's file set is published:
    this run's low and expected high, and the actual high raised to the partition
    (``published``; None for a set of no partition). After the data, in its sequence:
    the actual high never names a partition that is not published."""

    kind: ClassVar[str] = "stream-watermarks"
    marker_suffix: ClassVar[str] = "swm"
    low: float | None
    expected_high: float | None
    published: float | None

    def apply(self, state: DatasetState, store: StateStore) -> None:
        state.watermarks = advance(state.watermarks, self.low, self.expected_high,
                                   self.published)


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

    def apply(self, state: DatasetState, store: StateStore) -> None:
        state.runs.append({"job_id": self.job_id, "file_set": self.file_set,
                           "status": self.status, "files": self.files, "bytes": self.nbytes,
                           "started": self.started, "ended": time.time()})


@dataclass(frozen=True)
class EmitEvent(CommitStep):
    """Data-availability event: an OpenLineage COMPLETE of the file set, sent to the
    run's ``--events`` target (distcp.events), recorded under ``events/`` and logged.

    The record is written after the event went (or, undelivered, waits in the outbox
    for the next run's flush), so a crash before it replays the step: delivered at
    least once, always with the sequence id as its key.
    """

    kind: ClassVar[str] = "event"
    new_until_run: ClassVar[bool] = True  # its record is named after the sequence
    sequence_id: str
    urn: str
    file_set: str
    destination_root: str
    files: int
    nbytes: int
    #: The run that published the set (the event's parent run), the destination the run
    #: wrote (its job's name) and the fork branch; empty in logs of older versions.
    job_id: str = ""
    run_destination: str = ""
    branch: str = "main"

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        yield NAME, self.sequence_id  # its record's file name under events/

    def url(self, ctx: CommitContext) -> str:
        return _sink(ctx).record_url(self.sequence_id)

    def verify(self, ctx: CommitContext) -> bool:
        """Its record is there: read (one GET on an object store, where ``exists``
        asks for the key and then for a folder of that name)."""
        url = self.url(ctx)
        try:
            ctx.storage(url).read_bytes(url, "event record")
        except FileNotFoundError:
            return False
        return True

    def execute(self, ctx: CommitContext) -> None:
        state = _store(ctx).load(self.urn)
        event = model.file_set_event(
            key=self.sequence_id, job_id=self.job_id or self.sequence_id.rsplit("-", 2)[0],
            run_destination=self.run_destination or self.destination_root,
            source=self.urn, destination=self.destination_root, file_set=self.file_set,
            files=self.files, nbytes=self.nbytes, digest_algorithm=ALGORITHM,
            branch=self.branch,
            watermarks={"low": state.low_watermark,
                        "expected_high": state.expected_high_watermark,
                        "actual_high": state.actual_high_watermark})
        _sink(ctx).send(self.sequence_id, event)
        crash_point("event_sent")  # sent, not recorded: the replay sends it again, same key
        write_atomic(self.url(ctx), json.dumps(event, sort_keys=True).encode(), ctx.dst_options)
        events_log.info("data available: %s", json.dumps(
            {"dataset": self.urn, "file_set": self.file_set, "files": self.files,
             "bytes": self.nbytes, "destination": self.destination_root,
             "key": self.sequence_id}, sort_keys=True))


def _sink(ctx: CommitContext) -> EventSink:
    """The run's sink, or (``recover`` without ``--events``) the default one."""
    if isinstance(ctx.events, EventSink):
        return ctx.events
    return EventSink(None, ctx.state_root, ctx.dst_options)


def _store(ctx: CommitContext) -> StateStore:
    return StateStore(ctx.state_root, ctx.dst_options, ctx.state_cache)
