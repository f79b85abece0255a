"""Where each key of a TOML document is: tomllib keeps no positions (driver).

A small scan of the text: table headers (``[a."b"]``, ``[[a]]`` with each array
element counted) and ``key = value`` lines (dotted keys included), skipping the
inside of multi-line strings and arrays. Paths are tuples as the parsed document
nests them, ``("branches", 1, "destination")``; a key inside an inline table is
found at its enclosing key's line (inline tables are one line in TOML).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator

Path = tuple[str | int, ...]

_PART = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_DOTTED = rf"{_PART}(?:\s*\.\s*{_PART})*"
_HEADER = re.compile(rf"^\s*(\[\[?)\s*({_DOTTED})\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(rf"^\s*({_DOTTED})\s*=(.*)$")
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'')


def key_lines(text: str) -> dict[Path, int]:
    """Path of every table and key -> its 1-based line (the first, if repeated)."""
    found: dict[Path, int] = {}
    arrays: dict[Path, int] = {}
    table: Path = ()
    for number, line in _logical_lines(text):
        header = _HEADER.match(line)
        if header:
            table = _header_path(_parts(header.group(2)), header.group(1) == "[[", arrays)
            found.setdefault(table, number)
            continue
        key = _KEY.match(line)
        if key:
            parts = _parts(key.group(1))
            for depth in range(1, len(parts) + 1):
                found.setdefault(table + tuple(parts[:depth]), number)
    return found


def line_of(lines: dict[Path, int], path: Path) -> int | None:
    """The line of ``path``, or of its nearest ancestor the scan found (a key inside an
    inline table or a multi-line array)."""
    for depth in range(len(path), 0, -1):
        if path[:depth] in lines:
            return lines[path[:depth]]
    return None


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(number, line) of each line that starts a statement: continuation lines of
    multi-line strings and arrays are skipped."""
    in_string: str | None = None
    depth = 0
    for number, line in enumerate(text.splitlines(), 1):
        if in_string:
            if line.count(in_string) % 2:
                in_string = None
            continue
        if depth > 0:
            depth += _bracket_balance(line)
            continue
        yield number, line
        key = _KEY.match(line)
        if not key:
            continue
        value = key.group(2)
        for quotes in ('"""', "'''"):
            if value.count(quotes) % 2:
                in_string = quotes
        if not in_string:
            depth = max(0, _bracket_balance(value))


def _bracket_balance(text: str) -> int:
    """Opened minus closed brackets outside strings and comments."""
    code = _STRINGS.sub("", text).split("#", 1)[0]
    return code.count("[") + code.count("{") - code.count("]") - code.count("}")


def _parts(dotted: str) -> list[str]:
    """``a."b.c".d`` -> ["a", "b.c", "d"]; quoted parts unquoted as TOML reads them."""
    return [tomllib.loads(f"k = {p}")["k"] if p[0] in "\"'" else p
            for p in re.findall(_PART, dotted)]


def _header_path(parts: list[str], is_array: bool, arrays: dict[Path, int]) -> Path:
    """The table's path; ``[[a]]`` counts a new element of array ``a`` and names it by
    index, and a header under an array (``[a.b]``) goes to that array's last element."""
    path: Path = ()
    for position, part in enumerate(parts):
        path += (part,)
        last = position == len(parts) - 1
        if last and is_array:
            arrays[path] = arrays.get(path, 0) + 1
        if path in arrays:
            path += (arrays[path] - 1,)
    return path
