"""Pure: pair a check's two listings and judge each path, with or without digests (driver).

The verdicts are rclone's combined-report symbols: ``=`` equal, ``-`` only in the
source, ``+`` only in the destination, ``*`` differing, ``!`` an error (a side that
could not be read).

Which side a stored digest stands in for: the manifest records, for each published
file, the digest of the bytes read from the source together with the source's size
and mtime at that moment. When the source's listing still shows that size and mtime
(the same rule by which ``copy`` skips a file), the stored digest stands in for the
source and only the destination is read. It never stands in for the destination:
a destination changed in place with its size and mtime put back (bit rot, a
careless tool) keeps every attribute the manifest knows, and finding exactly that
is what a check is for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from distcp.checksum import ALGORITHM
from distcp.model import FileStatus

Verdict = Literal["=", "-", "+", "*", "!"]
#: The verdicts in the order reports count them.
VERDICTS: tuple[Verdict, ...] = ("=", "*", "-", "+", "!")

SRC, DST = "src", "dst"


@dataclass(frozen=True)
class CheckSettings:
    """What a check does beyond the listing the configuration describes."""

    one_way: bool = False
    size_only: bool = False
    stored_digests: bool = True


@dataclass(frozen=True, slots=True)
class Pair:
    """One path as both listings know it (``None``: absent on that side)."""

    path: str  # relative to DST: what the reports print
    src: FileStatus | None
    dst: FileStatus | None
    #: The manifest's digest when it vouches for the source (module docstring).
    stored: str = ""


@dataclass(frozen=True, slots=True)
class Outcome:
    path: str
    verdict: Verdict
    reason: str


def pair_listings(src: Mapping[str, FileStatus], dst: Mapping[str, FileStatus],
                  manifest: Mapping[str, Sequence[Any]], relative: Any) -> list[Pair]:
    """Both listings (destination URL -> status) as pairs, sorted by path.

    ``manifest`` is the dataset's (destination URL -> [size, origin mtime, digest,
    guid]); ``relative`` turns a destination URL into the path reports print.
    """
    return [Pair(relative(url), src.get(url), dst.get(url),
                 stored_digest(src.get(url), manifest.get(url)))
            for url in sorted(set(src) | set(dst))]


def stored_digest(src: FileStatus | None, record: Sequence[Any] | None) -> str:
    """The recorded digest if it still describes ``src``: same size and mtime as when
    it was published; "" otherwise (or when none was recorded)."""
    if src is None or not record or src.link_target is not None:
        return ""
    if not str(record[2]).startswith(ALGORITHM + ":"):  # none, or another algorithm's
        return ""
    size, mtime, digest = record[0], record[1], record[2]
    return str(digest) if int(size) == src.size and float(mtime) == src.mtime else ""


def judge_listed(p: Pair, size_only: bool = False) -> Outcome | None:
    """The verdict the listings alone give; ``None`` when digests must decide."""
    if p.dst is None:
        return Outcome(p.path, "-", "missing on destination")
    if p.src is None:
        return Outcome(p.path, "+", "missing on source")
    if p.src.link_target is not None or p.dst.link_target is not None:
        same = p.src.link_target == p.dst.link_target
        return Outcome(p.path, "=" if same else "*", "same link target" if same else
                       f"link target differs: source {p.src.link_target!r}, "
                       f"destination {p.dst.link_target!r}")
    if p.src.size != p.dst.size:
        return Outcome(p.path, "*", f"sizes differ: source {p.src.size} bytes, "
                                    f"destination {p.dst.size}")
    if size_only:
        return Outcome(p.path, "=", "same size")
    return None


def judge_present(expected: Sequence[str], dst: Mapping[str, FileStatus],
                  relative: Any) -> list[Outcome]:
    """The verdicts of files that must be at the destination but whose bytes are not the
    source's by design (an Iceberg table's rewritten metadata): present (``=``) or
    missing (``-``), nothing read; ``relative`` as for ``pair_listings``."""
    return [Outcome(relative(url), "=", "present (rewritten for the destination: not "
                                        "compared with the source's)")
            if url in dst else Outcome(relative(url), "-", "missing on destination")
            for url in sorted(set(expected))]


def sides_to_read(p: Pair) -> tuple[str, ...]:
    """The sides whose bytes must be read: the destination always, the source unless
    a stored digest stands in for it."""
    return (DST,) if p.stored else (SRC, DST)


def judge_digests(p: Pair, digests: Mapping[str, str], errors: Mapping[str, str]) -> Outcome:
    """The verdict once the sides were read (``digests``/``errors`` by side)."""
    if errors:
        return Outcome(p.path, "!", "; ".join(errors[s] for s in (SRC, DST) if s in errors))
    src = p.stored or digests[SRC]
    if src == digests[DST]:
        how = "stored digest" if p.stored else "digest"
        return Outcome(p.path, "=", f"same {how}")
    return Outcome(p.path, "*", f"contents differ (digest {src} at the source, "
                                f"{digests[DST]} at the destination)")
