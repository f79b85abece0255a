"""Pure splitting of one listing into Spark tasks: subtrees and key ranges (driver).

The driver lists only the top of a tree; everything below is listed by executors,
one task per subtree (filesystems with directories) or per key range (object
stores). These functions decide the split from what the driver has seen; the
listing itself is injected (``children``, ``first_after``), so they are tested with
literals and never touch storage.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

#: Greater than any character a key can hold after a given prefix: ``q + HIGH`` is an
#: upper bound for every key that starts with ``q`` (only keys that continue with this
#: very code point would sort after it, and they then fall in the next range: a range
#: boundary may move, no key is ever lost or listed twice).
HIGH = "\U0010ffff"


def balance(roots: Sequence[T], children: Callable[[T], Sequence[T] | None],
            target: int, budget: int) -> list[T]:
    """Subtrees to hand out, breadth first: a subtree is replaced by its children
    (``children`` lists it one level, on the driver) until there are ``target`` of
    them or ``budget`` listings were spent.

    Why breadth first: the sizes of subtrees are unknown until listed, and a tree
    with few top directories (one ``data/`` folder holding everything) must still
    become enough tasks; the shallowest subtrees are the likeliest to be big.
    A listed subtree leaves the frontier (the driver has its own entries); its
    subdirectories join it. ``children`` returns None for an unreadable one.
    """
    frontier: deque[T] = deque(roots)
    spent = 0
    while frontier and len(frontier) < target and spent < budget:
        kids = children(frontier.popleft())
        spent += 1
        frontier.extend(kids or ())
    return list(frontier)


@dataclass(frozen=True, slots=True)
class KeyRange:
    """The keys ``k`` with ``after < k <= upto`` (None: unbounded on that side).

    ``after`` is what ListObjectsV2 takes as ``StartAfter`` (strict, as S3 has it);
    a task stops at the first key above ``upto``. Consecutive ranges share their
    bound, so together they cover every key exactly once whatever the bounds are.
    """

    after: str | None
    upto: str | None
    #: The key prefix nearly every key of the range starts with (None: unknown). A task
    #: lists it with ``Prefix=stem``, which ends where its keys end, and checks the
    #: rest of the range with one request on each side.
    stem: str | None = None

    def holds(self, key: str) -> bool:
        return (self.after is None or key > self.after) and \
            (self.upto is None or key <= self.upto)


def key_ranges(first_after: Callable[[str], str | None], prefix: str, first: str,
               target: int, budget: int) -> list[KeyRange]:
    """Split the keys under ``prefix`` into about ``target`` ranges.

    ``first`` is the first key under ``prefix``; ``first_after(s)`` returns the
    first key greater than ``s`` (one ListObjectsV2 with ``StartAfter=s``,
    ``MaxKeys=1``), or None. Boundaries are the characters that follow a common
    stem: each probe finds the next distinct character at one position, so a
    prefix of hashed names splits in 16 probes and a chain of shared characters
    (``part-0000...``) costs one probe per character. At most ``budget`` probes.
    """
    nodes: deque[tuple[str, str]] = deque([(prefix, first)])
    settled: list[str] = []
    probes = 0
    while nodes and len(nodes) + len(settled) < target and probes < budget:
        stem, head = nodes.popleft()
        kids, used = _children(first_after, stem, head, budget - probes)
        probes += used
        if not kids:
            settled.append(stem)  # one key (the stem itself): nothing to split
            continue
        nodes.extend(kids)
    return ranges_between(sorted([stem for stem, _ in nodes] + settled))


def _children(first_after: Callable[[str], str | None], stem: str, head: str,
              budget: int) -> tuple[list[tuple[str, str]], int]:
    """The stems one character longer than ``stem`` that keys start with, each with its
    first key, found in order; and the number of probes spent."""
    used = 0
    current: str | None = head
    if head == stem:  # the stem is itself a key: its children start after it
        current, used = first_after(stem), 1
    kids: list[tuple[str, str]] = []
    while current is not None and current.startswith(stem) and len(current) > len(stem):
        child = stem + current[len(stem)]
        kids.append((child, current))
        if used >= budget:
            break  # what was not enumerated stays in the last child's range
        current, used = first_after(child + HIGH), used + 1
    return kids, used


def ranges_between(stems: Sequence[str]) -> list[KeyRange]:
    """Contiguous ranges, one per stem (sorted): each ends after its stem's keys."""
    if not stems:
        return [KeyRange(None, None)]
    bounds = [s + HIGH for s in stems[:-1]]
    return [KeyRange(None if i == 0 else bounds[i - 1], bounds[i] if i < len(bounds) else None,
                     stems[i] if len(stems) > 1 else None)
            for i in range(len(stems))]


def grouped(items: Sequence[T], groups: int) -> list[tuple[T, ...]]:
    """``items`` dealt round-robin into at most ``groups`` tasks. A tree whose top holds
    a thousand directories is listed by a few tasks per core, not a thousand: each
    Spark task costs tens of milliseconds, more than listing a small directory."""
    n = min(max(1, groups), len(items))
    return [tuple(items[i::n]) for i in range(n)]


def task_target(parallelism: int, per_core: int = 4) -> int:
    """How many listing tasks to aim for: a few per core, so that one big subtree
    or dense range does not leave the other cores idle."""
    return max(2, parallelism * per_core)
