"""When two readings of a file's mtime are the same time (driver and executor).

Its own module because both sides need it: the planner decides with it whether a
destination file is up to date, and executors whether a source changed while it
was copied. Executors must not import the planner.
"""

from __future__ import annotations

import math

#: Two mtimes closer than this are equal (float seconds lose sub-microsecond bits).
MTIME_TOLERANCE_S = 1e-3


def same_mtime(a: float, b: float) -> bool:
    """Equal mtimes, at the coarser precision of the two readings.

    Stores keep different precisions: FTP (MFMT) and HTTP dates hold whole seconds,
    ``rclone serve s3`` lists milliseconds; a whole-second reading therefore matches
    any time within that second (rsync's default modify window is one second too).
    """
    if abs(a - b) <= MTIME_TOLERANCE_S:
        return True
    return (a.is_integer() or b.is_integer()) and math.floor(a) == math.floor(b)
