"""A task attempt's progress counters and journal of verified copies (driver and executor).

Both are small files next to the staging area, written at most once a second. The
journal is what lets a run killed mid-copy keep the copies its tasks finished
(``distcp.commit.replay.read_journal`` reads it; ``journal_records`` gives its form).
Its records are never all held in memory: ordinary files' records wait at most
INTERVAL_S for the next segment, and a file of many outputs (an archive) gets a
segment of its own, written as its results are read back from their spill file
(``distcp.copying.outputs``).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import fields
from operator import attrgetter
from typing import Any

from distcp import request_count
from distcp.copying.outputs import Outputs
from distcp.copying.sources import LIVE_READERS
from distcp.copying.taskspec import TaskSpec
from distcp.model import CopyableFile, TaskResult
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for

#: Names of journal segments among the progress files.
JOURNAL = re.compile(r"\.j\d+\.json$")

#: The journal's encoder: its records are tuples and lists of plain values, made here,
#: which cannot refer to themselves (no check for cycles: 1.47 -> 1.24 µs a record).
_JSON = json.JSONEncoder(check_circular=False)

#: Bytes of a streamed journal segment written at a time.
_CHUNK = 1 << 20


class Progress:
    """This attempt's counters and journal, written at most once a second.

    The counters (``u<unit>-<attempt>.json``) feed the driver's progress bar: a
    small file on the destination filesystem works wherever executors run
    (cluster, Spark Connect), unlike accumulators, which arrive only at task end
    and may be applied twice. The journal segments (``....j<k>.json``) list the
    verified staged copies, so that a run killed mid-copy leaves copies the next
    run can recover instead of reading the source again.
    """

    INTERVAL_S = 1.0

    def __init__(self, spec: TaskSpec, unit_id: int, attempt: str) -> None:
        self.prefix = fsutil.join(spec.progress_root, f"u{unit_id}-{attempt}")
        self.options = spec.dst_options
        #: Each document written is one request on an object store (counted as "progress").
        self.remote = not storage_for(self.prefix, self.options).capabilities.local_paths
        self.files = 0
        self.bytes = 0
        self.segment = 0
        self.pending: list[tuple[str, list[tuple[Any, ...]]]] = []
        self.last = time.monotonic()
        self._lock = threading.Lock()

    def advance(self, file: CopyableFile, results: Outputs) -> None:
        """Count ``file`` done and journal its results if every one is a verified copy."""
        verified = results.verified()
        with self._lock:
            self.files += 1
            self.bytes += file.origin.size
            if verified is not None:
                self.pending.append((file.destination, [_result_values(r) for r in verified]))
        if verified is None and results.spilled and results.all_ok:
            self._journal_alone(file.destination, results)
        if time.monotonic() - self.last >= self.INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        """Write the journal's new records and the counters; the bytes include what the
        files still being read have read so far (a big file moves the bar while it is
        copied, not only when it is done)."""
        with self._lock:
            self.last = time.monotonic()
            pending, self.pending = self.pending, []
            reading = sum(r.count for r in list(LIVE_READERS) if not r.closed)
            counters = {"files": self.files, "bytes": self.bytes + reading}
            segment = self._next_segment() if pending else -1
        try:
            if pending:
                self._write(f"{self.prefix}.j{segment}.json", _JSON.encode(
                    {"fields": _RESULT_FIELDS, "records": pending}).encode())
            self._write(f"{self.prefix}.json", json.dumps(counters).encode())
        except OSError:
            pass  # advisory; the driver's collected results are what gets published

    def _next_segment(self) -> int:
        segment, self.segment = self.segment, self.segment + 1
        return segment

    def _journal_alone(self, planned: str, results: Outputs) -> None:
        """One segment holding the record of one file of many outputs, streamed from
        its spill; it appears whole or not at all (a segment cut short is ignored)."""
        with self._lock:
            segment = self._next_segment()
        try:
            written = storage_for(self.prefix, self.options).write_streamed(
                f"{self.prefix}.j{segment}.json", _chunks(_record_json(planned, results)))
        except (OSError, ValueError, NotImplementedError):
            return  # advisory, as in flush: the archive is copied again after a crash
        if self.remote:
            request_count.count("progress", 2 + written // _CHUNK)

    @contextmanager
    def ticking(self) -> Iterator[None]:
        """Flush every INTERVAL_S from a thread while the task copies: without it, a
        task busy with one big file reports nothing until that file is done."""
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(self.INTERVAL_S):
                if time.monotonic() - self.last >= self.INTERVAL_S:
                    self.flush()

        ticker = threading.Thread(target=tick, name="pydistcp-progress", daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()

    def _write(self, url: str, data: bytes) -> None:
        """A progress document, replaced whole (the driver polls it while it is written)."""
        if self.remote:
            request_count.count("progress")
        storage_for(self.prefix, self.options).write_atomic_pieces(
            url, (data,), durable=False, make_folder=False)


def _record_json(planned: str, results: Iterable[TaskResult]) -> Iterator[str]:
    """A segment of one record (``journal_records`` reads the form), piece by piece."""
    yield f'{{"fields": {json.dumps(_RESULT_FIELDS)}, "records": [[{json.dumps(planned)}, ['
    for n, r in enumerate(results):
        yield (", " if n else "") + json.dumps(_result_values(r))
    yield "]]]}"


def _chunks(pieces: Iterable[str]) -> Iterator[bytes]:
    """``pieces`` encoded and gathered into writes of about _CHUNK bytes."""
    buffer: list[str] = []
    size = 0
    for piece in pieces:
        buffer.append(piece)
        size += len(piece)
        if size >= _CHUNK:
            yield "".join(buffer).encode()
            buffer, size = [], 0
    if buffer:
        yield "".join(buffer).encode()


_RESULT_FIELDS = tuple(f.name for f in fields(TaskResult))
#: The fields every result sets (those without a default, then a copy's own); a
#: journal row stops after them when the rest hold their defaults, as a plain copy's
#: do: half the JSON, 2.0 -> 1.3 µs a result (Intel Xeon, 2026-12-04).
_HEAD = _RESULT_FIELDS.index("checksum") + 1
_HEAD_VALUES = attrgetter(*_RESULT_FIELDS[:_HEAD])
_TAIL_VALUES = attrgetter(*_RESULT_FIELDS[_HEAD:])
_TAIL_DEFAULTS = tuple(f.default for f in fields(TaskResult)[_HEAD:])


def _result_values(result: TaskResult) -> tuple[Any, ...]:
    """A result's journal row: its values in ``_RESULT_FIELDS``' order, the tail left
    off where it holds the defaults (``journal_records`` gives them back)."""
    tail = _TAIL_VALUES(result)
    head: tuple[Any, ...] = _HEAD_VALUES(result)
    return head if tail == _TAIL_DEFAULTS else head + tail


def journal_records(segment: Any) -> Iterator[tuple[str, list[TaskResult]]]:
    """(planned destination, results) of each record of a parsed journal segment.

    A segment names the result fields once, ``{"fields": [...], "records": [[planned,
    [[values...], ...]], ...]}``: a dict per result cost three times as much to build
    and write (9.4 against 3.2 µs a file) and twice the bytes. Segments of earlier
    versions, ``[{"planned": ..., "results": [{field: value}, ...]}, ...]``, still read:
    a run killed before an upgrade keeps its copies."""
    if isinstance(segment, dict):
        names = segment["fields"]
        for planned, rows in segment["records"]:
            yield planned, [_result(zip(_named(names, row), row, strict=True)) for row in rows]
        return
    for record in segment:
        yield record["planned"], [_result(r.items()) for r in record["results"]]


def _named(names: list[str], row: list[Any]) -> list[str]:
    """The names of a row's values: the first ``len(row)`` fields (a row may leave off
    the fields after a copy's own, which then take their defaults), never fewer than a
    result must have."""
    if len(row) > len(names) or len(row) < min(_HEAD, len(names)):
        raise ValueError(f"a journal row of {len(row)} values for {len(names)} fields")
    return names[:len(row)]


def _result(items: Iterable[tuple[str, Any]]) -> TaskResult:
    """A TaskResult from JSON's values: its tuples (parts, requests) came back as lists."""
    return TaskResult(**{k: _tupled(v) for k, v in items})


def _tupled(value: Any) -> Any:
    return tuple(_tupled(v) for v in value) if isinstance(value, list) else value
