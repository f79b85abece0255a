"""Where pydistcp keeps what it learnt on this machine, across runs (driver).

``$XDG_CACHE_HOME`` (or ``~/.cache``)/pydistcp: the warm engine's files, the JVM's
class-data archive, Java's version by binary, Spark's logs, the S3 servers that write
over a key an ``If-None-Match: *`` create should have left. Nothing here is needed: a
missing or unreadable folder only makes the next run find it out again.
"""

from __future__ import annotations

import os


def user_cache(*parts: str) -> str:
    """The path of ``parts`` under pydistcp's cache folder of this user."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "pydistcp", *parts)
