"""The TaskResults of one origin file, held in bounded memory (executor).

An archive expands into one result per member, and a task must keep every one of
them until the archive is done: a failure at the last member discards what the
first ones staged, and per-file visibility publishes nothing before the source is
checked. Held as a list, a 200,000-member .tar.gz took a Python worker to 571 MiB
(issue 11). ``Outputs`` keeps the first ``IN_MEMORY`` results as a list (an ordinary
file has one) and appends the rest, pickled, to an anonymous local file that the
task reads back as it streams the results out; a killed task leaves nothing, the
file being unlinked from the start.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import IO, Any

from distcp.model import TaskResult

#: Results held as a list before the rest go to the spill file.
IN_MEMORY = 256


class Outputs:
    """An append-only sequence of one file's TaskResults, spilled past IN_MEMORY.

    ``amend_first`` records changes to the first result (the file's byte and request
    counts, a note), applied as it is read: nothing already spilled is rewritten.
    """

    def __init__(self, spill_dir: str | None = None, in_memory: int = IN_MEMORY) -> None:
        self.spill_dir = spill_dir
        self.in_memory = in_memory
        self._head: list[TaskResult] = []
        self._spill: IO[bytes] | None = None
        self._count = 0
        self._failed = 0
        self._first: dict[str, Any] = {}

    @classmethod
    def of(cls, results: list[TaskResult], spill_dir: str | None = None) -> Outputs:
        out = cls(spill_dir)
        for r in results:
            out.append(r)
        return out

    @classmethod
    def one(cls, result: TaskResult) -> Outputs:
        """The outputs of a file copied as it is: one result, without ``of``'s list and
        loop (a task makes one per file)."""
        out = cls()
        out._head.append(result)
        out._count, out._failed = 1, not result.ok
        return out

    def append(self, result: TaskResult) -> None:
        self._count += 1
        self._failed += not result.ok
        if len(self._head) < self.in_memory:
            self._head.append(result)
            return
        if self._spill is None:
            self._spill = tempfile.TemporaryFile(  # noqa: SIM115 - closed by close()
                prefix=".outputs-", dir=self.spill_dir)
        # one self-contained pickle each: a shared Pickler's memo would keep every
        # result alive, and its back-references would need the same shared Unpickler
        pickle.dump(result, self._spill, pickle.HIGHEST_PROTOCOL)

    def amend_first(self, **changes: Any) -> None:
        if self._count:
            self._first.update(changes)

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    @property
    def spilled(self) -> bool:
        return self._spill is not None

    @property
    def all_ok(self) -> bool:
        return self._failed == 0

    def verified(self) -> list[TaskResult] | None:
        """Every result, when all are ok and held in memory (a file's journal record
        in one step: the progress of each file asks it), as the list held (not to be
        changed); None otherwise."""
        if self._failed or self._spill is not None or not self._count:
            return None
        self._amend_head()
        return self._head

    def first(self) -> TaskResult:
        return next(iter(self))

    def _amend_head(self) -> None:
        """The first result amended, once, where it is held in the list, not on every
        read: a task reads each file's results three times (journal, stream,
        publish-now), and replace() is not cheap."""
        if self._first and self._head:
            self._head[0] = replace(self._head[0], **self._first)
            self._first = {}

    def __iter__(self) -> Iterator[TaskResult]:
        self._amend_head()
        if self._spill is None:  # every result in the list: no generator per read
            return iter(self._head)
        return self._amended()

    def _amended(self) -> Iterator[TaskResult]:
        """The stored results, the first amended (when it was spilled: ``in_memory`` 0)."""
        for n, r in enumerate(self._stored()):
            yield replace(r, **self._first) if n == 0 and self._first else r

    def _stored(self) -> Iterator[TaskResult]:
        yield from self._head
        if self._spill is None:
            return
        self._spill.flush()
        self._spill.seek(0)
        try:  # one reader at a time, after the last append (how a task uses it)
            for _ in range(self._count - len(self._head)):
                yield pickle.load(self._spill)  # one pickle per result: see append
        finally:
            self._spill.seek(0, 2)

    def rewritten(self, change: Callable[[TaskResult], TaskResult]) -> Outputs:
        """A new Outputs holding ``change(r)`` for each result (this one is closed)."""
        out = Outputs(self.spill_dir, self.in_memory)
        for r in self:
            out.append(change(r))
        self.close()
        return out

    def close(self) -> None:
        if self._spill is not None:
            self._spill.close()
            self._spill = None

