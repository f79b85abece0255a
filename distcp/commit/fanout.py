"""Per-file commit steps cut into pieces for publishing tasks (driver and executor).

The coordinator still decides and records: a file set's commit sequence is persisted
before its first step, as always. What changes is who carries out a step that does
one independent thing per file (renames, multipart completes, digest checks of
joined files, source deletes of ``move``): it is cut into pieces of the same kind,
each holding some of the step's entries, and each piece runs as a Spark task that
verifies and executes it (``run_piece``). A piece is an ordinary commit step, so
what makes the step safe makes the pieces safe: each entry is idempotent and judged
from the target's observed state. A task killed mid-rename fails the job, the
sequence stays in the commit log, and its replay (the next run, or ``recover`` on
the driver) verifies every piece again and finishes what is left.

The pure parts live here (no pyspark): which steps can be cut and how, whether it
is worth it, and the executor's side. ``distcp.spark.publish`` submits the job.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from distcp.commit.steps import CommitContext, CommitStep
from distcp.copying.taskenv import applied_environment
from distcp.errors import PublishError, StateError
from distcp.storage import Capabilities

#: Entries a piece holds at least: below that a task costs more than it saves.
MIN_PIECE = 256


@dataclass(frozen=True)
class Piece:
    """One task's share of a step, with what the task needs to run it. Travels to an
    executor; the options may hold secrets and are never persisted or shown."""

    step: CommitStep
    dst_options: dict[str, Any] = field(default_factory=dict, repr=False)
    src_options: dict[str, Any] = field(default_factory=dict, repr=False)
    #: The client's task variables (credentials, fault points): ``copying.taskenv``.
    env: dict[str, str] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class PieceOutcome:
    """What one piece did: how many entries it holds, and its error if it failed."""

    entries: int
    error: str = ""


def entries_of(step: CommitStep) -> int:
    """The files of ``step``'s per-file entries; 0 for a step that cannot be cut."""
    return step.file_count()


#: Renames on a local master worth two cores: a million files' publish took 6.0-6.1 s in
#: publishing tasks against 8.0-8.6 s on the driver (warm engine, 2 cores), and 100,000
#: files' 0.90-0.98 s against 0.83-0.87 s.
LOCAL_FAN_OUT_FROM = 500_000


def worth_fanning(mode: str, entries: int, capabilities: Capabilities,
                  session_open: bool, cluster: bool) -> bool:
    """Whether executors should carry out a step of ``entries`` per-file entries.

    ``driver`` never; ``spark`` whenever the step can be cut; ``auto`` when a Spark
    session is already open (publishing never starts Spark for itself) and the step is
    large for its storage (``Capabilities.fan_out_from``: a local rename takes
    microseconds, a multipart complete a request), on a cluster. On a local master the
    executors share the driver's cores (measured slower there, see
    benchmarks/bench_commit.py), except for a local filesystem's step of LOCAL_FAN_OUT_FROM
    entries or more, where the driver's Python per file, not the storage, sets the pace."""
    if mode == "driver" or entries == 0:
        return False
    if mode == "spark":
        return True
    if not cluster:
        return session_open and capabilities.local_paths and entries >= LOCAL_FAN_OUT_FROM
    return session_open and entries >= capabilities.fan_out_from


def pieces(step: CommitStep, tasks: int, min_piece: int = MIN_PIECE) -> list[CommitStep]:
    """``step`` cut into at most ``tasks`` contiguous pieces of at least ``min_piece``
    entries (one piece when it is small), each a step of the same kind."""
    entries = tuple(getattr(step, step.per_file))
    count = max(1, min(tasks, len(entries) // max(1, step.min_piece or min_piece)))
    size, extra = divmod(len(entries), count)
    out: list[CommitStep] = []
    start = 0
    for n in range(count):
        end = start + size + (1 if n < extra else 0)
        out.append(replace(step, **{step.per_file: entries[start:end]}))  # type: ignore[type-var]
        start = end
    return out


def run_piece(piece: Piece) -> Iterator[PieceOutcome]:
    """Executor side: verify the piece, execute it if not done. A storage error is
    reported, not raised (the driver names it); a killed worker fails the Spark job."""
    ctx = CommitContext(dst_options=piece.dst_options, src_options=piece.src_options)
    with applied_environment(piece.env):
        try:
            if not piece.step.verify(ctx):
                piece.step.execute(ctx)
        except (OSError, PublishError, StateError) as exc:
            yield PieceOutcome(entries_of(piece.step), f"{piece.step.kind} failed: {exc}")
            return
    yield PieceOutcome(entries_of(piece.step))


def piece_runner(attempt: str) -> Any:
    """``spark.arrow``'s runner factory: each item is a Piece."""
    def run(items: list[Piece]) -> Iterator[Iterator[PieceOutcome]]:
        return (run_piece(p) for p in items)
    return run
