"""The outcome of a run (driver).

What the CLI prints, ``--summary-json`` writes and ``distcp.copy`` returns.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypedDict

from distcp import request_count
from distcp.callbacks import human_bytes
from distcp.names import printable, printable_lines

if TYPE_CHECKING:
    from distcp.model import TaskResult
    from distcp.storage.filesystems import Skipped


@dataclass(frozen=True)
class Failure:
    """One line of what failed.

    ``files``: the source files of this run the line stands for, counted by
    ``files_failed``: 1 for a source file that failed (``path`` is the source), the
    set's files for a file set whose publish failed (``path`` is its destination), 0
    for a further line about a file already counted (an archive's other outputs) and
    for what is not a file of this run (an earlier run's commit replayed or set aside,
    a kept copy refused). ``dataset``: the dataset it belongs to, when one does; the
    run's outcome per dataset (``pydistcp status``) names its first failure.
    """

    path: str
    error: str
    dataset: str = ""
    files: int = 1


#: The summary's lists of ``Failure`` (``Summary.from_dict`` rebuilds them).
_FAILURE_LISTS = ("failures", "catalog_failures", "catalog_pending", "entries_skipped")


@dataclass(frozen=True)
class Tally:
    """What one stage of a run (replaying commits, publishing) reports, as a value.

    Stages return a Tally instead of changing a shared Summary; the run adds them to
    its Summary (``Summary.add``) in the order the stages ran, so the failures and
    notes keep that order.
    """

    files_copied: int = 0
    links_copied: int = 0
    bytes_copied: int = 0
    files_deleted: int = 0
    #: ``move``: source files deleted once their copies were published.
    sources_deleted: int = 0
    files_not_published: int = 0
    files_recovered: int = 0
    bytes_recovered: int = 0
    #: Of the files recovered, those a replay of an earlier run's commit published.
    files_replayed: int = 0
    bytes_replayed: int = 0
    directories_created: int = 0
    sequences_replayed: int = 0
    sequences_set_aside: int = 0
    recovery_expired: int = 0
    uploads_aborted: int = 0
    partitions_registered: int = 0
    #: ``--checksum``: pairs of the same size compared, those found the same, bytes read.
    files_compared: int = 0
    files_compared_same: int = 0
    bytes_compared: int = 0
    failures: tuple[Failure, ...] = ()
    #: Registrations in the catalog (--catalog-table) that failed: their data is published.
    catalog_failures: tuple[Failure, ...] = ()
    #: Registrations of earlier runs that failed again: retried by every run, they fail
    #: none of them (``pydistcp cleanup --forget-registrations`` drops them).
    catalog_pending: tuple[Failure, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def files_failed(self) -> int:
        """The source files that failed: counted from ``failures`` (``Failure.files``),
        never apart from them, so the count and the list cannot disagree."""
        return failed_files(self.failures)

    def __add__(self, other: Tally) -> Tally:
        return Tally(**{f.name: getattr(self, f.name) + getattr(other, f.name)
                        for f in fields(Tally)})


@dataclass(frozen=True)
class CopyTally:
    """What a copy phase reports, as a value: the copy adapters (``spark.job``,
    ``run.fork``) return it beside their results and the run adds it once
    (``Summary.add_copy``), so no adapter writes into the run's Summary."""

    results_collected: int = 0
    bytes_read: int = 0
    bytes_server_side: int = 0
    ranges_resumed: int = 0
    bytes_resumed: int = 0
    #: The tasks' requests by kind (``request_count``).
    requests: tuple[tuple[str, int], ...] = ()
    notes: tuple[str, ...] = ()
    #: Seconds by phase name: ``spark_start_s`` (the first session's start counts),
    #: ``copy_s`` and ``join_s`` (added up over the copy's jobs).
    phases: tuple[tuple[str, float], ...] = ()
    #: How the run copied, each way with why (``Summary.strategy["copy"]``).
    strategy: tuple[dict[str, str], ...] = ()

    @staticmethod
    def of_results(results: list[TaskResult], phases: Iterable[tuple[str, float]],
                   collected: int | None = None) -> CopyTally:
        """What a copy job's ``results`` report (``collected``: how many came back from
        the job itself, when others were added since)."""
        return CopyTally(
            results_collected=len(results) if collected is None else collected,
            bytes_read=sum(r.bytes_read for r in results),
            bytes_server_side=sum(r.bytes_server_side for r in results if r.ok),
            requests=tuple(request_count.total(r.requests for r in results).items()),
            phases=tuple(phases))

    def __add__(self, other: CopyTally) -> CopyTally:
        return CopyTally(
            **{f.name: getattr(self, f.name) + getattr(other, f.name)
               for f in fields(CopyTally) if f.name not in ("requests", "phases")},
            requests=tuple(request_count.total([self.requests, other.requests]).items()),
            phases=tuple(_phases_added(dict(self.phases), other.phases).items()))


def _phases_added(phases: dict[str, float], more: Iterable[tuple[str, float]]
                  ) -> dict[str, float]:
    """``phases`` with ``more`` in: the first Spark start counts, other phases add up."""
    for name, seconds in more:
        if name == "spark_start_s":
            phases.setdefault(name, seconds)
        else:
            phases[name] = round(phases.get(name, 0.0) + seconds, 3)
    return phases


def failed_files(failures: Iterable[Failure]) -> int:
    """How many source files ``failures`` stand for (``Failure.files``)."""
    return sum(f.files for f in failures)


def tally_of(parts: Iterable[Tally]) -> Tally:
    """The parts added up, in order."""
    total = Tally()
    for part in parts:
        total = total + part
    return total


@dataclass
class Summary:
    """Counts of one run. ``ok`` is true only when nothing failed.

    The counts agree with the lists: ``files_failed`` is the number of source files
    ``failures`` stands for (the sum of its ``Failure.files``: one per source file that
    failed, however many outputs it had; a set whose publish failed counts its files),
    so ``failed 0`` never stands beside a failed file. ``failures`` may hold lines that
    are no file of this run (an earlier run's commit that a replay could not finish, a
    kept copy refused): they count 0, and ``render`` says how many there are.
    ``catalog_failures`` are apart on purpose: their data is published.
    ``files_copied`` counts the files written: each member an archive expands to.
    ``files_recovered`` (and ``bytes_recovered``) count the files earlier runs copied
    that this run published without reading their sources: those a replayed commit
    published (``files_replayed``) before planning, which then finds them in place
    (skipped, where they are of this run's sources), and copies the recovery area gave
    back to this run's file sets, which are of ``files_copied``. ``render`` says each
    where it is counted, so the first line's copied, skipped and failed add up to the
    run's source files.
    A fork's counts are its branches' (``branches``) added up, each file written
    counted (a file copied to two branches is two files written), but
    ``files_failed`` counts source files: one that failed in two branches is one
    failed file, with a line per branch (``run.fork.fold``).
    """

    job_id: str = ""
    files_copied: int = 0
    files_skipped: int = 0
    files_failed: int = 0
    files_deleted: int = 0
    #: ``move``: source files deleted once their copies were published.
    sources_deleted: int = 0
    files_not_published: int = 0
    files_recovered: int = 0
    bytes_recovered: int = 0
    #: Of the files recovered, those a replay of an earlier run's commit published.
    files_replayed: int = 0
    bytes_replayed: int = 0
    sequences_replayed: int = 0
    sequences_set_aside: int = 0
    recovery_expired: int = 0
    destination_listings: int = 0
    #: Rows the driver collected from planning on Spark (``--listing spark``): files to
    #: copy, directories, deletions, entries not copied, a count per task; 0 otherwise.
    plan_rows_collected: int = 0
    #: Per-file results the driver received from the copy tasks (0 where they stayed in
    #: the tasks' results files: a plain copy planned on Spark).
    results_collected: int = 0
    bytes_copied: int = 0
    #: Of ``files_copied``: symbolic links copied as links (``--links copy``).
    links_copied: int = 0
    #: Bytes that went through the tasks (read from sources), and bytes the object
    #: store copied itself (S3 server-side copy): none of those went through a task.
    bytes_read: int = 0
    bytes_server_side: int = 0
    #: ``--checksum``: files of their target's size whose contents decided (read, or the
    #: checksums both stores keep), those found the same (skipped), and the bytes read.
    files_compared: int = 0
    files_compared_same: int = 0
    bytes_compared: int = 0
    #: Ranges of split files that earlier runs had sent, reused instead of sent again.
    ranges_resumed: int = 0
    bytes_resumed: int = 0
    uploads_aborted: int = 0
    #: S3 requests sent for the files, by kind (create, part, complete, put, head, get,
    #: list_parts, abort, part_copy; list_uploads at publish; progress: the tasks' progress
    #: documents; delete: ``--delete``'s removals), summed from the TaskResults and the
    #: publish step (distcp.request_count).
    requests: dict[str, int] = field(default_factory=dict)
    #: The requests the files themselves cost, per file the tasks copied (not
    #: list_uploads, progress nor delete, which do not grow with each file copied).
    requests_per_file: float = 0.0
    notes: list[str] = field(default_factory=list)
    directories_created: int = 0
    datasets: int = 0
    duration_s: float = 0.0
    failures: list[Failure] = field(default_factory=list)
    #: Partitions added to the --catalog-table (or found there already) by this run.
    partitions_registered: int = 0
    #: Catalog registrations that failed, apart from ``failures``: their data is
    #: published, their commit stays pending and the next run registers them (exit 1).
    catalog_failures: list[Failure] = field(default_factory=list)
    #: Registrations of earlier runs that failed again in this run: reported, retried by
    #: the next run, and not a failure of this one (``Tally.catalog_pending``).
    catalog_pending: list[Failure] = field(default_factory=list)
    #: Source entries not copied by choice (``--links skip``, special files): not failures.
    entries_skipped: list[Failure] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    dry_run: bool = False
    plan: list[dict[str, str]] = field(default_factory=list)
    #: How the run planned each dataset and how it copied, each with why (``plan``: one
    #: ``{"dataset", "strategy", "why"}`` per dataset; ``copy``: ``{"strategy", "why"}``
    #: per way used; ``distcp.planning.strategy``); printed by ``-v``.
    strategy: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    log_file: str = ""
    #: A fork run (``--fork``, a job file's branches): per branch, its own counts and
    #: its queue statistics (size, fill ratio, put/get counts and rates); the run's
    #: counts above are the branches' added up, bytes_read the one read of each source.
    branches: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Per dataset (URN): files and bytes this run published, files skipped and failed,
    #: and a stream dataset's watermarks after the run (epoch seconds); the metrics file's
    #: per-dataset series.
    per_dataset: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures and self.files_failed == 0 and not self.catalog_failures

    def add_skipped(self, entries: Iterable[Skipped]) -> None:
        """Name every source entry the listing did not copy: those the user asked to
        skip (or that cannot be copied, like a FIFO) as skipped, the others as failures."""
        for e in entries:
            if e.failure:
                self.failures.append(Failure(e.path, f"{e.path}: {e.reason}", e.dataset))
                self.files_failed += 1  # the Failure's one file
            else:
                self.entries_skipped.append(Failure(e.path, e.reason))

    def add(self, tally: Tally) -> None:
        """Count in what a stage reported: its counters, then its failures and notes."""
        for f in fields(Tally):
            value = getattr(tally, f.name)
            if isinstance(value, tuple):
                getattr(self, f.name).extend(value)
            else:
                setattr(self, f.name, getattr(self, f.name) + value)
        self.files_failed += tally.files_failed

    def add_copy(self, tally: CopyTally) -> None:
        """Count in what the copy phase reported (``CopyTally``)."""
        for name in ("results_collected", "bytes_read", "bytes_server_side",
                     "ranges_resumed", "bytes_resumed"):
            setattr(self, name, getattr(self, name) + getattr(tally, name))
        self.requests = request_count.total([tuple(self.requests.items()), tally.requests])
        self.notes.extend(tally.notes)
        _phases_added(self.phases, tally.phases)
        if tally.strategy:
            self.strategy["copy"] = list(tally.strategy)

    @property
    def throughput(self) -> float:
        copy = self.phases.get("copy_s") or self.duration_s
        return self.bytes_copied / copy if copy > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["throughput_bytes_per_s"] = round(self.throughput, 1)
        data["ok"] = self.ok
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Summary:
        """The summary ``to_dict`` gave (what a continuous copy's batches, run in the
        warm engine's Python worker, hand their client through the state folder)."""
        kw = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        for name in _FAILURE_LISTS:
            kw[name] = [Failure(**f) for f in data.get(name, ())]
        return cls(**kw)

    def render(self) -> str:
        """The human summary printed at the end of a run: the counts, then what needs saying."""
        verb = "would copy" if self.dry_run else "copied"
        lines = [
            f"{verb} {self.files_copied} files ({human_bytes(self.bytes_copied)}), "
            f"skipped {self.files_skipped}, failed {self.files_failed}, "
            f"deleted {self.files_deleted} in {self.duration_s:.1f}s"
            + (f" ({human_bytes(self.throughput)}/s)" if self.bytes_copied else ""),
        ]
        if self.sources_deleted:
            lines.append(f"moved: deleted {self.sources_deleted} source files whose copies "
                         "are published")
        if self.links_copied:
            lines.append(f"of which symbolic links {verb} as links: {self.links_copied}")
        lines.extend(self._earlier_runs_lines())
        lines.extend(self._work_lines())
        lines.extend(self.notes)
        others = sum(1 for f in self.failures if not f.files)
        if others:
            lines.append(f"of the FAILED lines, {others} count no file failed here (an "
                         "earlier run's commit, a kept copy, another output of a file "
                         "counted)")
        if self.partitions_registered or self.catalog_failures or self.catalog_pending:
            lines.append(self._catalog_line())
        if self.files_not_published:
            lines.append(f"not published (their file set failed): {self.files_not_published} "
                         "files, kept for recovery by the next run")
        lines.extend(_branch_line(name, b, verb) for name, b in self.branches.items())
        return printable_lines(lines)  # a name holding a newline must not start a line

    def _earlier_runs_lines(self) -> list[str]:
        """What this run finished or reused of earlier runs' work (recovery, replay, resume)."""
        lines = []
        kept = self.files_recovered - self.files_replayed
        if kept:
            lines.append(f"of which recovered {kept} files "
                         f"({human_bytes(self.bytes_recovered - self.bytes_replayed)}) "
                         "copied by earlier runs, without reading their sources again")
        if self.sequences_replayed or self.sequences_set_aside:
            lines.append(f"replayed {self.sequences_replayed} unfinished commit(s) of earlier "
                         f"runs; set aside {self.sequences_set_aside}")
        if self.files_replayed:
            lines.append(f"recovered {self.files_replayed} files "
                         f"({human_bytes(self.bytes_replayed)}) copied by earlier runs, "
                         "without reading their sources again: their commits, finished "
                         "before planning, published them, and the plan found them in "
                         "place (skipped)")
        if self.bytes_resumed:
            lines.append(f"resumed {self.ranges_resumed} ranges of split files "
                         f"({human_bytes(self.bytes_resumed)} saved) sent by earlier runs")
        return lines

    def _work_lines(self) -> list[str]:
        """How the copy went about it: comparisons, requests, server-side bytes, entries left."""
        lines = []
        if self.files_compared:
            lines.append(f"compared the contents of {self.files_compared} files of the same "
                         f"size (--checksum): {self.files_compared_same} the same, read "
                         f"{human_bytes(self.bytes_compared)}")
        if self.requests:
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.requests.items()))
            lines.append(f"S3 requests: {sum(self.requests.values())} ({kinds}); "
                         f"{self.requests_per_file:g} per file")
        if self.bytes_server_side:
            lines.append(f"copied {human_bytes(self.bytes_server_side)} server-side "
                         "(no byte through the tasks)")
        if self.entries_skipped:
            lines.append(f"not copied (links, special files, not ready): "
                         f"{len(self.entries_skipped)}")
            lines.extend(f"  {e.path}: {e.error}" for e in self.entries_skipped)
        return lines

    def _catalog_line(self) -> str:
        """Registrations done, failed (retried next run) and pending from earlier runs."""
        failed, pending = len(self.catalog_failures), len(self.catalog_pending)
        return (f"catalog: {self.partitions_registered} partition(s) registered"
                + (f"; {failed} registration(s) failed (their data is published; "
                   "the next run registers them)" if failed else "")
                + (f"; {pending} registration(s) of earlier runs still pending "
                   "(retried by each run; 'pydistcp cleanup DST "
                   "--forget-registrations' drops them)" if pending else ""))


def _branch_line(name: str, b: dict[str, Any], verb: str) -> str:
    """One fork branch's counts and how full its queue ran."""
    q = b.get("queue") or {}
    queue = (f"; queue of {q['capacity']}: {q['fill_ratio']:.0%} full on average, "
             f"{q['full_waits']} waits for the branch" if q.get("puts") else "")
    return (f"branch {name} -> {b['destination']}: {verb} {b['files_copied']} files "
            f"({human_bytes(b['bytes_copied'])}), skipped {b['files_skipped']}, failed "
            f"{b['files_failed']}{queue}")


@dataclass(frozen=True)
class CleanupReport:
    """What ``distcp.cleanup`` (``pydistcp cleanup``) freed under a destination."""

    destination: str
    state_dir: str
    #: Dead runs whose staging folder was removed.
    jobs: int = 0
    #: Split files (ranges of a large file) that no run resumed.
    splits: int = 0
    #: Verified copies that were kept for a later run to publish.
    recovery: int = 0
    #: Orphaned multipart uploads aborted (object stores only).
    uploads: int = 0
    #: Bytes freed, as far as the storage reports sizes.
    bytes: int = 0
    #: Nothing was removed: the counts are what a cleanup would free.
    dry_run: bool = False
    #: ``--forget-registrations``: pending catalog registrations dropped (None: not asked).
    registrations: int | None = None

    def render(self) -> str:
        """The line ``pydistcp cleanup`` prints."""
        verb = "would free" if self.dry_run else "freed"
        forgot = "" if self.registrations is None else (
            f"; {'would forget' if self.dry_run else 'forgot'} {self.registrations} pending "
            "catalog registration(s)")
        return printable(f"{verb} {human_bytes(self.bytes)} under {self.destination}: staging of "
                f"{self.jobs} dead run(s), {self.splits} split file(s), {self.recovery} kept "
                f"cop(ies), {self.uploads} orphaned multipart upload(s){forgot}")


class StatusReport(TypedDict):
    """What ``distcp.status`` returns and ``pydistcp status --json`` prints."""

    state_dir: str
    #: The run holding the destination now (job id, host, pid ...), or None.
    running: dict[str, Any] | None
    #: Commits of earlier runs still to be finished (by the next run or ``recover``).
    pending: list[dict[str, Any]]
    #: Commits replayed ``max_replays`` times without success: they need a look.
    set_aside: list[dict[str, Any]]
    #: Per dataset: watermark, files published, its history's last lines
    #: (``last_runs``) and how its last run went (``last_run``: job_id, status ok,
    #: partial or failed, the first failure's line as ``cause``, ended).
    datasets: list[dict[str, Any]]
    #: Verified copies kept in the recovery area for the next run.
    recoverable: list[dict[str, Any]]
    #: Verified copies journaled by interrupted runs.
    journaled: list[dict[str, Any]]
    #: The last continuous copy's status document (``copy --continuous``: its state,
    #: batches, last batch, lag and files waiting), with ``running`` true while it holds
    #: the lock; None when none ran here.
    continuous: dict[str, Any] | None
