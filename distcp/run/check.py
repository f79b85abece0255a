"""A check's steps in the run's order: list and pair both sides, read on Spark (driver).

``pydistcp check`` is a run of ``distcp.run.pipeline`` whose kind is ``CheckSteps``: it
takes no lock, replays nothing, routes nothing; its plan lists both sides with the copy's
listing code (a table's check listing: the version the destination holds, the files it
only requires present, how far it is behind) and judges what sizes and recorded digests
decide (``checking.compare``);
its copy reads the rest, in this process on a local master (``run.here``, by the copy's
rule: ``choice.reads_here``) and else on Spark (``spark.check``); it publishes nothing
and sweeps only its own progress folder. What it returns is a ``CheckReport``.

Reads only: nothing is written to either side, except the progress documents of the
digest tasks, under the state directory's ``progress/`` folder when the destination
already has one (a destination pydistcp never wrote to gets no folder created).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from functools import partial
from typing import Any

from distcp.callbacks import Callback
from distcp.checking.compare import (
    CheckSettings,
    Outcome,
    Pair,
    judge_listed,
    judge_present,
    pair_listings,
)
from distcp.checking.reads import digest_jobs, judge_read
from distcp.checking.report import CheckReport
from distcp.configuration import CopyConfiguration
from distcp.datasets.base import CopyableDataset, DatasetListing
from distcp.model import FileStatus
from distcp.planning import beside
from distcp.planning.filesfrom import list_flag
from distcp.planning.listing import source_listing, target_listing
from distcp.run.branch import BranchRun, new_job_id
from distcp.run.choice import reads_here
from distcp.run.here import read_here
from distcp.spark.check import check_log_file, read_digests
from distcp.spark.pandasprobe import skip_pandas_probe
from distcp.state.layout import StateLayout
from distcp.state.store import StateStore
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.spec import written_url


class CheckSteps:
    """The steps of one check of ``cfg`` (one branch: its sources against its
    destination); ``report`` fills in as the phases run."""

    def __init__(self, cfg: CopyConfiguration, settings: CheckSettings,
                 callback: Callback) -> None:
        self.cfg, self.settings, self.callback = cfg, settings, callback
        self.start = time.monotonic()
        self.job_id = new_job_id()
        self.report = CheckReport(", ".join(cfg.sources), cfg.destination, settings.one_way)
        self.pairs: list[Pair] = []
        self.listed: list[Outcome | None] = []
        self.unlisted: list[Outcome] = []
        #: Files a table wants at the destination, not compared (``judge_present``).
        self.present: list[Outcome] = []
        self.read: dict[str, Outcome] = {}
        self.progress = ""

    def lock(self, runs: list[BranchRun], stack: ExitStack) -> None:
        """No lock (a check only reads); its progress folder goes however the run ends."""
        stack.callback(self._remove_progress)

    def replay(self, runs: list[BranchRun]) -> None:
        """Nothing: earlier runs' commits are the copy's to finish."""

    def plan(self, runs: list[BranchRun]) -> None:
        """Both sides listed and paired, dataset by dataset, and what the listings decide."""
        run = runs[0]
        if beside.forks():  # the command's process: the manifest's arrays, without pandas
            skip_pandas_probe()
        store = StateStore(run.root, dict(self.cfg.dst_options))
        for ds in run.datasets:
            self.callback.message(f"listing {fsutil.display(ds.urn)}")
            manifest = store.load(ds.urn).manifest if self.settings.stored_digests else {}
            self.pairs += self._paired(ds, manifest)
        if self.settings.one_way:
            self.pairs = [p for p in self.pairs if p.src is not None]
        self.listed = [judge_listed(p, self.settings.size_only) for p in self.pairs]

    def _paired(self, ds: CopyableDataset, manifest: Mapping[str, Sequence[Any]]) -> list[Pair]:
        listing = ds.check_listing(self.cfg)
        if listing is None:
            listing = source_listing(ds, self.cfg)
        source, failed = _source(listing)
        self.unlisted += failed
        if listing.lag is not None:
            self.report.tables.append(listing.lag)
        target = _destination(ds, self.cfg)
        relative = partial(_relative, _root_of(self.cfg.destination, self.cfg))
        self.present += judge_present(listing.expected, target, relative)
        # only the listed files, on both sides (rclone); a table's files beyond the
        # version it holds (the next version's data, copied first) are no reader's
        if list_flag(self.cfg) is not None or not ds.lists_everything:
            target = {u: st for u, st in target.items() if u in source}
        return pair_listings(source, target, manifest, relative)

    def route(self, runs: list[BranchRun]) -> None:
        """Nothing: a check has one destination."""

    def plan_only(self) -> bool:
        return False

    def copy(self, runs: list[BranchRun]) -> int:
        """Read what the listings could not decide, in this process where
        ``choice.reads_here`` says, else in one Spark job (none when nothing is left to
        read); returns the files read."""
        unread = self._unread()
        if not unread:
            return 0
        jobs = digest_jobs(unread, self.cfg.src_options, self.cfg.dst_options)
        self.progress = _progress_folder(runs[0].root, self.job_id, self.cfg)
        self.report.read_here = reads_here(self.cfg, len(jobs)) or ""
        if self.report.read_here:
            results = read_here(self.cfg, jobs, self.progress, self.callback)
            self.callback.close()
        else:
            self.report.log_file = check_log_file(self.cfg, self.job_id)
            results = read_digests(self.cfg, jobs, self.progress, self.report.log_file,
                                   self.callback)
        self.report.files_read = sum(1 for r in results if not r.error)
        self.report.bytes_read = sum(r.size for r in results)
        self.read = {p.path: o for p, o in zip(unread, judge_read(unread, results),
                                               strict=True)}
        return self.report.files_read

    def _unread(self) -> list[Pair]:
        return [p for p, o in zip(self.pairs, self.listed, strict=True) if o is None]

    def agree(self, runs: list[BranchRun]) -> None:
        """Nothing: a check has one destination."""

    def publish(self, runs: list[BranchRun], read: int) -> None:
        """Nothing: a check writes to neither side."""

    def sweep(self, runs: list[BranchRun]) -> None:
        """The check's own progress folder, nothing else."""
        self._remove_progress()

    def finish(self, runs: list[BranchRun]) -> CheckReport:
        report = self.report
        report.outcomes = [o if o is not None else self.read[p.path]
                           for p, o in zip(self.pairs, self.listed, strict=True)]
        report.outcomes += self.present + self.unlisted
        report.stored_digests = sum(1 for p in self._unread() if p.stored)
        report.duration_s = round(time.monotonic() - self.start, 3)
        return report

    def _remove_progress(self) -> None:
        folder, self.progress = self.progress, ""
        if not folder:
            return
        try:
            storage_for(folder, dict(self.cfg.dst_options)).remove(folder)
        except OSError:
            pass  # a few small counter documents left: harmless, never read again


def _source(listing: DatasetListing) -> tuple[dict[str, FileStatus], list[Outcome]]:
    """The dataset's files (its check listing, else the copy's), under the destination
    URL each would be copied to, and what the listing could not take that the user did
    not ask to skip (a dangling link, an unreadable directory, a --files-from line naming
    nothing): errors (``!``), as they fail a copy."""
    files = {f.destination: f.origin for f in listing.files if not f.destination.endswith("/")}
    failed = [Outcome(fsutil.display(s.path), "!", s.reason) for s in listing.skipped
              if s.failure]
    return files, failed


def _destination(ds: CopyableDataset, cfg: CopyConfiguration) -> dict[str, FileStatus]:
    """The destination's files the run's filters admit (extras the filters leave out
    are none of the check's business, as ``--delete`` leaves them alone)."""
    found = target_listing(ds, cfg)
    if ds.is_file:
        return {u: st for u, st in found.items() if not st.is_dir}
    top = ds.destination_root.rstrip("/")
    wanted = cfg.file_filter
    return {u: st for u, st in found.items() if not st.is_dir and u.startswith(top + "/")
            and wanted.admits(u[len(top) + 1:], st)}


def _root_of(url: str, cfg: CopyConfiguration) -> str:
    return written_url(url, cfg.dst_options).rstrip("/")


def _relative(root: str, url: str) -> str:
    """``url`` as reports print it: relative to DST (a single file: its name)."""
    if url.startswith(root + "/"):
        return url[len(root) + 1:]
    return url.rstrip("/").rsplit("/", 1)[-1]


def _progress_folder(root: str, job_id: str, cfg: CopyConfiguration) -> str:
    """Where the tasks count what they read: only under an existing state directory."""
    storage = storage_for(root, dict(cfg.dst_options))
    folder = StateLayout(root).check_progress(job_id)
    try:
        if not storage.isdir(root):
            return ""
        storage.makedirs(folder)
    except OSError:
        return ""
    return folder
