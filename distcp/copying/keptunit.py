"""A work unit of chunks of copy-rows files, its results kept in a file (executor).

The copy task of a dataset whose files to copy stayed on the executors
(``distcp.copying.copyrows``): it reads its chunks, copies their files exactly as any
work unit's (``stream_work_unit``), and writes the results to a file of its own
(``distcp.copying.resultfiles``); the driver receives one UnitReport per task.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from distcp.copying.copyrows import Chunk, read_chunk
from distcp.copying.resultfiles import ResultsWriter, UnitReport
from distcp.copying.task import runner_of, stream_work_unit
from distcp.copying.taskspec import TaskSpec
from distcp.model import WorkUnit
from distcp.storage import filesystems as fsutil


@dataclass(frozen=True)
class KeptUnit:
    """Chunks of copy-rows files one task copies (a few hundred bytes to send)."""

    unit_id: int
    chunks: tuple[Chunk, ...]

    @property
    def files(self) -> int:
        return sum(c.files for c in self.chunks)


def results_url(spec: TaskSpec, unit_id: int, attempt: str) -> str:
    """This attempt's results file: a retried task writes a new one, and only the file
    of the attempt whose report reached the driver is ever read."""
    return fsutil.join(spec.staging_root, "results", f"u{unit_id}-{attempt}.parquet")


def run_kept_unit(unit: KeptUnit, spec: TaskSpec, attempt: str) -> Iterator[UnitReport]:
    files = tuple(f for chunk in unit.chunks for f in read_chunk(chunk, spec.dst_options))
    # by origin, not guid: a second sha1 per file cost more than the dict (files of
    # one origin share its FileStatus, all the writer reads of them)
    by_origin = {f.origin.url: f for f in files}
    writer = ResultsWriter(unit.unit_id, results_url(spec, unit.unit_id, attempt),
                           spec.dst_options)
    for result in stream_work_unit(WorkUnit(unit.unit_id, files), spec, attempt):
        writer.add(result, by_origin[result.origin])
    yield writer.close()


def kept_runner(spec: TaskSpec, attempt: str
                ) -> Callable[[list[KeptUnit]], Iterator[Iterator[UnitReport]]]:
    """What a Spark task attempt runs (through ``distcp.spark.arrow``) for KeptUnits."""
    return runner_of(spec, lambda unit: run_kept_unit(unit, spec, attempt))
