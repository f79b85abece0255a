"""Run one WorkUnit and return its results as data (executor).

Spark carries an executor exception to the driver only as a traceback string,
so every per-file failure becomes a failed TaskResult naming the file and the
cause. This module must import without pyspark (it runs in plain processes in
tests and on executors whose PySpark is only the worker side).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

from distcp import collection, request_count, timeline
from distcp.converters.base import NOT_EXPANDED, ConverterOptions, build_chain, chain
from distcp.copying.outputs import Outputs
from distcp.copying.progress import JOURNAL, Progress
from distcp.copying.results import ResultKey, failed
from distcp.copying.sources import (
    SMALL_OBJECT,
    check_body,
    check_read,
    check_unchanged,
    one_get,
    open_source,
    opened_source,
    read_together,
    recheck_source,
)
from distcp.copying.symlinks import apply_link_attributes, stage_link
from distcp.copying.taskenv import applied_environment
from distcp.copying.taskspec import TaskSpec
from distcp.copying.writer import SourceReader, stage_stream
from distcp.errors import (
    CopyError,
    DestinationNameError,
    QualityCheckError,
    StateCollisionError,
)
from distcp.faults import armed, crash_point, delay_at
from distcp.model import CopyableFile, TaskResult, WorkUnit
from distcp.quality.base import StagedOutput
from distcp.quality.checklist import CheckRun, TeeStream
from distcp.storage import (
    NO_SERVER_SIDE,
    ServerSideCopyUnsupported,
    Storage,
    bounded_by,
    parse_staged,
    storage_for,
)
from distcp.storage import filesystems as fsutil
from distcp.storage.buffers import ReadBuffer
from distcp.storage.filesystems import os_path
from distcp.storage.staged import Staged
from distcp.storage.staging import StagedStream, StageWriter
from distcp.streams import FileAwareInputStream

U = TypeVar("U")
R = TypeVar("R")

__all__ = ["JOURNAL", "copy_file", "run_work_unit", "stream_work_unit", "unit_runner"]


def run_work_unit(unit: WorkUnit, spec: TaskSpec, attempt: str) -> list[TaskResult]:
    """Copy every file of ``unit`` into this attempt's private staging directory;
    its results as a list (``stream_work_unit`` is what Spark tasks run)."""
    return list(stream_work_unit(unit, spec, attempt))


def stream_work_unit(unit: WorkUnit, spec: TaskSpec, attempt: str) -> Iterator[TaskResult]:
    """The results of ``unit``, each file's as soon as that file is done.

    A task's memory must not grow with what it copies (an archive of a million
    members): results leave as they come, through ``distcp.spark.arrow``. The task's
    own S3 requests (its progress documents, a range's requests) are counted into
    its last result, held back for that; each file's are in that file's result.
    """
    last: TaskResult | None = None
    timeline.worker_task()
    # per file a result, a journal entry, statuses: no cycles, no collector passes
    with request_count.counting() as tally, collection.paused():
        for result in _run_unit(unit, spec, attempt):
            if last is not None:
                yield last
            else:
                timeline.mark_once("worker's first file done")
            last = result
    if last is not None:
        yield replace(last, requests=request_count.merge(last.requests, tally.items()))


def _run_unit(unit: WorkUnit, spec: TaskSpec, attempt: str) -> Iterator[TaskResult]:
    if spec.protected:
        unit, refused = _without_refused(unit, spec, attempt)
        yield from refused
        if not unit.files:
            return
    if unit.split is not None:
        yield _run_range(unit, spec, attempt)
        return
    staging_dir = fsutil.join(spec.staging_root, f"u{unit.unit_id}-{attempt}")
    storage_for(staging_dir, spec.dst_options).makedirs(staging_dir)
    progress = Progress(spec, unit.unit_id, attempt)
    pause = delay_at("after_stage")  # lets a test kill a worker mid-copy
    crash = armed("after_stage")
    crash_first = attempt.endswith("a0") and armed("first_attempt_after_stage")
    with progress.ticking():
        for file, done in _copy_files(unit, attempt, staging_dir, spec):
            progress.advance(file, done)
            if crash:
                crash_point("after_stage")
            if pause:  # time.sleep(0) still costs ~85 µs: a fifth of a small file's copy
                time.sleep(pause)
            if crash_first:  # lets tests force a Spark retry
                crash_point("first_attempt_after_stage")
            yield from done
            done.close()
    progress.flush()


def _without_refused(unit: WorkUnit, spec: TaskSpec, attempt: str
                     ) -> tuple[WorkUnit, list[TaskResult]]:
    """The unit less its files whose destination lies in a protected folder or cannot
    hold its name, and those files failed by name: the rest of the unit is copied."""
    keep: list[CopyableFile] = []
    refused: list[TaskResult] = []
    for file in unit.files:
        try:
            spec.refuse_protected(file.origin.url, file.destination)
        except (StateCollisionError, DestinationNameError) as exc:
            refused.append(failed(ResultKey.of(file, unit.unit_id, attempt).result(
                file.destination), exc))
        else:
            keep.append(file)
    return (replace(unit, files=tuple(keep)) if refused else unit), refused


#: The least read buffer of a unit whose files are all smaller than ``--buffer-size``.
SMALL_BUFFER = 64 << 10


def unit_buffer_size(unit: WorkUnit, spec: TaskSpec) -> int:
    """The size of the buffer a unit's copy reads into (one per copying thread, sized
    once per unit): ``--buffer-size``, or the unit's largest file rounded up to
    ``SMALL_BUFFER`` when every file is smaller and none is converted (a converter's
    output has no size known here).

    A buffer of 8 MiB costs about 7 ms to map and fault in (AMD EPYC, 2026-11-30), and a
    unit of small objects from S3 has 32 threads with one each: about 0.23 s of CPU per
    unit of 1,000 files, 4.6 s for 20,000 objects of 64 B (1.2 MiB). A smaller
    buffer only reads a file that grew since its listing in more pieces; what sizes an
    upload's parts is ``--buffer-size`` itself (``open_stage``'s ``buffer_size``)."""
    if any(f.converters for f in unit.files):
        return spec.buffer_size
    largest = max((f.origin.size for f in unit.files), default=0)
    return min(spec.buffer_size, max(1, -(-largest // SMALL_BUFFER)) * SMALL_BUFFER)


#: Files one task copies at a time when a remote end makes each file a few round trips.
FILES_IN_FLIGHT = 8
#: ... and when every file is a small object read in one GET (SMALL_OBJECT bytes or less):
#: latency alone sets the pace, and threads that wait cost little.
SMALL_IN_FLIGHT = 32


def _copy_files(unit: WorkUnit, attempt: str, staging_dir: str, spec: TaskSpec
                ) -> Iterator[tuple[CopyableFile, Outputs]]:
    """Each file of ``unit`` with its results, in the unit's order.

    Local to local, one file after another is as fast as the disk. When a side is
    remote, a small file costs several requests whose latency, not bandwidth, sets
    the pace (on S3: CreateMultipartUpload, UploadPart), so up to FILES_IN_FLIGHT
    files are copied at once, each by a thread with its own buffer. Converted files
    stay one at a time: a converter chain has its own memory bound per task.
    """
    remote = not spec.dst.capabilities.local_paths or any(
        fsutil.local_path(f.origin.url) is None  # a string's test before a storage's
        and not storage_for(f.origin.url, spec.src_options).capabilities.local_paths
        for f in unit.files)
    now = set(unit.publish_now)
    # into local staging, each file under its final name: a folder the unit fills whole
    # is published by one rename (an S3 -> local copy of 20,000 objects renamed each);
    # staging folders are made with ``os``, so only on a local destination
    folders = Folders(staging_dir) if spec.dst.capabilities.local_paths else None
    if not remote or len(unit.files) < 2 or any(f.converters for f in unit.files):
        buffer = ReadBuffer(unit_buffer_size(unit, spec))
        # a plain file's own way: nothing per file counted, it sends no request
        side = _plain_side(spec)
        storage = spec.dst.open()  # asked once: a plain file's copy is some 20 µs of Python
        for index, file in enumerate(unit.files):
            if side and folders is not None and file.origin.link_target is None \
                    and _plain_file(file, spec) and not (now and file.guid in now):
                yield file, Outputs.one(_copy_plain(
                    file, ResultKey.of(file, unit.unit_id, attempt),
                    folders.staging_url(file.destination), spec, buffer, storage))
                continue
            yield file, _file_outputs(file, unit.unit_id, attempt, staging_dir, index, spec,
                                      buffer, publish_now=bool(now) and file.guid in now,
                                      folders=folders)
        return
    local = threading.local()
    size = unit_buffer_size(unit, spec)  # the unit's files read once, not by each thread
    small = all(one_get(f) for f in unit.files)

    def copy(index: int, body: bytes | None = None, publish: Publish | None = None
             ) -> Outputs:
        if not hasattr(local, "buffer"):
            local.buffer = ReadBuffer(size)
        file = unit.files[index]
        publish_now = bool(now) and file.guid in now
        if body is not None and folders is not None and not publish_now:
            done = _copy_body(file, ResultKey.of(file, unit.unit_id, attempt),
                              folders, spec, body, local.buffer)
            if done is not None:
                return Outputs.of([done])
        return _file_outputs(file, unit.unit_id, attempt, staging_dir, index, spec,
                             local.buffer, publish_now=publish_now,
                             folders=folders, body=body, publish=publish)

    def copy_all(indices: list[int]) -> Iterator[tuple[int, Outputs]]:
        if not indices:
            return
        with ThreadPoolExecutor(min(SMALL_IN_FLIGHT if small else FILES_IN_FLIGHT,
                                    len(indices))) as pool:
            futures = [pool.submit(copy, i) for i in indices]
            for index, future in zip(indices, futures):
                yield index, future.result()

    fetched = read_together(unit.files, spec) if small and _plain_side(spec) else None
    if fetched is not None:  # staged by this thread as each file's bytes arrive
        yield from _in_order(unit.files, (
            (index, None if body is None else copy(index, body)) for index, body in fetched),
            copy_all)
        return
    sent = _send_together(unit.files, spec, copy) \
        if now and all(f.guid in now for f in unit.files) else None
    if sent is not None:
        yield from _in_order(unit.files, sent, copy_all)
        return
    for index, done in copy_all(list(range(len(unit.files)))):
        yield unit.files[index], done


def _in_order(files: tuple[CopyableFile, ...], done: Iterator[tuple[int, Outputs | None]],
              copy_all: Callable[[list[int]], Iterator[tuple[int, Outputs]]]
              ) -> Iterator[tuple[CopyableFile, Outputs]]:
    """``_copy_files`` for a unit whose storage reads or writes many files at once
    from this thread (``read_together``, ``_send_together``): each file's outputs as
    ``done`` gives them, in the unit's order. The files it did not copy (None), and
    every file left if it breaks, are copied their usual way afterwards, on the task's
    threads (``copy_all``): a server that stopped answering costs their bounds at
    once, not one after the other."""
    ready: dict[int, Outputs] = {}
    later: list[int] = []
    following = 0
    for index, outputs in _until_broken(done):
        if outputs is None:
            later.append(index)
            continue
        ready[index] = outputs
        while following in ready:
            yield files[following], ready.pop(following)
            following += 1
    given = set(ready).union(later, range(following))
    later += [i for i in range(following, len(files)) if i not in given]
    ready.update(copy_all(sorted(later)))
    for index in range(following, len(files)):
        yield files[index], ready.pop(index)


#: The step of ``_copy_file`` that publishes a checked source's held outputs at once
#: (per-file visibility): ``_publish_now`` unless the caller sends them itself.
Publish = Callable[[Outputs, "HeldBodies"], Outputs]


def _send_together(files: tuple[CopyableFile, ...], spec: TaskSpec,
                   copy: Callable[[int, None, Publish], Outputs]
                   ) -> Iterator[tuple[int, Outputs | None]] | None:
    """Per-file visibility for a unit of small local files, where the destination's
    storage writes many at once from this thread (``Storage.publish_wholes``; the
    threads of ``copy_all`` each waited on one PutObject, and handed the GIL to each
    other 68 times a file): each file is staged and checked here when the storage can
    take its bytes, held in memory as ``_copy_file`` holds it, and published by the
    storage. Its outputs come as they are published; None for a file the storage did
    not write (copied again its usual way). A file whose outputs are not one held
    body (it failed, or it grew past a part) is published its usual way here."""
    if not spec.dst.capabilities.file_visibility or not all(_sendable(f, spec) for f in files):
        return None
    held: dict[int, tuple[Outputs, HeldBodies]] = {}
    finished: dict[int, Outputs] = {}

    def body(index: int) -> bytes | None:
        def hold(done: Outputs, bodies: HeldBodies) -> Outputs:
            if len(bodies) != 1 or len(done) != 1:
                return _publish_now(done, bodies, spec)
            held[index] = (done, bodies)
            return done
        done = copy(index, None, hold)
        if index not in held:
            finished[index] = done
            return None
        return next(iter(held[index][1].values()))

    storage = spec.dst.open()
    sent = storage.publish_wholes([f.destination for f in files], body)
    if sent is None:
        return None

    def outputs() -> Iterator[tuple[int, Outputs | None]]:
        for index, staged, requests in sent:
            if index in finished:
                yield index, finished.pop(index)
                continue
            done, bodies = held.pop(index, (None, HeldBodies()))
            if staged is None or done is None:
                if done is not None:
                    discard_outputs(done, spec)  # held in memory only: nothing to remove
                yield index, None
                continue
            done = _publish_now(done, bodies, spec, staged)
            done.amend_first(requests=request_count.merge(done.first().requests, requests))
            yield index, done
    return outputs()


def _sendable(file: CopyableFile, spec: TaskSpec) -> bool:
    """A file ``_send_together`` may take: a small local file copied as it is."""
    return (not file.converters and file.origin.link_target is None
            and file.origin.size <= SMALL_OBJECT and _plain_file(file, spec))


def _until_broken(pairs: Iterator[R]) -> Iterator[R]:
    """``pairs`` until they end or raise: a way of reading that broke leaves what it did
    not give to the usual one, whose errors name the cause."""
    with contextlib.suppress(Exception):
        yield from pairs


def _run_range(unit: WorkUnit, spec: TaskSpec, attempt: str) -> TaskResult:
    from distcp.copying.ranges import copy_range

    file, split = unit.files[0], unit.split
    assert split is not None
    key = ResultKey.of(file, unit.unit_id, attempt)
    buffer = ReadBuffer(spec.buffer_size)
    by_store = server_side(file, spec) and spec.server_side_ranges
    return copy_range(file, split, replace(spec, server_side=by_store), key, buffer)


def server_side(file: CopyableFile, spec: TaskSpec) -> bool:
    """Whether the store copies this file itself (S3 -> S3, one endpoint, no converter,
    no ``--check``: checks see the bytes pass)."""
    return (spec.server_side and not file.converters and not spec.checks
            and spec.dst.serves(file.origin.url))


def copy_file(file: CopyableFile, unit_id: int, attempt: str, staging_dir: str, index: int,
              spec: TaskSpec, buffer: bytearray, publish_now: bool = False) -> list[TaskResult]:
    """Stage every output of one origin file; on any failure, stage nothing of it.

    ``publish_now`` (S3 destinations): make the outputs visible as soon as the source
    is checked (per-file visibility). The file's S3 requests go into its first result.
    """
    outputs = _file_outputs(file, unit_id, attempt, staging_dir, index, spec, buffer,
                            publish_now)
    try:
        return list(outputs)
    finally:
        outputs.close()


def _file_outputs(file: CopyableFile, unit_id: int, attempt: str, staging_dir: str,
                  index: int, spec: TaskSpec, buffer: bytearray, publish_now: bool = False,
                  folders: Folders | None = None, body: bytes | None = None,
                  publish: Publish | None = None) -> Outputs:
    """``copy_file``'s results, spilled to local disk when there are many (an archive);
    ``body``: the file's bytes, already read (``read_together``); ``publish``: how
    held outputs are published (``_send_together``)."""
    with request_count.counting() as tally:
        results = _copy_file(file, unit_id, attempt, staging_dir, index, spec, buffer,
                             publish_now and spec.dst.capabilities.file_visibility, folders,
                             body, publish)
    requests = tally.items()
    if requests:  # amending costs a copy of the result: most files send none
        results.amend_first(requests=requests)
    return results


def plain(file: CopyableFile, spec: TaskSpec) -> bool:
    """A file copied as it is from one local path into local staging: no converter, no
    check, no bandwidth limit. The kernel copies it (``distcp.storage.local.copyfile``) and
    the stream layers a converter or a check needs are skipped: they cost more than the
    copy itself for a small file (one task, 64-byte files: 111 µs a file through them,
    82 without; the bare system calls take 27)."""
    return _plain_side(spec) and _plain_file(file, spec)


def _plain_side(spec: TaskSpec) -> bool:
    """``plain``'s part that is the task's: asked once per unit, not per file."""
    return not spec.checks and spec.bwlimit is None and spec.dst.capabilities.local_paths


def _plain_file(file: CopyableFile, spec: TaskSpec) -> bool:
    """``plain``'s part that is the file's (a plain path is local without asking)."""
    url = file.origin.url
    return not file.converters and (
        fsutil.local_path(url) is not None
        or storage_for(url, spec.src_options).capabilities.local_paths)


class Folders:
    """The staging folders of one task attempt's plain files: one per final folder, each
    staged file under its final name, so that a final folder the run creates is
    published by renaming its staging folder (``LocalStorage.publish_all``): one rename
    instead of one per file, the most of a first copy's publish (100,000 files in 1,000
    folders: 0.13 s against 1.16 s here). Numbered in the order the unit meets them."""

    def __init__(self, staging_dir: str) -> None:
        self.root, self.number = staging_dir, dict[str, int]()
        self._lock = threading.Lock()  # a unit's threads share them

    def staging_url(self, final: str) -> str:
        parent, name = final.rsplit("/", 1)
        n = self.number.get(parent)
        if n is None:
            with self._lock:
                n = self.number.get(parent)
                if n is None:
                    n = len(self.number)
                    os.makedirs(os_path(f"{self.root}/d{n}"), exist_ok=True)
                    self.number[parent] = n
        return f"{self.root}/d{n}/{name}"


def _copy_plain(file: CopyableFile, key: ResultKey, staging_url: str, spec: TaskSpec,
                buffer: bytearray, storage: Storage | None = None) -> TaskResult:
    """``_copy_file``'s steps for a ``plain`` file, in the same order and with the same
    guarantees: the bytes read are hashed, the staged copy is verified, given its
    attributes, and the source is proved unchanged; any failure stages nothing. A small
    file with no owner to set is staged by one call of the storage where it offers one
    (``Storage.stage_small_file``: local staging), else through its writer; ``storage``:
    the destination's, when the caller has it open already."""
    writer: StageWriter | None = None
    small: tuple[int, str] | None = None
    read = 0
    if storage is None:
        storage = spec.dst.open()
    try:
        source = opened_source(file)
        with source as fd:
            assert source.st is not None  # set by opening it
            shown = fsutil.display(file.origin.url)
            small = storage.stage_small_file(
                fd, source.st, staging_url, mode=file.mode, mtime=_kept_mtime(file),
                verify=spec.verify, buffer=buffer, source=shown,
            ) if file.owner is None and file.group is None else None
            if small is not None:
                read, checksum = small
                size, text = read, staging_url  # a staged path's text is the path itself
            else:
                writer = storage.open_stage(file.destination, staging_url,
                                            verify=spec.verify, size_hint=file.origin.size,
                                            buffer_size=spec.buffer_size)
                digest = writer.copy_file(fd, buffer, shown, source.st)
                assert digest is not None  # local staging copies files (copies_files)
                read = digest.size
                _keep_attributes(storage, staging_url, file, spec, writer=writer)
                staged = writer.commit(digest, buffer)
                size, checksum, text = staged.size, staged.checksum, staged.text
        check_read(file, read, spec)
    except Exception as exc:  # noqa: BLE001 - reported as data, see module docstring
        if writer is not None:
            writer.abort()
        elif small is not None:  # staged whole, then the source proved changed
            storage.discard(Staged.path(staging_url))
        return failed(key.result(file.destination, bytes_read=read), exc)
    return key.copied(file.destination, text, read, size, checksum)


def _copy_body(file: CopyableFile, key: ResultKey, folders: Folders, spec: TaskSpec,
               body: bytes, buffer: bytearray) -> TaskResult | None:
    """``_copy_file``'s steps for a small object's body in hand (``read_together``,
    whose GET If-Match proved its version; it reads only under ``_plain_side``: no
    check, no bandwidth limit, a local destination) copied as it is into local
    staging: its size against the listing, then staged by one call of the storage
    (``Storage.stage_small_body``: hashed, written, given its mode and mtime,
    verified). The general way wraps the body as a stream and stages it through a
    writer: a quarter of the copying processes' time on 20,000 objects of 64 B.
    None for a file that needs that way (a converter, an owner to set, bytes the
    storage does not take at once)."""
    if file.converters or file.owner is not None or file.group is not None \
            or file.origin.link_target is not None:
        return None
    staging_url = folders.staging_url(file.destination)
    read = 0
    try:
        check_body(file, body, fsutil.display(file.origin.url))
        read = len(body)
        small = spec.dst.open().stage_small_body(
            body, staging_url, mode=file.mode, mtime=_kept_mtime(file), verify=spec.verify,
            buffer=buffer)
    except Exception as exc:  # noqa: BLE001 - reported as data, see module docstring
        return failed(key.result(file.destination, bytes_read=read), exc)
    if small is None:
        return None
    size, checksum = small
    return key.copied(file.destination, staging_url, size, size, checksum)


def _copy_file(file: CopyableFile, unit_id: int, attempt: str, staging_dir: str, index: int,
               spec: TaskSpec, buffer: bytearray, publish_now: bool,
               folders: Folders | None = None, body: bytes | None = None,
               publish: Publish | None = None) -> Outputs:
    key = ResultKey.of(file, unit_id, attempt)
    note = ""
    if file.origin.link_target is not None:
        return Outputs.of([_copy_link(file, key, f"{staging_dir}/{index}-0",
                                      spec.dst.capabilities.symlinks)])
    if plain(file, spec) and not publish_now:
        staging = folders.staging_url(file.destination) if folders else f"{staging_dir}/{index}-0"
        return Outputs.of([_copy_plain(file, key, staging, spec, buffer)])
    if server_side(file, spec):
        try:
            return Outputs.of([_copy_server_side(file, key, spec, publish_now,
                                                 f"{staging_dir}/{index}-0")])
        except ServerSideCopyUnsupported as exc:  # the bytes come through here instead
            spec, note = replace(spec, server_side=False), f"{NO_SERVER_SIDE}{exc}"
    done = Outputs(spill_dir(spec, staging_dir))
    held = HeldBodies() if publish_now else None
    reader: SourceReader | None = None
    first = folders.staging_url(file.destination) if folders is not None \
        and not file.converters and file.destination.rpartition("/")[2] else None
    try:
        reader = open_source(file, spec, body)
        stage_outputs(file, key, reader, staging_dir, index, spec, buffer, done, held, first)
        check_unchanged(file, reader, spec)
        if held is not None:  # the source is checked: only now may the objects appear
            done = publish(done, held) if publish else _publish_now(done, held, spec)
        done.amend_first(bytes_read=reader.count)
        if note:  # only a file without converters falls back here: one result
            done.amend_first(message=note)
    except Exception as exc:  # noqa: BLE001 - reported as data, see module docstring
        discard_outputs(done, spec)
        return Outputs.of([failed(key.result(file.destination,
                                             bytes_read=reader.count if reader else 0), exc)])
    finally:
        if reader is not None and not reader.closed:
            reader.close()
    return done


def stage_outputs(file: CopyableFile, key: ResultKey, stream: Any, staging_dir: str,
                  index: int, spec: TaskSpec, buffer: bytearray, done: Outputs,
                  held: HeldBodies | None = None, first: str | None = None) -> None:
    """Run ``stream`` (the origin's bytes) through the file's converters and stage each
    output into ``done`` (the first at ``first`` when given: ``Folders``). Shared by a
    plain copy and each branch of a fork (whose stream is its share of the one read,
    distcp.fork.tee). Raises on any failure; the caller discards what was staged."""
    outputs: Any = None
    try:
        converters = build_chain(file.converters, _converter_options(spec, staging_dir)
                                 ) if file.converters else []
        outputs = chain(converters, FileAwareInputStream.of(file, stream))
        notes: list[str] = []
        for n, out in enumerate(outputs):
            spec.refuse_protected(file.origin.url, out.destination)
            url = first if n == 0 and first else f"{staging_dir}/{index}-{n}"
            done.append(_stage_output(out, file, key, url, spec, buffer,
                                      held if held is None or held.room else None))
            notes = out.notes
        if notes:  # converter inputs never take the server-side path
            done.amend_first(message=NOT_EXPANDED + "; ".join(notes))
    finally:
        if outputs is not None:
            getattr(outputs, "close", lambda: None)()  # converters stop their helpers (gpg threads) before the source closes


def discard_outputs(done: Outputs, spec: TaskSpec) -> None:
    """Discard what ``done`` staged and free it (a failed file stages nothing)."""
    _discard_results(done, spec)
    done.close()


def spill_dir(spec: TaskSpec, staging_dir: str) -> str | None:
    """Where a file's many results spill: its attempt's local staging directory, else
    the system's temporary directory (staging on an object store)."""
    if storage_for(staging_dir, spec.dst_options).capabilities.local_paths:
        return os_path(staging_dir)
    return None


#: Bytes of small outputs one file holds for per-file visibility (``HeldBodies``).
HELD_MAX = 32 << 20


class HeldBodies(dict[str, bytes]):
    """Small outputs of one file kept for one PutObject each once its source is checked
    (per-file visibility). An archive of many members would hold them all: past
    HELD_MAX bytes the next outputs are staged as uploads instead, completed then."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0
        #: Each held output's kept mtime and mode (``Storage.publish_whole`` writes
        #: them where the store keeps them).
        self.mtimes: dict[str, float | int | None] = {}
        self.modes: dict[str, int | None] = {}

    def __setitem__(self, key: str, body: bytes) -> None:
        super().__setitem__(key, body)
        self.total += len(body)

    @property
    def room(self) -> bool:
        return self.total < HELD_MAX


def _copy_link(file: CopyableFile, key: ResultKey, staging_url: str,
               holds_links: bool) -> TaskResult:
    """Stage a symbolic link as a link (``--links copy``), or report why not, as data."""
    try:
        staged = stage_link(file, staging_url, holds_links)
        mtime = (file.origin.mtime_ns or file.origin.mtime) if "t" in file.preserve else None
        apply_link_attributes(staging_url, mtime=mtime, owner=file.owner, group=file.group)
    except Exception as exc:  # noqa: BLE001 - reported as data, see module docstring
        return failed(key.result(file.destination), exc)
    return key.result(file.destination, staging=staging_url, bytes_written=staged.size,
                      checksum=staged.checksum, link_target=file.origin.link_target)


def _converter_options(spec: TaskSpec, staging_dir: str) -> ConverterOptions:
    """The run's converter options plus this attempt's private local scratch directory."""
    if not storage_for(staging_dir, spec.dst_options).capabilities.local_paths:
        return spec.converter_options
    return replace(spec.converter_options, scratch_dir=os_path(staging_dir))


def _stage_output(out: FileAwareInputStream, file: CopyableFile, key: ResultKey,
                  staging_url: str, spec: TaskSpec, buffer: bytearray,
                  held: HeldBodies | None = None) -> TaskResult:
    """Stage one output; with ``held`` (per-file visibility) a small output's bytes
    are kept there instead, for one PutObject once the source is checked."""
    if out.destination.endswith("/"):  # a directory an archive holds; nothing to stage
        return key.result(out.destination, mode=_member_mode(spec, out.mode, is_dir=True),
                          mtime=out.mtime if "t" in file.preserve else None)
    storage = spec.dst.open()
    writer = storage.open_stage(out.destination, staging_url, verify=spec.verify,
                                size_hint=0 if file.converters else file.origin.size,
                                buffer_size=spec.buffer_size, hold_small=held is not None)
    kept = writer.attributes_with_bytes and _keep_attributes(
        storage, staging_url, file, spec, out, writer=writer)
    checks = spec.checks.start()
    tee = checks is not None and checks.reads_bytes and not storage.capabilities.local_paths
    staged = stage_stream(TeeStream(out.stream, checks) if tee and checks else out.stream,
                          writer, buffer)
    if checks is not None:
        _run_checks(checks, out.destination, staged, storage, read_back=not tee)
    if staged.body is not None and held is not None:
        held[out.destination] = staged.body
        held.mtimes[out.destination] = _kept_mtime(file, out)
        held.modes[out.destination] = _kept_mode(file, spec, out)
    if staged.staged is not None and staged.staged.needs_rename and not kept:
        _keep_attributes(storage, staging_url, file, spec, out)
    elif staged.staged is not None:
        staged = replace(staged, staged=storage.keep_mtime(staged.staged,
                                                            _kept_mtime(file, out)))
    return _staged_result(key, out.destination, staged)


def _run_checks(checks: CheckRun, destination: str, staged: StagedStream, storage: Storage,
                read_back: bool) -> None:
    """Run the ``--check``s on one staged output; a failure discards it and fails its
    file (distcp.quality.checklist says why local staging is read back, else teed)."""
    if read_back and checks.reads_bytes and staged.staged is not None:
        checks.read_back(os_path(staged.staged.location))
    problem = checks.verdict(StagedOutput(destination, staged.text, staged.size))
    if problem:
        if staged.staged is not None:
            with contextlib.suppress(OSError):  # left for the sweep and ``pydistcp cleanup``
                storage.discard(staged.staged)
        raise QualityCheckError(problem)


def _member_mode(spec: TaskSpec, mode: int | None, is_dir: bool) -> int | None:
    """An archive member's own mode, through --chmod when given."""
    if mode is None or spec.chmod is None:
        return mode
    return spec.chmod.mode_for(mode, is_dir)


def _keep_attributes(storage: Storage, staging_url: str, file: CopyableFile, spec: TaskSpec,
                     out: FileAwareInputStream | None = None,
                     writer: StageWriter | None = None) -> bool:
    """Give a staged file the mode, mtime and owner the rename that publishes keeps
    (the output's own where a converter knows them, else the origin's); through the
    ``writer`` still open where it can (no owner to set: True), else by the staged path
    (with a ``writer`` that carries them with its bytes, not at all: False)."""
    mtime, mode = _kept_mtime(file, out), _kept_mode(file, spec, out)
    if (writer is not None and file.owner is None and file.group is None
            and writer.keep_attributes(mode, mtime)):
        return True
    if writer is None or not writer.attributes_with_bytes:
        storage.set_staged_attributes(staging_url, mode=mode, mtime=mtime, owner=file.owner,
                                      group=file.group)
    return False


def _kept_mode(file: CopyableFile, spec: TaskSpec, out: FileAwareInputStream | None = None
               ) -> int | None:
    """The mode a copy keeps: the output's own where a converter knows it (through
    ``--chmod``), else the origin's."""
    return file.mode if out is None or out.mode is None else _member_mode(spec, out.mode,
                                                                          is_dir=False)


def _kept_mtime(file: CopyableFile, out: FileAwareInputStream | None = None
                ) -> float | int | None:
    """The mtime a copy keeps (an int: nanoseconds): the output's own where a converter
    knows it, else the origin's; None unless ``--preserve`` has ``t``."""
    if "t" not in file.preserve:
        return None
    mtime = out.mtime if out is not None else None
    return (file.origin.mtime_ns or file.origin.mtime) if mtime is None else mtime


def _staged_result(key: ResultKey, destination: str, up: StagedStream) -> TaskResult:
    return key.result(destination, staging=up.text, bytes_written=up.size,
                      checksum=up.checksum, parts=up.parts, bytes_server_side=up.server_side)


def _publish_now(results: Outputs, held: HeldBodies, spec: TaskSpec,
                 sent: Staged | None = None) -> Outputs:
    """Per-file visibility: publish each output of a checked source, each whole (one
    PutObject for a held small output, else the upload's complete); ``sent``: the one
    held output, already published by ``Storage.publish_wholes``."""
    storage = spec.dst.open()
    return results.rewritten(lambda r: _publish_one(r, held, storage, sent))


def _publish_one(r: TaskResult, held: HeldBodies, storage: Storage,
                 sent: Staged | None = None) -> TaskResult:
    if r.destination in held:
        body, mtime = held.pop(r.destination), held.mtimes.pop(r.destination, None)
        mode = held.modes.pop(r.destination, None)
        staged = sent or storage.publish_whole(r.destination, body, mtime, mode)
    elif r.staging and not parse_staged(r.staging).is_published:
        staged = storage.publish_checked(parse_staged(r.staging), r.bytes_written, r.parts,
                                         r.destination)
    else:
        return r  # a directory an archive holds: nothing to publish
    return replace(r, staging=staged.text, parts=())


def _copy_server_side(file: CopyableFile, key: ResultKey, spec: TaskSpec,
                      publish_now: bool = False, staging_url: str = "") -> TaskResult:
    """The store copies the file into its staging (UploadPartCopy into a staged upload,
    a rewrite into a staging object): the task's byte counters stay at zero."""
    try:
        storage = spec.dst.open()
        up = storage.copy_in(file.origin.url, file.destination, file.origin.size,
                             spec.part_size, staging_url)
        if up.staged is not None:
            up = replace(up, staged=storage.keep_mtime(up.staged, _kept_mtime(file)))
        try:
            recheck_source(file, spec)
            if publish_now:
                result = _staged_result(key, file.destination, up)
                return _publish_one(result, HeldBodies(), storage)
        except CopyError:
            _discard_results([_staged_result(key, file.destination, up)], spec)
            raise
    except ServerSideCopyUnsupported:
        raise  # copy_file copies through the task instead
    except Exception as exc:  # noqa: BLE001 - reported as data
        return failed(key.result(file.destination), exc)
    return _staged_result(key, file.destination, up)


def _discard_results(results: Iterable[TaskResult], spec: TaskSpec) -> None:
    storage = spec.dst.open()
    for r in results:
        if r.staging:
            with contextlib.suppress(OSError):  # left for the sweep and ``pydistcp cleanup``
                storage.discard(parse_staged(r.staging))


def idle_runner(attempt: str) -> Callable[[list[Any]], Iterator[Iterator[TaskResult]]]:
    """A runner that copies nothing (``pydistcp engine start``'s warm-up job): loading it
    on an executor imports this module and what a copy task needs, so the warm engine's
    Python workers are started and ready before a user's first run."""
    return lambda items: (iter(()) for _ in items)


def unit_runner(spec: TaskSpec, attempt: str
                ) -> Callable[[list[WorkUnit]], Iterator[Iterator[TaskResult]]]:
    """What a Spark task attempt runs (through ``distcp.spark.arrow``): each batch of
    WorkUnits with the client's task environment, the results of each unit as they
    come (read each unit's to the end before asking for the next unit's)."""
    return runner_of(spec, lambda unit: stream_work_unit(unit, spec, attempt))


def runner_of(spec: TaskSpec, per_unit: Callable[[U], Iterator[R]]
              ) -> Callable[[list[U]], Iterator[Iterator[R]]]:
    """A task attempt's runner: ``per_unit`` over each unit of a batch, inside the
    client's task environment and request bound (shared by plain and fork runs)."""
    _new_job(spec.job_id)

    def run(units: list[U]) -> Iterator[Iterator[R]]:
        with applied_environment(spec.env), bounded_by(spec.request_timeout):
            for unit in units:
                yield per_unit(unit)

    return run


_JOB_SEEN: list[str] = []


def _new_job(job_id: str) -> None:
    """A worker reused by a later run (the warm engine keeps its Python workers between
    runs) must not answer from listings cached during an earlier one."""
    if _JOB_SEEN != [job_id]:
        fsutil.forget_listings()
        _JOB_SEEN[:] = [job_id]
