"""The S3 requests that copying and publishing cost, counted per file (driver and executor).

A task copies up to 32 files at once in threads, and a file's parts go out from a
pool of their own, so a count must land on the file that caused it: ``counting()``
opens a tally in the current context, ``s3.call`` adds to whichever tally is open
(none open: nothing counted), and ``carry(fn)`` gives a pool thread the tally of
the thread that submitted ``fn``. Counts go back to the driver as plain tuples in
TaskResults and are summed there (Spark accumulators may be applied twice).

What is counted is what pydistcp sends itself, one per request as it asks for it
(botocore's and s3fs's own retries are not seen here).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any, TypeVar

#: S3 API method -> the short kind the summary shows.
KINDS = {
    "create_multipart_upload": "create",
    "upload_part": "part",
    "upload_part_copy": "part_copy",
    "complete_multipart_upload": "complete",
    "abort_multipart_upload": "abort",
    "put_object": "put",
    "head_object": "head",
    "get_object": "get",
    "list_parts": "list_parts",
    "list_multipart_uploads": "list_uploads",
    "delete_objects": "delete",
    "delete_object": "delete",
}
#: Kinds not caused by one file copied (a task's progress documents, one listing of the
#: pending uploads per file set at publish, removals): in the totals, not in the
#: per-file figure.
NOT_PER_FILE = frozenset({"progress", "list_uploads", "delete"})

Counts = tuple[tuple[str, int], ...]
F = TypeVar("F", bound=Callable[..., Any])


class Tally:
    """Requests by kind; threads of one file (its parts) add to it at once."""

    __slots__ = ("_counts", "_lock")

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self._counts[kind] = self._counts.get(kind, 0) + n

    def items(self) -> Counts:
        """The counts as a sorted tuple: a plain, picklable value for a TaskResult."""
        with self._lock:
            return tuple(sorted(self._counts.items()))


_current: ContextVar[Tally | None] = ContextVar("pydistcp_requests", default=None)


class counting:
    """``with counting() as tally``: count the requests sent from this context (and
    threads given ``carry``). A class, not a generator: it opens once per file copied,
    where ``contextlib``'s machinery cost more than the rest."""

    __slots__ = ("_token", "tally")

    def __enter__(self) -> Tally:
        self.tally = Tally()
        self._token = _current.set(self.tally)
        return self.tally

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)


def count(kind: str, n: int = 1) -> None:
    """Add ``n`` requests of ``kind`` to the open tally, if any."""
    tally = _current.get()
    if tally is not None:
        tally.add(kind, n)


def count_method(method: str) -> None:
    """Count one request of the S3 API ``method`` (its short kind, or its own name)."""
    count(KINDS.get(method, method))


def carry(fn: F) -> F:
    """``fn``, run with the submitting thread's tally: pool threads start with none."""
    tally = _current.get()
    if tally is None:
        return fn

    def run(*args: Any, **kwargs: Any) -> Any:
        token = _current.set(tally)
        try:
            return fn(*args, **kwargs)
        finally:
            _current.reset(token)

    return run  # type: ignore[return-value]


def merge(*counts: Counts) -> Counts:
    """Several counts as one (a file's and its task's)."""
    return tuple(sorted(total(counts).items()))


def total(counts: Iterable[Counts]) -> dict[str, int]:
    """Sum counts by kind (the driver, over every TaskResult)."""
    out: dict[str, int] = {}
    for c in counts:
        for kind, n in c:
            out[kind] = out.get(kind, 0) + n
    return out


def per_file(totals: dict[str, int], files: int) -> float:
    """Requests the files themselves cost, per file (see NOT_PER_FILE)."""
    if files <= 0:
        return 0.0
    own = sum(n for kind, n in totals.items() if kind not in NOT_PER_FILE)
    return round(own / files, 3)
