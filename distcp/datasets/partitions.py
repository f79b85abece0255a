"""Time partitions of a stream dataset: the pattern and watermark arithmetic (driver).

A topic directory holds one folder level per pattern segment (``yyyy/MM/dd/HH`` by
default: ``topic/2026/11/23/10``); each leaf folder is a partition, named by its
start time (UTC). Pure functions only: the finder and the dataset read storage,
the commit steps change state; both ask this module what a name or a time means.

Watermarks follow Gobblin's (seed 002): the *low* watermark is what earlier runs
published (the previous run's actual high), the *expected high* what this run
planned up to, the *actual high* what it published. All three are partition start
times in seconds since the epoch.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from distcp.errors import ConfigurationError

DEFAULT_PATTERN = "yyyy/MM/dd/HH"
#: Pattern tokens, coarsest first; a pattern uses a prefix of them (yyyy, then MM, ...).
TOKENS = (("yyyy", "year", r"\d{4}"), ("MM", "month", r"\d{2}"), ("dd", "day", r"\d{2}"),
          ("HH", "hour", r"\d{2}"), ("mm", "minute", r"\d{2}"))
_TOKEN = re.compile("|".join(t for t, _u, _r in TOKENS))
#: The suffix of the file set of files that arrive in an already published partition.
LATE_SUFFIX = "+late"


@dataclass(frozen=True)
class PartitionPattern:
    """A parsed ``--partition-pattern``: one regular expression per folder level."""

    text: str
    levels: tuple[re.Pattern[str], ...]
    #: The finest unit the pattern names (``hour`` for ``yyyy/MM/dd/HH``): a partition's span.
    unit: str

    @classmethod
    def parse(cls, text: str | None) -> PartitionPattern:
        """Read ``yyyy/MM/dd/HH``, ``dt=yyyy-MM-dd/hr=HH`` and the like; a pattern that
        skips a unit or repeats one is a ConfigurationError naming the flag."""
        text = text or DEFAULT_PATTERN
        found = _TOKEN.findall(text)
        names = [t for t, _u, _r in TOKENS]
        if not found or found != names[:len(found)]:
            raise ConfigurationError(
                f"--partition-pattern {text!r}: use the tokens yyyy, MM, dd, HH, mm in that "
                "order, each once, starting with yyyy (e.g. yyyy/MM/dd/HH)")
        levels = []
        for segment in text.strip("/").split("/"):
            if not segment:
                raise ConfigurationError(f"--partition-pattern {text!r}: an empty folder level")
            levels.append(re.compile(_segment_regex(segment)))
        return cls(text, tuple(levels), TOKENS[len(found) - 1][1])

    def match(self, depth: int, name: str, above: Mapping[str, int] | None = None
              ) -> dict[str, int] | None:
        """The units of a folder name at ``depth`` with those of the folders ``above``
        it, or None when it is no partition level (``_temporary``, ``.staging``, a
        31st of February ...)."""
        m = self.levels[depth].fullmatch(name)
        if m is None:
            return None
        units = {**(above or {}), **{k: int(v) for k, v in m.groupdict().items()}}
        try:
            span(units)
        except ValueError:  # month 13, hour 24: not a time
            return None
        return units


def _segment_regex(segment: str) -> str:
    out, pos = [], 0
    for m in _TOKEN.finditer(segment):
        out.append(re.escape(segment[pos:m.start()]))
        _token, unit, regex = next(t for t in TOKENS if t[0] == m.group())
        out.append(f"(?P<{unit}>{regex})")
        pos = m.end()
    out.append(re.escape(segment[pos:]))
    return "".join(out)


def span(units: Mapping[str, int]) -> tuple[float, float]:
    """[start, end) in epoch seconds (UTC) of the period the given units name: a
    partition, or the folder above it (``{"year": 2026}``: the whole year)."""
    start = datetime(units["year"], units.get("month", 1), units.get("day", 1),
                     units.get("hour", 0), units.get("minute", 0), tzinfo=UTC)
    finest = [u for _t, u, _r in TOKENS if u in units][-1]
    if finest == "year":
        end = start.replace(year=start.year + 1)
    elif finest == "month":
        end = start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
    else:
        end = start + timedelta(**{f"{finest}s": 1})
    return float(calendar.timegm(start.timetuple())), float(calendar.timegm(end.timetuple()))


@dataclass(frozen=True)
class Window:
    """Which partitions a run lists: start at or after ``floor`` (low watermark minus
    lookback), and, aged from their end, between ``min_age`` and ``max_age``."""

    floor: float | None = None
    now: float = 0.0
    min_age: float | None = None
    max_age: float | None = None

    def may_hold(self, start: float, end: float) -> bool:
        """Whether a folder spanning [start, end) can hold a partition in the window:
        False lets the walk skip it without listing it."""
        if self.floor is not None and end <= self.floor:
            return False
        return self.max_age is None or self.now - end <= self.max_age

    def admits(self, start: float, end: float) -> bool:
        """Whether the partition [start, end) is listed by this run."""
        if self.floor is not None and start < self.floor:
            return False
        age = self.now - end
        if self.min_age is not None and age < self.min_age:
            return False
        return self.max_age is None or age <= self.max_age


def listing_floor(low: float | None, lookback: float | None) -> float | None:
    """The oldest partition start a run lists again: ``low - lookback``; None (list
    every partition) before a first publish or without ``--lookback``."""
    if low is None or lookback is None:
        return None
    return low - lookback


@dataclass(frozen=True)
class Watermarks:
    """One stream dataset's three watermarks (partition start times, epoch seconds)."""

    low: float | None = None
    expected_high: float | None = None
    actual_high: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        return {"low": self.low, "expected_high": self.expected_high,
                "actual_high": self.actual_high}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Watermarks | None:
        if not data:
            return None
        return cls(data.get("low"), data.get("expected_high"), data.get("actual_high"))


def expected_high(low: float | None, planned: Iterable[float]) -> float | None:
    """What a run plans up to: its newest ready partition, never below the low mark."""
    return _max(low, *planned)


def advance(current: Watermarks | None, low: float | None, expected: float | None,
            published: float | None) -> Watermarks:
    """The watermarks after one file set of a run is published (``published``: its
    partition's start, None for a set with no partition). The actual high only grows:
    a late file in an old partition leaves it where it is."""
    before = current.actual_high if current else None
    return Watermarks(low, expected, _max(before, published))


def _max(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


@dataclass(frozen=True)
class StreamMarks:
    """What planning tells publishing about a stream dataset: the run's low and
    expected-high watermarks and each file set's partition start."""

    low: float | None
    expected_high: float | None
    partitions: tuple[tuple[str, float], ...] = ()

    def time_of(self, file_set: str) -> float | None:
        return dict(self.partitions).get(file_set)


def late_name(partition: str) -> str:
    """The file set of files that arrive after their partition was published."""
    return partition + LATE_SUFFIX
