"""Sizes and durations as users type them: ``256M``, ``24h`` (driver and executor).

Kept apart from the configuration so that a plugin resolving its argument (a quality
check's ``max-size=1G``) reads a size the same way without importing the run's settings.
"""

from __future__ import annotations

import re

from distcp.errors import ConfigurationError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)?\s*$", re.IGNORECASE)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")


def parse_size(text: str | int) -> int:
    """``"256M"`` -> 268435456; binary multiples, as DistCp and rclone read them."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(str(text))
    if not m:
        raise ConfigurationError(f"not a size: {text!r} (examples: 1048576, 64K, 256M, 2G)")
    number, unit = float(m.group(1)), m.group(2).lower()
    return int(number * (1 << (10 * " kmgt".index(unit or " "))))


def parse_duration(text: str | float) -> float:
    """``"24h"`` -> 86400.0; plain numbers are seconds."""
    if isinstance(text, (int, float)):
        return float(text)
    m = _DURATION.match(text)
    if not m:
        raise ConfigurationError(f"not a duration: {text!r} (examples: 3600, 30m, 24h, 7d)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
