"""A file's mtime kept as its object's metadata, as each store's own tools keep it (driver and executor).

An object store gives each object the time it was written. A copy keeps its source's
mtime in the object's metadata instead, under the key the store's usual tools read, and
listings read it back (``filesystems.info_status``): an object store's source then has
its files' own mtimes, and a rerun sees a copy as exactly as old as its source.

- Azure: ``mtime``, RFC 3339 in UTC with nanoseconds, as rclone's azureblob backend
  writes it (``2006-01-02T15:04:05.000000000Z``) and reads it (any RFC 3339 time).
- GCS: ``goog-reserved-file-mtime``, whole seconds since the epoch, as gsutil and
  ``gcloud storage`` write it with ``-P``.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Mapping
from typing import Any

#: The metadata key rclone's azureblob backend keeps a file's mtime under.
AZURE_MTIME_KEY = "mtime"
#: The metadata keys gsutil and ``gcloud storage`` keep a file's POSIX mtime and mode
#: under (``-P``): their tools read back what we write.
GCS_MTIME_KEY = "goog-reserved-file-mtime"
GCS_MODE_KEY = "goog-reserved-posix-mode"

_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9})\d*)?"
                      r"(?:([Zz])|([+-])(\d\d):(\d\d))$")


def nanoseconds(mtime: float) -> int:
    """An mtime as nanoseconds since the epoch (an int already is)."""
    return mtime if isinstance(mtime, int) else round(mtime * 1e9)


def rfc3339(mtime: float) -> str:
    """``mtime`` (an int: nanoseconds) in rclone's form: UTC, nine digits of fraction."""
    seconds, nanos = divmod(nanoseconds(mtime), 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{nanos:09d}Z"


def from_rfc3339(text: str) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 time; None when ``text`` is not one."""
    found = _RFC3339.match(text.strip())
    if found is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in found.groups()[:6])
    try:
        seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    if found.group(9):
        offset = int(found.group(10)) * 3600 + int(found.group(11)) * 60
        seconds -= offset if found.group(9) == "+" else -offset
    return seconds * 1_000_000_000 + int((found.group(7) or "0").ljust(9, "0"))


def kept_mtime(metadata: Mapping[str, Any] | None) -> int | None:
    """The mtime (nanoseconds) an object's metadata keeps, under either store's key;
    None when it keeps none or one that does not read as a time."""
    if not metadata:
        return None
    text = metadata.get(AZURE_MTIME_KEY)
    if isinstance(text, str):
        return from_rfc3339(text)
    text = metadata.get(GCS_MTIME_KEY)
    if isinstance(text, str) and text.strip().lstrip("-").isdigit():
        return int(text) * 1_000_000_000
    return None
