"""The bounds both S3 clients keep, s3fs's and the lean wire's (driver and executor).

``distcp.storage.s3.ops`` (requests through s3fs, and the choice of path) and
``distcp.storage.s3.lean`` (requests signed and sent by hand) read these at call
time, so a test or a caller that changes one here changes it for both paths.
"""

from __future__ import annotations

import random
import time

from distcp.storage.watchdog import TIMEOUT_ENV

#: Per-attempt socket timeouts and attempts botocore gets unless the user chose them.
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0
MAX_ATTEMPTS = 3
#: Times a request the server throttled (SlowDown, ServiceUnavailable) is sent again,
#: after a growing, jittered pause: s3fs's own few retries span under 2 s, while a
#: server shedding load (S3 at a hot prefix, rclone serve s3 under many uploads) asks
#: for seconds.
THROTTLE_RETRIES = 7
#: Connections one client keeps open: a task reads up to SMALL_IN_FLIGHT small
#: objects at once (botocore's default of 10 would queue them).
POOL_CONNECTIONS = 64


def throttle_pause(attempt: int, deadline: float) -> bool:
    """Wait the growing, jittered pause before throttled attempt ``attempt + 1`` goes
    again (a server shedding load asks for seconds, not botocore's few hundred
    milliseconds); False, without waiting, when the pause would end past ``deadline``
    (``time.monotonic()``): the operation's bound holds its retries too."""
    pause = random.uniform(0.5, 1.0) * min(20.0, 0.5 * 2 ** attempt)
    if time.monotonic() + pause >= deadline:
        return False
    time.sleep(pause)
    return True


def no_answer(limit: float, what: str) -> str:
    """Why an S3 operation was abandoned, and how to change its bound."""
    return (f"no answer from the S3 server within {limit:g} s for {what} (the server is "
            f"down, stalled or unreachable; {TIMEOUT_ENV} sets this bound)")
