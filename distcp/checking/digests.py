"""The digests a check needs, read on Spark's executors (executor).

Each job names one side of one path: a URL and the storage spec that reads it
(values only; the executor opens the storage itself). A file that cannot be read
comes back as a result with an error, never as an exception, since Spark carries
an executor's exception only as a traceback string.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from distcp.copying.taskenv import applied_environment
from distcp.storage import StorageSpec, storage_for
from distcp.storage import filesystems as fsutil
from distcp.storage.buffers import ReadBuffer


@dataclass(frozen=True, slots=True)
class DigestJob:
    """Read ``url`` (``size`` bytes by the listing) and return its digest."""

    key: int  # the pair's index
    side: str  # "src" or "dst"
    url: str
    size: int
    spec: StorageSpec


@dataclass(frozen=True, slots=True)
class DigestResult:
    key: int
    side: str
    digest: str = ""
    size: int = 0
    error: str = ""


@dataclass(frozen=True, slots=True)
class DigestUnit:
    """What one Spark task reads: some jobs, and where it reports progress ("": not)."""

    unit_id: int
    jobs: tuple[DigestJob, ...]
    progress: str = ""
    progress_options: tuple[tuple[str, str], ...] = ()
    #: The client's task variables (``copying.taskenv``: credentials a warm engine's
    #: workers do not have); may hold secrets: never shown. None: the worker's own.
    env: dict[str, str] | None = field(default=None, repr=False)


def pack(jobs: Sequence[DigestJob], units: int) -> list[tuple[DigestJob, ...]]:
    """``jobs`` in at most ``units`` groups of about equal bytes (largest first, each
    to the lightest group), so one big file does not wait behind many small ones."""
    groups: list[list[DigestJob]] = [[] for _ in range(max(1, min(units, len(jobs))))]
    loads = [0] * len(groups)
    for job in sorted(jobs, key=lambda j: (-j.size, j.key, j.side)):
        i = loads.index(min(loads))
        groups[i].append(job)
        loads[i] += job.size + 1
    return [tuple(g) for g in groups if g]


def digest_one(job: DigestJob, buffer: bytearray) -> DigestResult:
    """The job's digest, or why it could not be read."""
    try:
        d = job.spec.open().digest_of(job.url, buffer)
    except OSError as exc:
        return DigestResult(job.key, job.side, error=f"cannot read {fsutil.display(job.url)}: "
                                                     f"{exc.strerror or exc}")
    return DigestResult(job.key, job.side, d.hexdigest(), d.size)


def digest_runner(buffer_size: int, attempt: str
                  ) -> Callable[[list[DigestUnit]], Iterator[Iterable[DigestResult]]]:
    """``distcp.spark.arrow`` runner factory: each unit's results, one buffer per task."""
    buffer = ReadBuffer(buffer_size)

    def run(units: list[DigestUnit]) -> Iterator[Iterable[DigestResult]]:
        for unit in units:
            with applied_environment(unit.env):
                yield list(_run_unit(unit, buffer, attempt))

    return run


def _run_unit(unit: DigestUnit, buffer: bytearray, attempt: str) -> Iterator[DigestResult]:
    counter = Counter(unit, attempt)
    for job in unit.jobs:
        result = digest_one(job, buffer)
        counter.add(result.size)
        yield result
    counter.write()


class Counter:
    """A task's files and bytes read, written at most once a second for the driver's
    progress line (a small document works wherever executors run)."""

    INTERVAL_S = 1.0

    def __init__(self, unit: DigestUnit, attempt: str) -> None:
        self.url = fsutil.join(unit.progress, f"u{unit.unit_id}-{attempt}.json") \
            if unit.progress else ""
        self.options = dict(unit.progress_options)
        self.files = self.bytes = 0
        self.last = time.monotonic()

    def add(self, nbytes: int) -> None:
        self.files += 1
        self.bytes += nbytes
        if time.monotonic() - self.last >= self.INTERVAL_S:
            self.write()

    def write(self) -> None:
        self.last = time.monotonic()
        if not self.url:
            return
        try:
            storage_for(self.url, self.options).write_atomic_pieces(
                self.url, (json.dumps({"files": self.files, "bytes": self.bytes}).encode(),),
                durable=False, make_folder=False)
        except OSError:
            pass  # progress is a courtesy: the digests are what counts
