"""One read of a source, handed to several branches through bounded queues (executor).

The fork's promise is that a source is read once however many destinations receive
it (the ForkOperator of seed 000). The reader runs in the task's thread and puts each
chunk into one bounded queue per branch; each branch reads its queue through a
``BranchStream`` in a thread of its own, through its own converters and writer. A full
queue blocks the reader: a slow branch slows the read instead of filling memory, so a
task holds at most ``capacity`` chunks per branch. A branch that stops (it failed, or
its converter needs no more input) is detached and its queue drained, so the others
go on; a branch that takes nothing for ``timeout`` seconds is failed the same way.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from distcp.errors import CopyError, SourceReadError

#: What a branch's queue carries after the last chunk, and when the read failed.
_END = b""


class BranchStalled(CopyError):
    """A branch took no chunk for the queue's timeout: it is failed, the others go on."""


@dataclass(frozen=True)
class QueueStats:
    """The seed's queue statistics for one branch: how full its queue ran and how fast
    chunks went in and out. Summed over files and tasks with ``+``."""

    capacity: int = 0
    puts: int = 0
    gets: int = 0
    #: Chunks in the queue, summed at each put (the mean fill is fill_sum / puts).
    fill_sum: int = 0
    max_fill: int = 0
    #: Puts that found the queue full and waited: the branch back-pressured the read.
    full_waits: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def __add__(self, other: QueueStats) -> QueueStats:
        return QueueStats(capacity=max(self.capacity, other.capacity),
                          max_fill=max(self.max_fill, other.max_fill),
                          **{f.name: getattr(self, f.name) + getattr(other, f.name)
                             for f in fields(QueueStats)
                             if f.name not in ("capacity", "max_fill")})

    def as_pairs(self) -> tuple[tuple[str, float], ...]:
        """Plain pairs for a TaskResult (which holds no pydistcp types)."""
        return tuple((f.name, getattr(self, f.name)) for f in fields(QueueStats))

    @classmethod
    def of_pairs(cls, pairs: Sequence[tuple[str, float]]) -> QueueStats:
        v = dict(pairs)
        return cls(capacity=int(v.get("capacity", 0)), puts=int(v.get("puts", 0)),
                   gets=int(v.get("gets", 0)), fill_sum=int(v.get("fill_sum", 0)),
                   max_fill=int(v.get("max_fill", 0)), full_waits=int(v.get("full_waits", 0)),
                   bytes=int(v.get("bytes", 0)), seconds=float(v.get("seconds", 0.0)))

    def report(self) -> dict[str, Any]:
        """The summary's view: size, fill ratio, put and get counts and rates."""
        seconds = self.seconds or 1e-9
        return {"capacity": self.capacity, "puts": self.puts, "gets": self.gets,
                "fill_ratio": round(self.fill_sum / self.puts / self.capacity, 3)
                if self.puts and self.capacity else 0.0,
                "max_fill": self.max_fill, "full_waits": self.full_waits,
                "bytes": self.bytes,
                "put_rate": round(self.puts / seconds, 1), "get_rate": round(self.gets / seconds, 1)}


class _Branch:
    """One branch's end of the tee: its queue, whether it still reads, its counts."""

    def __init__(self, name: str, capacity: int) -> None:
        self.name = name
        self.queue: queue.Queue[bytes | BaseException] = queue.Queue(capacity)
        self.capacity = capacity
        self.detached = threading.Event()
        self.puts = self.gets = self.fill_sum = self.max_fill = self.full_waits = 0
        self.bytes = 0
        self.started = time.monotonic()
        self.ended: float | None = None

    def stats(self) -> QueueStats:
        end = self.ended if self.ended is not None else time.monotonic()
        return QueueStats(capacity=self.capacity, puts=self.puts, gets=self.gets,
                          fill_sum=self.fill_sum, max_fill=self.max_fill,
                          full_waits=self.full_waits, bytes=self.bytes,
                          seconds=end - self.started)


class Tee:
    """Reads ``source`` once into one bounded queue per branch (``stream(i)``).

    ``pump`` runs in the reading thread; each branch reads ``stream(i)`` in its own.
    """

    def __init__(self, source: Any, names: Sequence[str], capacity: int = 4,
                 timeout: float = 600.0, chunk: int = 1 << 20) -> None:
        if capacity < 1:
            raise ValueError("a fork queue holds at least one chunk")
        self.source = source
        self.branches = [_Branch(n, capacity) for n in names]
        self.timeout = timeout
        self.chunk = chunk
        #: Chunks ``read_ahead`` read before ``pump`` (the last b"" at the source's end).
        self._ahead: list[bytes] = []
        self._ahead_error: Exception | None = None

    def stream(self, index: int, delay: float = 0.0) -> BranchStream:
        """Branch ``index``'s stream (``delay``: seconds it pauses per chunk, to test a
        slow branch: distcp.faults.delay_at)."""
        return BranchStream(self, self.branches[index], delay)

    def detach(self, index: int) -> None:
        """Branch ``index`` reads no more: the reader stops feeding it, its queue empties."""
        branch = self.branches[index]
        branch.detached.set()
        _drain(branch.queue)

    def stats(self) -> list[QueueStats]:
        return [b.stats() for b in self.branches]

    def read_ahead(self) -> bool:
        """Read the source ahead while what is read fits every queue: True when all of
        it did (its end read, or a read failed), so that ``pump`` will wait on no branch
        and the branches may read one after the other, in the reading thread. A small
        file then costs no thread per branch: 2,000 files of 1-16 KiB into three
        branches took 2.81 s with them (benchmarks/RESULTS.md, 2026-11-30)."""
        room = min(b.capacity for b in self.branches)  # the end (b"") or a failure is one
        try:
            while len(self._ahead) < room:
                data = self.source.read(self.chunk)
                self._ahead.append(data)
                if not data:
                    return True
        except Exception as exc:  # noqa: BLE001 - pump gives it to every branch
            self._ahead_error = exc
            return True
        return False

    def pump(self) -> None:
        """Read the source to its end (or until no branch reads) into every queue,
        after what ``read_ahead`` read.

        A read failure goes to every branch that still reads, as the error each
        raises; the reader itself then returns normally (the branches report it)."""
        try:
            ahead, self._ahead = self._ahead, []
            for data in ahead:
                for branch in self.branches:
                    self._put(branch, data)
            if self._ahead_error is not None:
                raise self._ahead_error
            ended = bool(ahead) and not ahead[-1]
            while not ended and any(not b.detached.is_set() for b in self.branches):
                data = self.source.read(self.chunk)
                for branch in self.branches:
                    self._put(branch, data)
                ended = not data
        except Exception as exc:  # noqa: BLE001 - each branch reports the read's failure
            failure = exc if isinstance(exc, CopyError) else SourceReadError(str(exc))
            for branch in self.branches:
                self._put(branch, failure)
        finally:
            for branch in self.branches:
                branch.ended = time.monotonic()

    def _put(self, branch: _Branch, item: bytes | BaseException) -> None:
        """Put ``item`` into the branch's queue, waiting while it is full (back pressure)
        unless the branch detaches; a branch that takes nothing for ``timeout`` is
        failed (its reader sees BranchStalled) and detached."""
        if branch.detached.is_set():
            return
        fill = branch.queue.qsize()
        if fill >= branch.capacity:
            branch.full_waits += 1
        waited = 0.0
        while not branch.detached.is_set():
            try:
                branch.queue.put(item, timeout=0.2)
            except queue.Full:
                waited += 0.2
                if waited >= self.timeout:
                    branch.detached.set()
                    _drain(branch.queue)
                    branch.queue.put_nowait(BranchStalled(
                        f"fork branch {branch.name!r} took no data for {self.timeout:g} s "
                        "(its queue stayed full); it is failed so the other branches go on"))
                    return
                continue
            branch.puts += 1
            filled = min(max(branch.queue.qsize(), 1), branch.capacity)
            branch.fill_sum += filled
            branch.max_fill = max(branch.max_fill, filled)
            if isinstance(item, bytes):
                branch.bytes += len(item)
            return


def _drain(q: queue.Queue[Any]) -> None:
    while True:
        try:
            q.get_nowait()
        except queue.Empty:
            return


class BranchStream:
    """A branch's view of the one read: a readable stream over its queue's chunks.

    ``count`` is the bytes this branch took (the task reports the reader's count,
    which is the source's bytes read once)."""

    def __init__(self, tee: Tee, branch: _Branch, delay: float = 0.0) -> None:
        self._branch = branch
        self._delay = delay
        self._tee = tee
        self._chunk = memoryview(b"")
        self._ended = False
        self.count = 0
        self.url = getattr(tee.source, "url", "")

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            parts: list[bytes] = []
            while True:
                part = self.read(1 << 20)
                if not part:
                    return b"".join(parts)
                parts.append(part)
        while not self._chunk and not self._ended:
            item = self._branch.queue.get()
            self._branch.gets += 1
            if self._delay:
                time.sleep(self._delay)
            if isinstance(item, BaseException):
                self._ended = True
                raise item
            if item == _END:
                self._ended = True
            self._chunk = memoryview(item)
        out = bytes(self._chunk[:size])
        self._chunk = self._chunk[size:]
        self.count += len(out)
        return out

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        """The branch reads no more: the reader stops feeding it."""
        self._tee.detach(self._tee.branches.index(self._branch))

    @property
    def closed(self) -> bool:
        return self._branch.detached.is_set()
