"""The recovery area: verified copies that were not published, kept by guid (driver).

When a file set fails (or the run dies) after some of its files were copied
and verified, those copies move here, under the origin file's guid (sha1 of
origin path, length, mtime, checksum). A later run that wants the same origin
bytes at the same destination publishes the kept copy instead of reading the
source again (the Gobblin Distcp design's "recovery of unpublished files").
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from distcp.model import CopyableFile, TaskResult
from distcp.state.bounds import inside
from distcp.state.layout import StateLayout
from distcp.state.store import write_atomic
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.spec import written_url
from distcp.summary import Failure, Tally


class RecoveryArea:
    """``<state root>/recovery/<guid>/{meta.json, 0, 1, ...}``."""

    def __init__(self, state_root: str, options: dict[str, Any]) -> None:
        self.layout = StateLayout(state_root)
        #: As records spell it: kept copies are only ever taken from under it.
        self.root = written_url(self.layout.recovery(), options)
        self.options = options
        self.storage = storage_for(self.root, options)
        #: Entries set aside because they name files outside their own folder, one
        #: line each (``refusals``): a kept copy is only ever taken from its folder.
        self.refused: list[Failure] = []
        #: What ``expire`` left, for ``kept``: None until it ran.
        self._left: set[str] | None = None

    def guids(self) -> set[str]:
        try:
            return set(self.storage.names(self.root))
        except FileNotFoundError:
            return set()

    def kept(self) -> set[str]:
        """The entries as the run's start left them (``expire`` listed them, under the
        run's lock nothing else writes here before its copy): the plan and the copy ask
        without listing the folder again; without an expiry first, a listing."""
        return set(self._left) if self._left is not None else self.guids()

    def keep(self, guid: str, planned_destination: str, results: list[TaskResult]) -> None:
        """Move the staged outputs of one origin file here (a rename on filesystems)."""
        folder = self.folder_url(guid)
        self.storage.makedirs(folder)
        outputs = []
        for n, r in enumerate(results):
            target = fsutil.join(folder, str(n)) if r.staging else ""
            if r.staging:
                self.storage.set_aside(r.staging, target)
            outputs.append({**asdict(r), "staging": target})
        meta = {"guid": guid, "destination": planned_destination, "kept": time.time(),
                "outputs": outputs}
        write_atomic(fsutil.join(folder, "meta.json"), json.dumps(meta).encode(), self.options)

    def take(self, file: CopyableFile) -> list[TaskResult] | None:
        """The kept results for ``file`` if they are intact and meant for its destination.
        An entry whose outputs lie outside its own folder was not written by us: it is
        set aside (``refusals``), never published."""
        try:
            meta = self._meta(file.guid)
            if meta["destination"] != file.destination:
                return None
            results = [TaskResult(**{**o, "attempt": "recovered"}) for o in meta["outputs"]]
            stray = next((r.staging for r in results if r.staging and not inside(
                r.staging, self.folder_url(file.guid))), None)
            if stray is not None:
                self._set_aside(file.guid, f"names {stray!r}, outside its folder")
                return None
            for r in results:
                if r.staging and storage_for(r.staging, self.options).entry_size(
                        r.staging) != r.bytes_written:
                    return None
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return None
        return results

    def _set_aside(self, guid: str, why: str) -> None:
        folder = self.folder_url(guid)
        aside = written_url(self.layout.recovery_aside(guid), self.options)
        self.storage.set_aside(folder, aside)
        self.refused.append(Failure(fsutil.display(folder),
                                    f"recovery entry {why}; not published, set aside in "
                                    f"{fsutil.display(aside)}", files=0))

    def refusals(self) -> Tally:
        """The entries set aside since the last call, as failures of the run."""
        out, self.refused = self.refused, []
        return Tally(failures=tuple(out))

    def folder_url(self, guid: str) -> str:
        return fsutil.join(self.root, guid)

    def _meta(self, guid: str) -> dict[str, Any]:
        """The entry's ``meta.json``; FileNotFoundError or ValueError when unreadable."""
        meta: dict[str, Any] = json.loads(self.storage.read_bytes(
            fsutil.join(self.folder_url(guid), "meta.json"), "recovery entry"))
        return meta

    def expire(self, retention_s: float, now: float | None = None,
               dry_run: bool = False) -> int:
        """Remove entries kept longer than ``retention_s``; returns how many (with
        ``dry_run``: how many would go, removing nothing)."""
        now = now or time.time()
        removed = 0
        left = self.guids()
        for guid in sorted(left):
            try:
                kept = self._meta(guid)["kept"]
            except (FileNotFoundError, ValueError, KeyError):
                kept = 0.0  # a half-written entry: useless, remove it
            if now - kept > retention_s:
                if not dry_run:
                    self.storage.remove(self.folder_url(guid))
                    left.discard(guid)
                removed += 1
        self._left = left
        return removed

    def entries(self) -> Iterable[dict[str, Any]]:
        for guid in sorted(self.guids()):
            try:
                yield self._meta(guid)
            except (FileNotFoundError, ValueError):
                continue
