"""One join task per split file whose ranges are part files (executor).

Where a storage can neither write a range at its offset nor hold it as a part of
one object (FTP, SFTP, WebDAV...), each range is its own part file, and a split file
must be finished before it is published: its storage joins the parts
(``Storage.finish_split``, ``distcp.storage.joins``). Joins run as Spark tasks, so
several big files join in parallel; every failure is a failed TaskResult naming the
file and the cause, and the next run joins (or copies the lost range) again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from distcp.copying.results import failed
from distcp.copying.taskenv import applied_environment
from distcp.model import TaskResult
from distcp.storage import storage_for
from distcp.storage.buffers import ReadBuffer
from distcp.storage.joins import SplitParts


@dataclass(frozen=True, slots=True)
class Join:
    """One split file to join: where its parts and records are, what it must become.

    ``result`` is the whole-file result the driver made from the ranges' results
    (staging: the ``data`` file, checksum: the composed digest); the join returns
    it unchanged when the joined file verifies, else a failed copy of it.
    """

    result: TaskResult
    folder: str
    count: int
    size: int


def join_file(job: Join, options: dict[str, Any], buffer: bytearray, verify: str,
              attempt: str) -> TaskResult:
    """The split file finished by its storage; failures as data."""
    r = job.result
    parts = SplitParts(r.staging, job.folder, job.count, job.size, r.checksum or "", r.origin)
    try:
        storage_for(r.staging, options).finish_split(parts, buffer, verify, attempt)
    except Exception as exc:  # noqa: BLE001 - reported as data, like task.copy_file
        return failed(replace(r, staging="", records="", attempt=attempt), exc, retryable=True,
                      doing="cannot join its ranges: ")
    return replace(r, attempt=attempt)


def joiner(options: dict[str, Any], buffer_size: int, verify: str,
           env: dict[str, str] | None, attempt: str
           ) -> Callable[[list[Join]], list[list[TaskResult]]]:
    """What a Spark task attempt runs (through ``distcp.spark.arrow``): each batch of
    Joins with one buffer, one list of one result per Join, in the client's task
    environment (``env``: a warm engine's workers have none of the client's own, such
    as an emulator's address that the storage reads from it)."""
    buffer = ReadBuffer(buffer_size)

    def run(jobs: list[Join]) -> list[list[TaskResult]]:
        with applied_environment(env):
            return [[join_file(job, options, buffer, verify, attempt)] for job in jobs]

    return run
