"""Our own rules for what an archive may write, and how much it may expand (executor).

We never rely on ``tarfile``'s extraction filters or ``zipfile.extractall``'s
sanitising (PITFALLS.md: the filters are bypassable on Python 3.11.7, and an
object-store writer using member names directly would not sanitise at all).
Every entry name is validated here, before any byte of it is staged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from distcp.errors import ConversionError
from distcp.storage.filesystems import display

#: The ratio check applies once this much was produced: tiny, very compressible
#: files (a few KiB of repeated text) are legitimate and would otherwise trip it.
RATIO_FLOOR = 1 << 20

_DRIVE = re.compile(r"^[A-Za-z]:")


def entry_path(name: str, origin: str, kind: str) -> str:
    """The entry's path relative to the expansion root, or ConversionError.

    Rejects (rather than re-roots) absolute names, ``..`` components, drive
    letters, backslashes and NUL: silently rewriting a hostile name hides the
    attack. ``./`` and empty components are dropped. ``""`` means the root itself.
    """
    def bad(why: str) -> ConversionError:
        return ConversionError(
            f"cannot {kind} {display(origin)}: entry {name!r} {why}; nothing of this "
            "archive was published", path=origin)

    if "\x00" in name:
        raise bad("contains a NUL byte")
    if "\\" in name:
        raise bad("contains a backslash (a Windows path?)")
    if _DRIVE.match(name):
        raise bad("has a drive letter (escapes the target)")
    if name.startswith("/"):
        raise bad("is an absolute path (escapes the target)")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise bad("contains '..' (escapes the target)")
    return "/".join(parts)


def entry_mode(mode: int, name: str, origin: str, kind: str) -> int:
    """Permission bits to give an entry: setuid/setgid refused, world-write dropped."""
    if mode & 0o6000:
        raise ConversionError(
            f"cannot {kind} {display(origin)}: entry {name!r} has the setuid/setgid bit "
            f"(mode {mode & 0o7777:o}); nothing of this archive was published", path=origin)
    return mode & 0o775


@dataclass
class ExpansionBudget:
    """Counts the bytes a converter actually produced against what it consumed.

    Declared sizes (tar headers, zip directories) are never trusted: a bomb
    lies about them. ``consumed`` is re-read on every check because it grows as
    the input is read.
    """

    origin: str
    kind: str
    max_ratio: float
    max_bytes: int | None
    produced: int = 0

    def add(self, n: int, consumed: int) -> None:
        self.produced += n
        if self.max_bytes is not None and self.produced > self.max_bytes:
            raise self._error(f"more than --max-expanded-bytes {self.max_bytes}")
        limit = max(self.max_ratio * consumed, RATIO_FLOOR)
        if self.produced > limit:
            raise self._error(
                f"{self.produced} bytes from {consumed} is over --max-expansion-ratio "
                f"{self.max_ratio:g}")

    def _error(self, why: str) -> ConversionError:
        return ConversionError(
            f"cannot {self.kind} {display(self.origin)}: decompression limit exceeded "
            f"({why}); a decompression bomb?", path=self.origin)
