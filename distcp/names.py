"""File names as the tool carries them: whatever bytes a filesystem allows (driver and executor).

A POSIX name is bytes. Python hands a name that is not valid UTF-8 to us as a str in
which each undecodable byte is a lone surrogate (``surrogateescape``: byte 0xE9 is
U+DCE9); such a str goes back to the disk unchanged, so the engine carries names as
str throughout. Three places cannot take them as they are, and each uses one function
of this module:

- **UTF-8 only columns** (Arrow and Parquet strings, Spark's strings: the manifest, the
  listing rows, the results files) refuse a lone surrogate. ``to_utf8`` writes each one
  as NUL and two hex digits (U+DCE9 -> ``"\\x00e9"``), ``from_utf8`` reads it back. No
  name holds NUL (POSIX forbids it; an S3 key with one cannot be listed), so the
  encoding is reversible and leaves every valid name as it is: columns written before
  it read unchanged, and a joined or sorted column still compares names equal as they
  are equal, with ``/`` kept (a path's folders are still its prefixes).
- **A line of output** must not be forged by a name: ``printable`` escapes control
  characters (a newline in a name prints as ``\\n``) and undecodable bytes (``\\xe9``).
- **Object keys** are UTF-8 by definition: ``utf8_problem`` says why a name cannot be
  one, so that file fails by name and the run goes on.

JSON records (the commit log, state documents, the summary, events, ``--log-file``)
need nothing: ``json.dumps`` writes a lone surrogate as the escape ``\\udce9`` and
``json.loads`` reads the same str back (``os.fsencode`` of it gives the original
bytes), while a valid name stays readable text.
"""

from __future__ import annotations

import re

#: The surrogates ``surrogateescape`` makes of the bytes 0x80-0xFF.
_UNDECODABLE = re.compile("[\udc80-\udcff]")
#: Their form in a UTF-8 column: NUL and the byte in two hex digits.
_ESCAPED = re.compile("\x00([0-9a-f]{2})")
#: What a line of output escapes: C0 and C1 controls, DEL, and undecodable bytes.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\udc80-\udcff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def is_utf8(name: str) -> bool:
    """Whether ``name`` is valid UTF-8 text (no undecodable byte in it)."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def to_utf8(name: str) -> str:
    """``name`` as valid UTF-8 text for a string column, reversibly (``from_utf8``):
    itself unless it holds undecodable bytes."""
    if is_utf8(name):
        return name
    return _UNDECODABLE.sub(lambda m: f"\x00{ord(m.group()) - 0xDC00:02x}", name)


def from_utf8(text: str) -> str:
    """A name ``to_utf8`` wrote, back as the engine carries it."""
    if "\x00" not in text:
        return text
    return _ESCAPED.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), text)


def printable(text: str) -> str:
    """``text`` fit for one line of output: control characters and undecodable bytes
    escaped (``\\n``, ``\\x1b``, ``\\xe9``), so a name cannot end the line or forge the
    next one. For people only: what is escaped is not read back."""
    if text.isprintable():
        return text
    return _UNPRINTABLE.sub(_escaped_char, text)


def printable_lines(lines: list[str]) -> str:
    """Lines of output joined, each ``printable``."""
    return "\n".join(printable(line) for line in lines)


def _escaped_char(m: re.Match[str]) -> str:
    char = m.group()
    code = ord(char) - 0xDC00 if char >= "\udc80" else ord(char)
    return _NAMED.get(char, f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def utf8_problem(name: str) -> str | None:
    """Why ``name`` cannot be an object key (keys are UTF-8), or None."""
    if is_utf8(name):
        return None
    return "the name is not valid UTF-8, and object keys must be"
