"""CommitStepStore: the write-ahead log of commit sequences (driver).

A sequence is written (atomically) before its first step runs and removed
after its last one succeeded; whatever is found here at the start of a run is
unfinished work, replayed before anything new is copied (Gobblin's exactly-once
publisher). One document per file set: the log stays O(file sets), not O(files).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

# every step kind is registered for from_dict: a replay runs in a process that
# imported nothing else of the commit stage
import distcp.commit.catalog_steps
import distcp.commit.iceberg_steps
import distcp.commit.kept_steps
import distcp.commit.move_steps
import distcp.commit.state_steps
import distcp.commit.upload_steps  # noqa: F401
from distcp.commit.steps import CommitSequence
from distcp.errors import StateError
from distcp.faults import crash_point
from distcp.state.layout import StateLayout
from distcp.state.store import read_json
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage import writes as writeopts
from distcp.storage.atomic import write_atomic_pieces
from distcp.storage.spec import written_url


@dataclass(frozen=True)
class PendingSequence:
    sequence: CommitSequence
    job_id: str
    replays: int
    url: str


class CommitStepStore:
    """``commits/`` (pending) and ``commits/aside/`` (given up after --max-replays)."""

    def __init__(self, state_root: str, options: dict[str, Any]) -> None:
        self.layout = StateLayout(state_root)
        self.root = self.layout.commits()
        self.options = options
        #: By job, the sequences this store wrote (or tried to) and has not removed since,
        #: and whether it set any aside or moved an unread entry: ``left_by``.
        self._written: dict[str, set[str]] = {}
        self._aside: set[str] = set()
        self._unread = False

    def url_of(self, sequence_id: str, aside: bool = False) -> str:
        return self.layout.commit(sequence_id, aside)

    def persist(self, sequence: CommitSequence, job_id: str, replays: int = 0) -> None:
        """Write ``sequence``'s entry; one that has no write options recorded yet gets
        this run's (``CommitSequence.writes``): a replay keeps the planning run's."""
        if sequence.writes is None:
            sequence = replace(sequence, writes=writeopts.of(self.options))
        self._written.setdefault(job_id, set()).add(sequence.id)  # even if the write fails
        crash_point("before_persist")
        write_atomic_pieces(self.url_of(sequence.id), _document(sequence, job_id, replays),
                            self.options)
        crash_point("after_persist")

    def remove(self, sequence_id: str) -> None:
        crash_point("before_remove")
        storage_for(self.root, self.options).remove_file(self.url_of(sequence_id))
        for ids in self._written.values():
            ids.discard(sequence_id)

    def left_by(self, job_id: str) -> bool:
        """Whether the log may still hold an entry of ``job_id``, as far as this store
        knows without a listing: False only when every entry of that job it wrote was
        removed again, and it set none aside nor moved an unread one. A run's own entries
        are written by its publishing's store alone, under the destination's lock, so at
        its end False is exact for its job (``run.pipeline``'s sweep needs no listing)."""
        return bool(self._written.get(job_id)) or job_id in self._aside or self._unread

    def set_aside(self, pending: PendingSequence) -> None:
        self._aside.add(pending.job_id)
        write_atomic_pieces(self.url_of(pending.sequence.id, aside=True),
                            _document(pending.sequence, pending.job_id, pending.replays),
                            self.options)
        self.remove(pending.sequence.id)

    def set_aside_unread(self, pending: PendingSequence) -> str:
        """Move a log entry aside as it is, under its own file name (never one its
        content gives): an entry that names paths outside the run's roots is not
        rewritten, not executed, and kept for a person to inspect."""
        self._unread = True
        name = pending.url.rstrip("/").rsplit("/", 1)[-1]
        aside = written_url(self.layout.commit(name.removesuffix(".json"), aside=True),
                                   self.options)
        storage_for(self.root, self.options).set_aside(pending.url, aside)
        return aside

    def pending(self, aside: bool = False) -> list[PendingSequence]:
        """Unfinished sequences, oldest job first."""
        folder = written_url(self.layout.commits(aside), self.options)
        try:
            names = [n for n in storage_for(folder, self.options).names(folder)
                     if n.endswith(".json")]
        except FileNotFoundError:
            return []
        return [self._load(fsutil.join(folder, n)) for n in names]

    def unfinished(self) -> list[PendingSequence]:
        """The pending sequences, then those set aside: what still refers to staged
        copies and uploads (two listings, which a sweep takes once for all its uses)."""
        pending, aside = self.pending_and_aside()
        return pending + aside

    def pending_and_aside(self) -> tuple[list[PendingSequence], list[PendingSequence]]:
        """The pending sequences and those set aside, listed at once on an object store,
        where each listing is a round trip."""
        found: dict[bool, list[PendingSequence]] = {}
        storage_for(self.root, self.options).for_each(
            (False, True), lambda aside: found.__setitem__(aside, self.pending(aside)))
        return found[False], found[True]

    def _load(self, url: str) -> PendingSequence:
        data = read_json(url, self.options, "commit log entry")
        try:
            return PendingSequence(CommitSequence.from_dict(data), data["job_id"],
                                   int(data.get("replays", 0)), url)
        except (KeyError, TypeError, ValueError, StateError) as exc:
            raise StateError(
                f"corrupt commit log entry {fsutil.display(url)}: {exc}; no data was changed. "
                "Inspect it, then move it out of the state directory and run again",
                path=url) from exc


def _document(sequence: CommitSequence, job_id: str, replays: int) -> Iterator[bytes]:
    """A sequence's log entry, compact JSON, in pieces: a file set's entries are most of
    it, and a set of a million files makes hundreds of MiB that are never held whole."""
    body = {"version": 1, "job_id": job_id, "replays": replays, **sequence.to_dict()}
    return (piece.encode() for piece in json_pieces(body))


#: Entries of a long list encoded at once (a slice's JSON is about a MiB).
SLICE = 4096


def json_pieces(value: Any) -> Iterator[str]:
    """``json.dumps(value, separators=(",", ":"))`` in pieces: a list longer than SLICE
    is encoded a slice at a time, anything else at once (json's C encoder)."""
    if isinstance(value, dict):
        yield "{"
        for n, (key, item) in enumerate(value.items()):
            yield ("," if n else "") + json.dumps(str(key)) + ":"
            yield from json_pieces(item)
        yield "}"
    elif isinstance(value, (list, tuple)) and len(value) > SLICE:
        yield "["
        for n in range(0, len(value), SLICE):
            part = json.dumps(value[n:n + SLICE], separators=(",", ":"))
            yield ("," if n else "") + part[1:-1]
        yield "]"
    else:
        yield json.dumps(value, separators=(",", ":"))
