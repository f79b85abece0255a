"""The bytes of earlier tar members, kept so that a hard link to one can be expanded.

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

#: A regular member is held for later hard links only up to this size ...
HELD_MEMBER_MAX = 1 << 20
#: ... and all held members together up to this many bytes (oldest dropped first), so
#: that a task's memory stays bounded whatever the archive (DESIGN.md invariant 4).
HELD_TOTAL_MAX = 16 << 20


class HeldMembers:
    """Member path -> bytes of the regular members a later hard link may name."""

    def __init__(self, member_max: int = HELD_MEMBER_MAX,
                 total_max: int = HELD_TOTAL_MAX) -> None:
        self.member_max = member_max
        self.total_max = total_max
        self._held: OrderedDict[str, bytes] = OrderedDict()
        self._total = 0
        self._too_large: set[str] = set()
        self._dropped: set[str] = set()

    def wants(self, name: str, size: int) -> bool:
        """Whether a member of ``size`` bytes is small enough to hold (else remembered as
        too large, to say so if a hard link names it)."""
        if size <= self.member_max:
            return True
        self._too_large.add(name)
        return False

    def hold(self, name: str, data: bytes) -> None:
        self._held[name] = data
        self._total += len(data)
        while self._total > self.total_max:
            old, dropped = self._held.popitem(last=False)
            self._total -= len(dropped)
            self._dropped.add(old)

    def get(self, name: str | None) -> bytes | None:
        return self._held.get(name) if name is not None else None

    def why_not(self, name: str | None) -> str:
        """Why a hard link to ``name`` cannot be expanded (for the summary)."""
        if name in self._too_large:
            return f"its target is larger than {human_bytes(self.member_max)}"
        if name in self._dropped:
            return (f"its target was no longer held (at most {human_bytes(self.total_max)} "
                    "of earlier members are kept)")
        return "no earlier regular file of that name in the archive"
