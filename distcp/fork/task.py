"""Copy each file of a fork unit once from its source into every branch it goes to (executor).

The source is opened and read once (``distcp.fork.tee``); each branch stages its share
through its own converters into its own staging folder, exactly as a plain copy stages
(``distcp.copying.task.stage_outputs``), and journals it in its own progress folder,
so each branch's destination recovers like a plain copy's. The source is proved
unchanged once, after every branch has finished; if it changed, every branch fails
the file. Results carry their branch's name; the driver splits them by branch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from distcp import request_count
from distcp.copying.outputs import Outputs
from distcp.copying.progress import Progress
from distcp.copying.results import ResultKey, failed
from distcp.copying.sources import check_unchanged, open_source
from distcp.copying.task import discard_outputs, runner_of, spill_dir, stage_outputs
from distcp.copying.taskspec import TaskSpec
from distcp.faults import delay_at, fail_point
from distcp.fork.tee import Tee
from distcp.model import CopyableFile, TaskResult
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.buffers import ReadBuffer

#: The tee's read size: the queues hold chunks of this many bytes at most.
CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class ForkedFile:
    """One origin file and, for each branch it goes to, that branch's CopyableFile
    (its destination, converters and attributes)."""

    targets: tuple[tuple[int, CopyableFile], ...]

    @property
    def lead(self) -> CopyableFile:
        return self.targets[0][1]


@dataclass(frozen=True, slots=True)
class ForkUnit:
    """What one Spark task of a fork run does: several forked files."""

    unit_id: int
    files: tuple[ForkedFile, ...]


@dataclass(frozen=True)
class ForkSpec:
    """What every task of a fork run needs: each branch's TaskSpec and the queues'."""

    names: tuple[str, ...]
    specs: tuple[TaskSpec, ...]
    queue: int = 4
    queue_timeout: float = 600.0


def fork_runner(fork: ForkSpec, attempt: str
                ) -> Callable[[list[ForkUnit]], Iterator[Iterator[TaskResult]]]:
    """What a Spark task attempt of a fork run runs (``distcp.spark.arrow``)."""
    return runner_of(fork.specs[0], lambda unit: fork_unit(unit, fork, attempt))


def fork_unit(unit: ForkUnit, fork: ForkSpec, attempt: str) -> Iterator[TaskResult]:
    """Every result of ``unit``, file by file, each branch's journalled in its folder."""
    used = sorted({b for f in unit.files for b, _ in f.targets})
    dirs = {b: fsutil.join(fork.specs[b].staging_root, f"u{unit.unit_id}-{attempt}")
            for b in used}
    for b in used:
        storage_for(dirs[b], fork.specs[b].dst_options).makedirs(dirs[b])
    progress = {b: Progress(fork.specs[b], unit.unit_id, attempt) for b in used}
    buffers: dict[int, bytearray] = {b: ReadBuffer(fork.specs[b].buffer_size) for b in used}
    with ExitStack() as stack:
        for p in progress.values():
            stack.enter_context(p.ticking())
        for index, forked in enumerate(unit.files):
            with request_count.counting() as tally:
                done = copy_forked(forked, unit.unit_id, attempt, dirs, index, fork, buffers)
            for n, (b, file, outputs) in enumerate(done):
                if n == 0:
                    outputs.amend_first(requests=tally.items())
                progress[b].advance(file, outputs)
                yield from outputs
                outputs.close()
    for p in progress.values():
        p.flush()


def copy_forked(forked: ForkedFile, unit_id: int, attempt: str, dirs: dict[int, str],
                index: int, fork: ForkSpec, buffers: dict[int, bytearray]
                ) -> list[tuple[int, CopyableFile, Outputs]]:
    """Read ``forked``'s source once into each of its branches; each branch's outputs
    (or its one failed result), tagged with the branch's name."""
    targets = forked.targets
    lead_spec = fork.specs[targets[0][0]]
    keys = {b: ResultKey.of(f, unit_id, attempt) for b, f in targets}
    outs = {b: Outputs(spill_dir(fork.specs[b], dirs[b])) for b, _ in targets}
    errors: dict[int, BaseException] = {}
    try:
        reader = open_source(forked.lead, lead_spec)
    except Exception as exc:  # noqa: BLE001 - reported as data, one result per branch
        errors = dict.fromkeys(outs, exc)
        return _finish(forked, keys, outs, errors, fork, None, 0)
    tee = Tee(reader, [fork.names[b] for b, _ in targets], fork.queue, fork.queue_timeout,
              chunk=min(CHUNK, len(buffers[targets[0][0]])))

    def branch(i: int, b: int, file: CopyableFile) -> None:
        try:
            point = f"fork_branch:{fork.names[b]}"
            fail_point(point)
            stage_outputs(file, keys[b], tee.stream(i, delay_at(point)), dirs[b], index,
                          fork.specs[b], buffers[b], outs[b])
        except BaseException as exc:  # noqa: BLE001 - reported as data for this branch
            errors[b] = exc
        finally:
            tee.detach(i)

    if tee.read_ahead():  # all of it fits each branch's queue: no thread per branch
        try:
            tee.pump()
            for i, (b, f) in enumerate(targets):
                branch(i, b, f)
        finally:
            if not reader.closed:
                reader.close()
        return _checked(forked, keys, outs, errors, fork, tee, reader, lead_spec)
    threads = [threading.Thread(target=branch, args=(i, b, f), daemon=True,
                                name=f"fork-{fork.names[b]}")
               for i, (b, f) in enumerate(targets)]
    for t in threads:
        t.start()
    try:
        tee.pump()
    finally:
        for t in threads:
            t.join()
        if not reader.closed:
            reader.close()
    return _checked(forked, keys, outs, errors, fork, tee, reader, lead_spec)


def _checked(forked: ForkedFile, keys: dict[int, ResultKey], outs: dict[int, Outputs],
             errors: dict[int, BaseException], fork: ForkSpec, tee: Tee, reader: Any,
             lead_spec: TaskSpec) -> list[tuple[int, CopyableFile, Outputs]]:
    """The branches' outputs once the source is known unchanged since its listing."""
    targets = forked.targets
    try:
        if len(errors) < len(targets):
            check_unchanged(forked.lead, reader, lead_spec)
    except Exception as exc:  # noqa: BLE001 - the source changed: no branch keeps it
        errors.update({b: exc for b in outs if b not in errors})
    return _finish(forked, keys, outs, errors, fork, tee, reader.count)


def _finish(forked: ForkedFile, keys: dict[int, ResultKey], outs: dict[int, Outputs],
            errors: dict[int, BaseException], fork: ForkSpec, tee: Tee | None,
            bytes_read: int) -> list[tuple[int, CopyableFile, Outputs]]:
    """Each branch's outputs with its name and queue statistics; a failed branch's
    staged outputs discarded. The one read's bytes go to the first branch's result."""
    stats = tee.stats() if tee is not None else []
    done = []
    for i, (b, file) in enumerate(forked.targets):
        name = fork.names[b]
        outputs = outs[b]
        if b in errors:
            discard_outputs(outputs, fork.specs[b])
            outputs = Outputs.of([failed(keys[b].result(file.destination), errors[b])])
        outputs = outputs.rewritten(partial(_tagged, branch=name))
        if stats:
            outputs.amend_first(queue=stats[i].as_pairs())
        if i == 0:
            outputs.amend_first(bytes_read=bytes_read)
        done.append((b, file, outputs))
    return done



def _tagged(r: TaskResult, branch: str) -> TaskResult:
    """``r`` as branch ``branch``'s: a failure's message names the branch."""
    if r.ok or f"branch {branch!r}" in r.message:
        return replace(r, branch=branch)
    return replace(r, branch=branch, message=f"{r.message} (fork branch {branch!r})")
