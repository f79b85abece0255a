"""Per-file commit steps carried out as a Spark job, ``--publishing`` (driver).

``fan_out`` is the run's ``CommitContext.fan_out``: for a step worth it
(``commit.fanout.worth_fanning``) it cuts the step into pieces, runs one task per
piece, and raises PublishError naming the first piece that failed. The sequence is
persisted before and removed after, by the caller, as for any step; so a failed or
killed job leaves it for the replay, which fans out again (or runs it here).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distcp.commit.fanout import (
    MIN_PIECE,
    Piece,
    entries_of,
    piece_runner,
    pieces,
    worth_fanning,
)
from distcp.commit.steps import CommitContext, CommitStep
from distcp.copying.taskenv import task_environment
from distcp.errors import PublishError
from distcp.spark.arrow import run_pickled
from distcp.spark.jvm import is_local_master
from distcp.spark.listing import LazySession

#: Pieces per core: a few, so one slow piece does not hold the step.
PIECES_PER_CORE = 2


def fan_out_with(session: LazySession, mode: str, master: str
                 ) -> Callable[[CommitStep, CommitContext], bool] | None:
    """The run's ``CommitContext.fan_out`` for ``--publishing MODE`` (None: driver)."""
    if mode == "driver":
        return None
    cluster = not is_local_master(master)

    def fan_out(step: CommitStep, ctx: CommitContext) -> bool:
        entries = entries_of(step)
        if not entries:
            return False
        if not worth_fanning(mode, entries, step.works_on(ctx).capabilities,
                             session.started, cluster):
            return False
        run_on_spark(session(), step, ctx)
        return True

    return fan_out


def run_on_spark(spark: Any, step: CommitStep, ctx: CommitContext) -> None:
    """One task per piece of ``step``; PublishError if any piece failed or the job did."""
    from distcp.spark.session import default_parallelism

    env = task_environment()
    cut = pieces(step, PIECES_PER_CORE * default_parallelism(spark), MIN_PIECE)
    items = [(n, Piece(p, ctx.dst_options, ctx.src_options, env)) for n, p in enumerate(cut)]
    try:
        outcomes = run_pickled(spark, items, piece_runner)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a lost executor, a killed worker: the replay finishes
        raise PublishError(f"the tasks carrying out {step.kind} of {entries_of(step)} "
                           f"file(s) failed: {_first_line(exc)}") from exc
    failed = [o for o in outcomes if o.error]
    if failed:
        more = f" (and {len(failed) - 1} more piece(s))" if len(failed) > 1 else ""
        raise PublishError(f"{failed[0].error}{more}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
