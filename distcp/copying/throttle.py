"""``--bwlimit``: a token bucket on the bytes a task reads from its sources (driver and executor).

The run's limit is divided on the driver by the number of tasks that run at once, so
each task holds its share; the threads of one task (several files in flight) share one
bucket. Reads are paced, not writes: every byte a task writes was read first, and
reading is where the remote end's bandwidth is spent on a download. Server-side copies
(S3 -> S3 on one endpoint) move no byte through a task and are not limited.
"""

from __future__ import annotations

import threading
import time

#: A task may run ahead of its rate by this many seconds' worth of bytes.
BURST_S = 0.25


class Throttle:
    """Blocks ``take`` so that the bytes taken stay within ``rate`` per second."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._lock = threading.Lock()
        self._allowance = rate * BURST_S
        self._last = time.monotonic()

    def take(self, nbytes: int) -> None:
        with self._lock:
            now = time.monotonic()
            self._allowance = min(self.rate * BURST_S,
                                  self._allowance + (now - self._last) * self.rate)
            self._last = now
            self._allowance -= nbytes
            wait = -self._allowance / self.rate if self._allowance < 0 else 0.0
        if wait > 0:
            time.sleep(wait)


_BUCKETS: dict[int, Throttle] = {}
_BUCKETS_LOCK = threading.Lock()


def throttle_for(rate: int | None) -> Throttle | None:
    """This worker process's bucket for ``rate`` bytes per second (None: no limit)."""
    if not rate:
        return None
    with _BUCKETS_LOCK:
        return _BUCKETS.setdefault(rate, Throttle(rate))


def per_task(limit: int | None, concurrent_tasks: int) -> int | None:
    """A task's share of the run's limit (at least 1 KiB/s)."""
    if not limit:
        return None
    return max(1024, limit // max(1, concurrent_tasks))
