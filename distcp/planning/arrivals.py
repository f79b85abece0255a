"""What is new at a continuous copy's sources: the listing half of its stream (driver).

Spark asks the stream's source (``spark.arrivals``) what arrived since its last
offset; this module answers by listing the run's datasets through the storage seam
(every store pydistcp reads), with the run's filters, and offering in (mtime, path)
order the files it has not offered before, at most ``--max-files-per-batch`` at a time.

"Not offered before" is kept in memory (``offered``: a path and its size and mtime),
on top of what the listing taken before the run's catch-up found (``known``:
fingerprints of path, size and mtime; that run copied whatever the destination
lacked). So a file that arrives with an mtime older than what was offered (``cp -p``,
``rsync -t`` into the source) is still offered, and a file rewritten in place (new
size or mtime) is offered again. A file younger than ``--settle`` seconds is left for a
later read: its writer may not be done.

With ``--listing-after-seen``, a dataset on a store that lists from a key (S3) is listed
from the last key seen below anything still pending, and whole on the first read and
every ``--full-listing-every``: a read costs what arrived, for sources whose new names
sort last.

What a read leaves waiting (the files beyond this batch) goes to the status document
the driver reads after each batch for its lag gauge (``waiting``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from distcp.configuration import CopyConfiguration
from distcp.datasets.base import CopyableDataset
from distcp.model import FileStatus
from distcp.planning import offsets
from distcp.planning.listing import find_datasets, with_history
from distcp.state.store import StateStore, read_json_or_none
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.atomic import write_atomic
from distcp.storage.base import Tree

#: The stream's rows: which dataset, the path as its storage spells it, its status.
SCHEMA = "urn string, path string, status string"


@dataclass(frozen=True)
class Arrival:
    """One file offered: its dataset, its path as its tree's storage spells it, and
    what the listing said of it."""

    urn: str
    path: str
    status: FileStatus

    @property
    def key(self) -> offsets.Key:
        return (self.status.mtime, self.path)

    @property
    def fingerprint(self) -> int:
        """The file as a listing saw it (dataset, path, size, mtime), in 8 bytes: what
        the catch-up's listing hands the source, however many files it found."""
        seen = f"{self.urn}\0{self.path}\0{self.status.size}\0{self.status.mtime!r}"
        return int.from_bytes(hashlib.blake2b(seen.encode(), digest_size=8).digest(), "big")

    def row(self) -> tuple[str, str, str]:
        return (self.urn, self.path, json.dumps(asdict(self.status)))

    @classmethod
    def of_row(cls, urn: str, path: str, status: str) -> Arrival:
        return cls(urn, path, FileStatus(**json.loads(status)))


@dataclass(frozen=True)
class Waiting:
    """What a read left for later batches: files, bytes, the oldest one's mtime; and
    (as read back by the driver) what it offered, what had not settled, and when."""

    files: int = 0
    bytes: int = 0
    oldest: float | None = None
    offered: int = 0
    unsettled: int = 0
    at: float = 0.0
    #: Why the last read failed, in one line ("" when it did not), and whether it was
    #: the storage's (an OSError: a source gone, unreachable), for the conductor to say.
    error: str = ""
    storage_error: bool = False

    @classmethod
    def of(cls, left: list[Arrival]) -> Waiting:
        return cls(len(left), sum(a.status.size for a in left),
                   min((a.status.mtime for a in left), default=None))


class Arrivals:
    """The run's sources, listed on each read; what it offered kept in ``known``."""

    def __init__(self, cfg: CopyConfiguration, known: frozenset[int] = frozenset(),
                 waiting_url: str = "", state_url: str = "") -> None:
        """``state_url``: the state root, where a dataset that plans from what was
        published (a stream dataset's watermarks) reads it."""
        self.cfg, self.known, self.waiting_url = cfg, known, waiting_url
        self.state = StateStore(state_url, dict(cfg.dst_options)) if state_url else None
        self.offered: dict[tuple[str, str], tuple[int, float]] = {}
        #: Files the last listing left for later because they had not settled.
        self.unsettled = 0
        #: ``--listing-after-seen``, per dataset: the key the next listing starts after,
        #: when the last full listing was, and what this read listed (in key order) and
        #: left unsettled.
        self.starts: dict[str, str] = {}
        self.full_at: dict[str, float] = {}
        self.keys: dict[str, list[str]] = {}
        self.held: dict[str, set[str]] = {}

    def listed(self, full: bool = False) -> Iterator[Arrival]:
        """Every file of every dataset the run's finder finds now, filtered as the run
        filters (ages from now), that has settled; with ``--listing-after-seen``, of a
        store that lists from a key, only those after the keys seen (``full``: all)."""
        cfg = self.cfg.with_(started=time.time())
        wanted, settled = cfg.file_filter, time.time() - cfg.settle
        self.keys, self.held = {}, {}
        for ds in find_datasets(cfg):
            if ds.uses_history:
                yield from self._planned(with_history(ds, self.state), cfg, settled)
                continue
            tree = storage_for(ds.root, dict(cfg.src_options)).tree(ds.root)
            after = cfg.listing_after_seen and tree.storage.capabilities.lists_after \
                and not ds.is_file
            if ds.is_file:
                found: Iterator[tuple[str, FileStatus]] = iter(
                    ((tree.path, tree.storage.stat(tree.url)),))
            elif after:
                found = self._after(ds.urn, tree, full)
            else:
                found = tree.storage.walk(tree.url, cfg.links, [])
            for path, st in found:
                if st.is_dir:
                    continue
                if st.mtime > settled:
                    self.unsettled += 1
                    if after:
                        self.held.setdefault(ds.urn, set()).add(path)
                    continue
                rel = fsutil.relpath(path, tree.path) if not ds.is_file else \
                    path.rstrip("/").rpartition("/")[2]
                if wanted.admits(rel, st):
                    yield Arrival(ds.urn, path, st)

    def _after(self, urn: str, tree: Tree, full: bool) -> Iterator[tuple[str, FileStatus]]:
        """The dataset's keys after its start, or all of them when a full listing is
        due (the first read, then every ``--full-listing-every``): a file whose name
        does not sort last is found then."""
        now = time.time()
        if full or now - self.full_at.get(urn, 0.0) >= self.cfg.full_listing_every:
            self.full_at[urn] = now
            start = None
        else:
            start = self.starts.get(urn)
        seen = self.keys[urn] = []
        for path, st in tree.storage.walk_after(tree.url, start):
            seen.append(path)
            yield path, st

    def _moved_starts(self, left: list[Arrival]) -> None:
        """Each dataset listed after a key starts its next listing after the last key
        this one listed below the first file still pending (left for a later batch, or
        not settled): none of those is skipped."""
        for urn, paths in self.keys.items():
            held = {a.path for a in left if a.urn == urn} | self.held.get(urn, set())
            low = min(held) if held else None
            below = [p for p in paths if low is None or p < low]
            if below:
                self.starts[urn] = below[-1]

    def _planned(self, ds: CopyableDataset, cfg: CopyConfiguration, settled: float
                 ) -> Iterator[Arrival]:
        """A dataset that lists itself from what was published (a stream dataset: only
        its ready partitions from the low watermark on, never the whole tree): the files
        its own listing wants. Its batch plans it whole, as a scheduled run does."""
        for f in ds.listing(cfg).files:
            if f.origin.mtime > settled:
                self.unsettled += 1
            else:
                yield Arrival(ds.urn, f.origin.url, f.origin)

    def read(self, start: Mapping[str, Any]) -> tuple[list[Arrival], dict[str, Any]]:
        """The next batch after ``start`` and the offset that ends it (``start`` itself
        when nothing is new: Spark then runs no batch)."""
        self.unsettled = 0
        listed = sorted(self.listed(), key=lambda a: a.key)
        offered, known = self.offered, self.known
        new = [a for a in listed if offered.get((a.urn, a.path)) != _seen(a)
               and a.fingerprint not in known]
        batch, left = new[:self.cfg.max_files_per_batch], new[self.cfg.max_files_per_batch:]
        self._moved_starts(left)
        self._report(Waiting.of(left), len(batch))
        if not batch:
            return [], dict(start)
        for a in batch:
            offered[(a.urn, a.path)] = _seen(a)
        return batch, offsets.advanced(start, ((a.urn, a.key) for a in batch))

    def between(self, start: Mapping[str, Any], end: Mapping[str, Any]) -> list[Arrival]:
        """A batch read again after a crash: the files between its marks. Files it had
        offered late (below a mark) are not among them: the catch-up run that starts
        each process copies them."""
        return sorted((a for a in self.listed(full=True)
                       if offsets.between(start, end, a.urn, a.key)),
                      key=lambda a: a.key)

    def failed(self, exc: BaseException) -> None:
        """A read failed: its cause in one line, for the conductor to end the copy with
        (Spark would end it with the whole traceback and its own stack)."""
        lines = str(exc).strip().splitlines()
        cause = lines[0][:300] if lines else type(exc).__name__
        if self.waiting_url:
            doc = {"error": f"listing the continuous copy's sources failed: {cause}",
                   "storage_error": isinstance(exc, OSError), "at": time.time()}
            write_atomic(self.waiting_url, json.dumps(doc).encode(),
                         dict(self.cfg.dst_options), durable=False)

    def _report(self, waiting: Waiting, offered: int) -> None:
        """What this read offered and left, for the driver's lag gauge and
        ``--until-idle`` (a read that offered nothing and left nothing)."""
        if self.waiting_url:
            doc = {**asdict(waiting), "offered": offered, "unsettled": self.unsettled,
                   "at": time.time()}
            write_atomic(self.waiting_url, json.dumps(doc).encode(),
                         dict(self.cfg.dst_options), durable=False)


def _seen(a: Arrival) -> tuple[int, float]:
    return (a.status.size, a.status.mtime)


def read_waiting(url: str, options: dict[str, Any]) -> Waiting:
    """What the source's last read left waiting (nothing known: none)."""
    doc = read_json_or_none(url, options, "the continuous copy's waiting files")
    if doc is None:
        return Waiting()
    return Waiting(int(doc.get("files", 0)), int(doc.get("bytes", 0)), doc.get("oldest"),
                   int(doc.get("offered", 0)), int(doc.get("unsettled", 0)),
                   float(doc.get("at", 0.0)), str(doc.get("error", "")),
                   bool(doc.get("storage_error", False)))
