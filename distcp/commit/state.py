"""Per-dataset state: watermark, manifest of what was published, run history.

One JSON document per dataset URN under ``<state root>/datasets/``, replaced
atomically (temp + rename on filesystems, one PUT on object stores). Only commit
steps change it, in the same CommitSequence as the data it describes, so the
watermark can never move ahead of the data.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from distcp.errors import StateError
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.atomic import write_atomic as write_atomic  # noqa: PLC0414 - re-exported: it lived here

MAX_RUNS = 50
MAX_APPLIED = 200


def read_json(url: str, options: dict[str, Any], what: str) -> Any:
    """Parse a state/log document; a damaged one is a StateError that says what to do."""
    try:
        raw = storage_for(url, options).read_bytes(url, what)
    except FileNotFoundError:
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise StateError(
            f"corrupt {what} {fsutil.display(url)}: {exc}; no data was changed. Inspect it, "
            "then move it out of the state directory (or restore it) and run again",
            path=url) from exc


def urn_key(urn: str) -> str:
    return hashlib.sha1(urn.encode("utf-8", "surrogateescape")).hexdigest()[:20]


@dataclass
class DatasetState:
    """What pydistcp knows about one dataset's destination."""

    urn: str
    watermark: float | None = None
    manifest: dict[str, list[Any]] = field(default_factory=dict)  # dest -> [size, mtime, digest, guid]
    runs: list[dict[str, Any]] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)  # sequence ids already merged

    def to_json(self) -> bytes:
        return json.dumps({"version": 1, "urn": self.urn, "watermark": self.watermark,
                           "manifest": self.manifest, "runs": self.runs[-MAX_RUNS:],
                           "applied": self.applied[-MAX_APPLIED:]}, sort_keys=True).encode()


class StateStore:
    """The ``datasets/`` part of a state root."""

    def __init__(self, root: str, options: dict[str, Any],
                 cache: dict[str, DatasetState] | None = None) -> None:
        self.root = root
        self.options = options
        self.cache = cache if cache is not None else {}

    def url_of(self, urn: str) -> str:
        return fsutil.join(self.root, "datasets", f"{urn_key(urn)}.json")

    def load(self, urn: str) -> DatasetState:
        """The dataset's state, read once per run; callers change it only to save it."""
        if urn not in self.cache:
            self.cache[urn] = self._read(urn)
        return self.cache[urn]

    def _read(self, urn: str) -> DatasetState:
        data = read_json(self.url_of(urn), self.options, "dataset state")
        if data is None:
            return DatasetState(urn)
        if not isinstance(data, dict) or data.get("urn") != urn:
            raise StateError(f"dataset state {fsutil.display(self.url_of(urn))} does not "
                             f"describe {urn}; move it aside and run again")
        return DatasetState(urn, data.get("watermark"), data.get("manifest", {}),
                            data.get("runs", []), data.get("applied", []))

    def save(self, state: DatasetState) -> None:
        try:
            write_atomic(self.url_of(state.urn), state.to_json(), self.options)
        except BaseException:
            self.cache.pop(state.urn, None)  # what is on disk is the truth again
            raise
        self.cache[state.urn] = state

    def all(self) -> list[DatasetState]:
        fs, path = fsutil.filesystem(fsutil.join(self.root, "datasets"), self.options)
        try:
            names = sorted(fs.ls(path, detail=False))
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            if name.endswith(".json"):
                data = read_json(fsutil.to_url(fs, name), self.options, "dataset state")
                out.append(self.load(data["urn"]))
        return out
