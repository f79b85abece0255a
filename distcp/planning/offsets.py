"""The continuous copy's stream positions, as Spark's offset log keeps them (driver).

An offset is ``{"seq": n, "marks": {urn: {"m": mtime, "p": path}}}``: the number of
batches offered so far and, per dataset, the newest (mtime, path) offered. Files are
offered in (mtime, path) order, so a batch is the files of each dataset between the
batch's start and end marks: what ``Arrivals.between`` reads again when Spark replays a
batch after a crash. The marks are listing positions, never names of the state: they
are the content of Spark's offset files, as the manifest's rows are of its segments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: A file's place in the order files are offered: (mtime, path).
Key = tuple[float, str]

#: Before anything of a dataset was offered.
FIRST: Key = (float("-inf"), "")


def initial() -> dict[str, Any]:
    return {"seq": 0, "marks": {}}


def mark(offset: Mapping[str, Any], urn: str) -> Key:
    """The newest position offered of ``urn`` by ``offset`` (``FIRST``: none)."""
    got = offset.get("marks", {}).get(urn)
    return FIRST if got is None else (float(got["m"]), str(got["p"]))


def advanced(start: Mapping[str, Any], offered: Iterable[tuple[str, Key]]) -> dict[str, Any]:
    """The offset after ``start`` that offers ``offered`` ((urn, key) pairs): one more
    batch, each dataset's mark moved to the newest key offered of it (a file offered
    late, with an mtime below its mark, leaves the mark where it is)."""
    marks = {urn: dict(m) for urn, m in start.get("marks", {}).items()}
    for urn, key in offered:
        if key > mark({"marks": marks}, urn):
            marks[urn] = {"m": key[0], "p": key[1]}
    return {"seq": int(start.get("seq", 0)) + 1, "marks": marks}


def between(start: Mapping[str, Any], end: Mapping[str, Any], urn: str, key: Key) -> bool:
    """Whether a file of ``urn`` at ``key`` lies in the batch from ``start`` to ``end``."""
    return mark(start, urn) < key <= mark(end, urn)
