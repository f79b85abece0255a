"""Every name under a destination's state directory, in one place (driver and executor).

The state directory (``DST/.pydistcp`` unless ``--state-dir``) holds everything a run
keeps between runs. Its layout is spelled out here and nowhere else: other modules ask
a ``StateLayout`` for a folder or a document, never join a name of their own, so the
layout can be read (and changed) in one screen::

    lock                          the destination's lock (one run at a time)
    commits/<sequence>.json       pending commit sequences (the write-ahead log)
    commits/aside/<sequence>.json sequences set aside (failed replays, foreign records)
    datasets/<key>.json           each dataset's state document (watermark, runs)
    outcomes/<key>.json           each dataset's last run: ok, or failed and why
    manifests/<key>/<segment>     each dataset's manifest, in Parquet segments
    sizes/<key>.bin               its sizes and mtimes as --incremental reads them, kept
                                  until its segments change (``state.sizes``)
    staging/<job>/                a job's staged copies, results files, kept plan
    progress/<job>/               a job's progress counters and journal
    splits/<guid>/                split files' range records
    recovery/<guid>/              verified copies kept for a later publish
    recovery-aside/<guid>/        kept copies set aside (foreign records)
    events/<key>.json             events sent; events/outbox/<ns>-<key>.json: events not yet
                                  delivered, by the time they were parked;
                                  events/events.jsonl: the default local event log
    continuous/status.json        a continuous copy's status: its process, batches, lag
    continuous/waiting.json       what its source's last listing left for later batches
    continuous/checkpoint/        its Spark query's checkpoint (a local state root's)
    continuous/summary.json       what its batches published and what failed, so far
    continuous/stop.json          a stop asked of its batches (the job that asks)

Keys and guids are digests, sequence and job ids are made by the tool: no name of the
data ever becomes a name here (``distcp.state.bounds``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from distcp.storage import filesystems as fsutil
from distcp.storage.spec import written_url

#: The lock's document name (also what ``events.sinks`` leaves out of a fresh state).
LOCK = "lock"
#: The folder of the events the run sent, its outbox and the default event log.
EVENTS = "events"
#: A state directory whose entries are only these was made by a run that copied nothing.
BARE = frozenset({LOCK, EVENTS})


@dataclass(frozen=True)
class StateLayout:
    """The names under one state root (a URL or a local path, as the run wrote it)."""

    root: str

    def _at(self, *parts: str) -> str:
        return fsutil.join(self.root, *parts)

    @property
    def lock(self) -> str:
        return self._at(LOCK)

    def commits(self, aside: bool = False) -> str:
        return self._at("commits", "aside") if aside else self._at("commits")

    def commit(self, sequence_id: str, aside: bool = False) -> str:
        return fsutil.join(self.commits(aside), f"{sequence_id}.json")

    @property
    def datasets(self) -> str:
        return self._at("datasets")

    def dataset(self, key: str) -> str:
        return self._at("datasets", f"{key}.json")

    @property
    def outcomes(self) -> str:
        return self._at("outcomes")

    def outcome(self, key: str) -> str:
        """How the last run that ended went for one dataset (``state.outcomes``)."""
        return self._at("outcomes", f"{key}.json")

    def manifests(self, key: str) -> str:
        return self._at("manifests", key)

    def sizes(self, key: str = "") -> str:
        """A dataset's kept sizes (``state.sizes``); the folder without ``key``."""
        return self._at("sizes", f"{key}.bin") if key else self._at("sizes")

    def staging(self, job: str = "") -> str:
        return self._at("staging", job) if job else self._at("staging")

    def progress(self, job: str = "") -> str:
        return self._at("progress", job) if job else self._at("progress")

    def results(self, job: str) -> str:
        """A job's results files (copies whose results stayed on the executors)."""
        return self._at("staging", job, "results")

    def kept_plan(self, job: str) -> str:
        """Where planning keeps the files a job copies without collecting them."""
        return self._at("staging", job, "plan")

    def check_progress(self, job: str) -> str:
        return self._at("progress", f"check-{job}")

    def splits(self, guid: str = "") -> str:
        return self._at("splits", guid) if guid else self._at("splits")

    def recovery(self, guid: str = "") -> str:
        return self._at("recovery", guid) if guid else self._at("recovery")

    def recovery_aside(self, guid: str) -> str:
        return self._at("recovery-aside", guid)

    @property
    def events(self) -> str:
        return self._at(EVENTS)

    @property
    def outbox(self) -> str:
        return self._at(EVENTS, "outbox")

    def event(self, key: str) -> str:
        return self._at(EVENTS, f"{key}.json")

    @property
    def events_log(self) -> str:
        return self._at(EVENTS, "events.jsonl")

    @property
    def continuous_status(self) -> str:
        return self._at("continuous", "status.json")

    @property
    def continuous_waiting(self) -> str:
        return self._at("continuous", "waiting.json")

    @property
    def continuous_checkpoint(self) -> str:
        return self._at("continuous", "checkpoint")

    @property
    def continuous_summary(self) -> str:
        return self._at("continuous", "summary.json")

    @property
    def continuous_stop(self) -> str:
        return self._at("continuous", "stop.json")

    #: Folders commit steps write single documents into: created before a run's first
    #: write on filesystems that need a folder first (FTP, SFTP).
    def document_folders(self) -> tuple[str, ...]:
        return (self.commits(), self.commits(aside=True), self.datasets, self.events)

    def job_folders(self, job: str) -> tuple[str, ...]:
        """What a job leaves while it runs: removed once nothing pending needs it."""
        return (self.staging(job), self.progress(job))


def state_root_of(destination: str, options: Mapping[str, Any], state_dir: str | None = None,
                  single_file: str | None = None) -> str:
    """The state root of a copy to ``destination``: ``state_dir`` if given, else
    ``<destination>/.pydistcp``, or beside ``single_file`` (the URL a single file is
    copied to). ``copy`` and ``status``/``recover``/``cleanup`` both use this one rule."""
    if state_dir:
        return written_url(state_dir, options)
    dst = written_url(destination, options)
    if single_file is not None:
        dst = posixpath.dirname(written_url(single_file, options)) or "/"
    return fsutil.join(dst.rstrip("/") or "/", fsutil.STATE_DIR_NAME)
