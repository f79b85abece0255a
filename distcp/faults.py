"""Named crash points for the fault-injection tests (driver and executor).

``DISTCP_CRASH_AT=<point>:<n>`` makes the n-th (1-based) passage through
``crash_point(<point>)`` in this process call ``os._exit(137)``: like kill -9,
no ``finally`` and no ``atexit`` run. Unset (always, outside tests) it costs one
dict lookup.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable

_seen: Counter[str] = Counter()


def crash_point(name: str) -> None:
    spec = os.environ.get("DISTCP_CRASH_AT")
    if not spec:
        return
    point, _, nth = spec.rpartition(":")
    if point != name:
        return
    _seen[name] += 1
    if _seen[name] == int(nth or 1):
        os._exit(137)


def armed(name: str) -> bool:
    """Whether ``DISTCP_CRASH_AT`` names ``name``: a loop over a million files asks
    once, not at each passage."""
    return os.environ.get("DISTCP_CRASH_AT", "").rpartition(":")[0] == name


def _never(_: object) -> None:
    """The crash hook of a point no test armed."""


def crash_hook_or_none(name: str) -> Callable[[object], None] | None:
    """``crash_hook`` where a test armed ``name``, else None: a caller that would make
    a value per item only to hand it to the hook skips that (``Storage.publish_all``)."""
    return crash_hook(name) if armed(name) else None


def crash_hook(name: str) -> Callable[[object], None]:
    """``crash_point(name)`` as a per-item callback, asked once: a publish of 300,000
    files paid 0.8 s (profiled) for an environment lookup at each file."""
    return (lambda _: crash_point(name)) if armed(name) else _never


def fail_point(name: str) -> None:
    """``DISTCP_FAIL_AT=<point>`` makes every passage through ``fail_point(<point>)``
    raise an OSError: a failure the run must report as data (a branch of a fork that
    cannot write), where ``crash_point`` kills the process."""
    if os.environ.get("DISTCP_FAIL_AT") == name:
        raise OSError(f"injected failure at {name}")


def delay_at(name: str) -> float:
    """``DISTCP_SLOW_AT=<point>=<seconds>``: the pause a slowed point takes per step (a
    fork branch per chunk it takes), to prove back pressure; 0.0 when unset."""
    spec = os.environ.get("DISTCP_SLOW_AT", "")
    point, _, seconds = spec.rpartition("=")
    return float(seconds) if point == name and seconds else 0.0
