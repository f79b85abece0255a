"""``--chown USER:GROUP``: the owner and group given to what a run writes (driver and executor).

rsync's syntax: ``USER:GROUP``, ``USER`` (group unchanged), ``:GROUP`` (owner
unchanged) or ``USER:``; each a name or a numeric id. Pure parsing here; the names
are resolved where the entry is written (distcp.storage.local), and checked on the
driver for a local destination (``unknown_ids``), so a typo is refused before any
copy rather than silently leaving the process's own owner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from distcp.errors import ConfigurationError

_NAME = re.compile(r"^(?:\d+|[A-Za-z_][A-Za-z0-9_.-]*\$?)$")


@dataclass(frozen=True, slots=True)
class Chown:
    """The owner and group asked for (None: leave that one as the run would)."""

    owner: str | None
    group: str | None


def parse_chown(text: str, flag: str = "--chown") -> Chown:
    """``alice:staff`` / ``1000:1000`` / ``:staff`` / ``alice`` -> Chown."""
    owner, _, group = text.strip().partition(":")
    if not owner and not group:
        raise ConfigurationError(f"{flag} {text!r}: give USER, USER:GROUP or :GROUP")
    for what, name in (("user", owner), ("group", group)):
        if name and not _NAME.match(name):
            raise ConfigurationError(
                f"{flag} {text!r}: {name!r} is not a {what} name or numeric id")
    return Chown(owner or None, group or None)


def unknown_ids(chown: Chown) -> str | None:
    """The first name this machine's user or group database lacks, as a complaint
    (numeric ids always pass: chown(2) takes any)."""
    import grp
    import pwd

    if chown.owner and not chown.owner.isdigit():
        try:
            pwd.getpwnam(chown.owner)
        except KeyError:
            return f"no user {chown.owner!r} on this machine"
    if chown.group and not chown.group.isdigit():
        try:
            grp.getgrnam(chown.group)
        except KeyError:
            return f"no group {chown.group!r} on this machine"
    return None


def ids(owner: str | None, group: str | None) -> tuple[int, int]:
    """(uid, gid) for chown(2) from names or numeric ids; -1 leaves that one.
    KeyError for a name this machine does not know."""
    import grp
    import pwd

    uid = (int(owner) if owner.isdigit() else pwd.getpwnam(owner).pw_uid) if owner else -1
    gid = (int(group) if group.isdigit() else grp.getgrnam(group).gr_gid) if group else -1
    return uid, gid
