"""The names a POSIX filesystem can hold, asked before a byte is staged (driver and executor).

An archive member's name comes from the data: a member whose name the destination
cannot hold (a component longer than NAME_MAX, a path longer than PATH_MAX) used to
stage fine under its staging name and fail at publish, after the archive's other
members had appeared. ``Storage.name_problem`` answers for every output before it is
staged (here for local disks and fsspec filesystems; object stores check their keys,
``storage.s3.ops.key_problem``), so the archive fails whole.
"""

from __future__ import annotations

import os

#: Bytes in one path component: NAME_MAX, 255 on ext4, XFS, btrfs and most FTP servers.
NAME_MAX = 255
#: Bytes in a whole path: PATH_MAX (4,096) less its NUL.
PATH_MAX = 4095


def posix_problem(url: str) -> str | None:
    """Why a POSIX filesystem cannot hold a file at ``url``, or None. Counted in bytes of
    the name as the filesystem stores it (``os.fsencode``: a name in another encoding is
    its own bytes)."""
    data = os.fsencode(_stored_path(url))
    if len(data) <= NAME_MAX:
        return None  # the common case, without splitting
    if len(data) > PATH_MAX:
        return f"its path is {len(data):,} bytes, and the destination holds at most {PATH_MAX:,}"
    longest = max(data.split(b"/"), key=len)
    if len(longest) > NAME_MAX:
        return (f"a name in its path is {len(longest):,} bytes, and the destination holds "
                f"at most {NAME_MAX} per name")
    return None


def _stored_path(url: str) -> str:
    """The part of ``url`` the filesystem keeps as the name: a local path whole, a
    remote URL's path after its host."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    return rest if scheme == "file" else rest.partition("/")[2]
