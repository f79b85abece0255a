"""Earlier tar members' bytes, kept so that a hard link to one can be expanded (executor).

A tar read as a stream (``r|``, see ``untar``) cannot go back: by the time a hard
link member names an earlier member, that member's bytes have passed. Under
``--archive-links skip`` untar therefore keeps a bounded record of small regular
members, and a hard link to one of them becomes a copy of its bytes: safe, since the
content was already seen in this very stream and checked like any member. Hard links
to a member that is not held (too large, dropped to stay in bounds, or no earlier
regular member of that name) are skipped and named, as symbolic links are.
"""

from __future__ import annotations

from collections import OrderedDict

from distcp.callbacks import human_bytes
from distcp.converters.seen import NameTable

#: A regular member is held for later hard links only up to this size ...
HELD_MEMBER_MAX = 1 << 20
#: ... and all held members together up to this many bytes (oldest dropped first), so
#: that a task's memory stays bounded whatever the archive (DESIGN.md invariant 4).
HELD_TOTAL_MAX = 16 << 20
#: Why a member is not held (``HeldMembers.why_not``), kept in a ``NameTable``.
_TOO_LARGE, _DROPPED = 0, 1


class HeldMembers:
    """Member path -> bytes of the regular members a later hard link may name."""

    def __init__(self, member_max: int = HELD_MEMBER_MAX,
                 total_max: int = HELD_TOTAL_MAX) -> None:
        self.member_max = member_max
        self.total_max = total_max
        self._held: OrderedDict[str, bytes] = OrderedDict()
        self._total = 0
        #: Members not held, and why: as many as the archive has (bounded memory).
        self._not_held = NameTable()

    def wants(self, name: str, size: int) -> bool:
        """Whether a member of ``size`` bytes is small enough to hold (else remembered as
        too large, to say so if a hard link names it)."""
        if size <= self.member_max:
            return True
        self._not_held.put(name, _TOO_LARGE)
        return False

    def hold(self, name: str, data: bytes) -> None:
        self._held[name] = data
        self._total += len(data)
        while self._total > self.total_max:
            old, dropped = self._held.popitem(last=False)
            self._total -= len(dropped)
            self._not_held.put(old, _DROPPED)

    def get(self, name: str | None) -> bytes | None:
        return self._held.get(name) if name is not None else None

    def why_not(self, name: str | None) -> str:
        """Why a hard link to ``name`` cannot be expanded (for the summary)."""
        why = self._not_held.get(name) if name is not None else None
        if why == _TOO_LARGE:
            return f"its target is larger than {human_bytes(self.member_max)}"
        if why == _DROPPED:
            return (f"its target was no longer held (at most {human_bytes(self.total_max)} "
                    "of earlier members are kept)")
        return "no earlier regular file of that name in the archive"

    def close(self) -> None:
        self._not_held.close()
