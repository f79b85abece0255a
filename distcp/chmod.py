"""``--chmod``: rsync's permission rules, parsed once, applied per entry (driver and executor).

rsync's ``--chmod`` is chmod(1)'s symbolic syntax, comma-separated, where each rule
may start with ``D`` (directories only) or ``F`` (files only), and a rule may be an
octal mode instead (``D755,F644``). Parsing is pure and done on the driver; the
parsed value is a frozen tuple of rules, so it pickles to executors unchanged.

A rule with no ``ugoa`` letters acts as ``a`` (rsync respects the umask there; a
copy to another machine has no umask of the reader's to respect, so we do not).
"""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass

from distcp.errors import ConfigurationError

#: Who letters -> the bits each of r, w, x covers (read, write, exec masks).
_WHO = {"u": (stat.S_IRUSR, stat.S_IWUSR, stat.S_IXUSR),
        "g": (stat.S_IRGRP, stat.S_IWGRP, stat.S_IXGRP),
        "o": (stat.S_IROTH, stat.S_IWOTH, stat.S_IXOTH)}
_ANY_EXEC = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
_SYMBOLIC = re.compile(r"^([ugoa]*)((?:[-+=][rwxXst]*)+)$")
_ACTION = re.compile(r"([-+=])([rwxXst]*)")
_OCTAL = re.compile(r"^[0-7]{1,4}$")


@dataclass(frozen=True, slots=True)
class ChmodRule:
    """One comma-separated part of ``--chmod``: an octal mode or a symbolic clause.

    ``applies_to`` is "D", "F" or "" (both); ``octal`` is set for ``755``-style rules,
    else ``who`` ("ugo" letters) and ``actions`` ((op, perms), ...) are."""

    applies_to: str
    octal: int | None = None
    who: str = ""
    actions: tuple[tuple[str, str], ...] = ()

    def apply(self, mode: int, is_dir: bool) -> int:
        if self.applies_to == ("F" if is_dir else "D"):
            return mode
        if self.octal is not None:
            return self.octal
        for op, perms in self.actions:
            bits = _bits(self.who, perms, mode, is_dir)
            if op == "+":
                mode |= bits
            elif op == "-":
                mode &= ~bits
            else:  # "=": the named classes get exactly these bits (setuid/gid cleared too)
                cleared = _bits(self.who, "rwxst", 0o7777, True)
                mode = (mode & ~cleared) | bits
        return mode


@dataclass(frozen=True, slots=True)
class Chmod:
    """The parsed ``--chmod``: its rules, applied left to right."""

    rules: tuple[ChmodRule, ...]
    text: str = ""

    def mode_for(self, mode: int | None, is_dir: bool) -> int:
        """The permission bits an entry gets: ``mode`` (the source's; None: 0644 for a
        file, 0755 for a directory, what a new entry gets under the usual umask 022)
        changed by each rule in turn."""
        base = stat.S_IMODE(mode) if mode is not None else (0o755 if is_dir else 0o644)
        for rule in self.rules:
            base = rule.apply(base, is_dir)
        return base & 0o7777


def parse_chmod(text: str, flag: str = "--chmod") -> Chmod:
    """``D755,F644`` / ``u+rwx,g-w,o=`` / ``Fu+x`` -> Chmod; a ConfigurationError
    naming the flag and the bad part otherwise."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise ConfigurationError(f"{flag} {text!r}: an empty rule (rules are separated by ',')")
    return Chmod(tuple(_rule(p, text, flag) for p in parts), text)


def _rule(part: str, text: str, flag: str) -> ChmodRule:
    applies_to = part[0] if part[0] in "DF" else ""
    body = part[1:] if applies_to else part
    if _OCTAL.match(body):
        return ChmodRule(applies_to, octal=int(body, 8))
    m = _SYMBOLIC.match(body)
    if not m:
        raise ConfigurationError(
            f"{flag} {text!r}: cannot read {part!r} (rsync's syntax: [D|F] then an octal "
            "mode like 644, or [ugoa][-+=][rwxXst], e.g. D755,F644 or u+rwx,g-w,o=)")
    who = m.group(1).replace("a", "ugo") or "ugo"
    actions = tuple((op, perms) for op, perms in _ACTION.findall(m.group(2)))
    return ChmodRule(applies_to, who="".join(sorted(set(who), key="ugo".index)),
                     actions=actions)


def _bits(who: str, perms: str, mode: int, is_dir: bool) -> int:
    """The mode bits ``perms`` means for the classes in ``who``; ``X`` is execute only
    for a directory or an entry some class may already execute (chmod's rule)."""
    bits = 0
    for w in who:
        r, wr, x = _WHO[w]
        bits |= (r if "r" in perms else 0) | (wr if "w" in perms else 0)
        if "x" in perms or ("X" in perms and (is_dir or mode & _ANY_EXEC)):
            bits |= x
        if "s" in perms and w == "u":
            bits |= stat.S_ISUID
        if "s" in perms and w == "g":
            bits |= stat.S_ISGID
        if "t" in perms and w == "o":
            bits |= stat.S_ISVTX
    return bits
