"""Where the tool may act: a record's paths checked against its roots first (driver and executor).

File names, archive members and object keys are data. They must never become the
tool's own state (a member ``.pydistcp/commits/x.json`` expanded into a destination
would be replayed by the next run as one of our commit records), and a record read
back from the state directory must never make the tool act outside the places the
run was given: its destination, its state root and, for ``move``, its sources. This
module holds the two questions every such check asks: is this path inside that root
(``inside``), and which roots may this run touch, in which role (``Bounds``).

Paths are compared as text after normalising, never resolved on the filesystem: a
record is judged before anything reads or writes what it names. A path with a
``..`` component is outside every root, whatever it would normalise to.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

from distcp.storage import filesystems as fsutil

#: Roles of a path a commit step acts on (``CommitStep.targets``).
DESTINATION = "destination"
STATE = "state"
SOURCE = "source"
#: Not a path but a name the tool joins to one (a sequence id): one plain component.
NAME = "name"


def canonical(url: str) -> str | None:
    """``url`` normalised for comparison (local paths absolute, ``file://`` dropped,
    duplicate and trailing slashes gone); None when a component is ``..``."""
    local = fsutil.local_path(url)
    scheme, path = ("", local) if local is not None else url.split("://", 1) \
        if "://" in url else ("", url)
    if ".." in path.split("/"):
        return None
    if not scheme:
        path = os.path.abspath(path) if path else path
    norm = posixpath.normpath(path) if path else path
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    return f"{scheme}://{norm}" if scheme else norm


def inside(url: str, root: str) -> bool:
    """Whether ``url`` is ``root`` or below it (``root`` is trusted: the run's own)."""
    path, top = canonical(url), canonical(root)
    if path is None or top is None:
        return False
    return path == top or path.startswith(top.rstrip("/") + "/")


def protected_roots(destination: str, state_root: str) -> tuple[str, ...]:
    """The folders no byte of user data may be written under: the run's state root,
    and the state directory a run without ``--state-dir`` would use at this
    destination (a record planted there would be replayed by such a later run)."""
    default = fsutil.join(destination.rstrip("/") or "/", fsutil.STATE_DIR_NAME)
    roots = (canonical(r) for r in (state_root, default) if r)
    return tuple(dict.fromkeys(r for r in roots if r))


def protected_by(url: str, roots: Iterable[str]) -> str | None:
    """The protected root ``url`` falls in, or None."""
    return next((r for r in roots if inside(url, r)), None)


def landing_in(destination: str, roots: tuple[str, ...]) -> str | None:
    """``protected_by`` for a planned or expanded destination, asked once per file on
    executors: a prefix test against the canonical roots (a few hundred ns); the full
    normalisation only for a name holding ``.`` or empty components, which listings and
    archive names (``converters.safety``) never produce but a hand-made one might."""
    for root in roots:
        if destination == root or destination.startswith(root + "/"):
            return root
    if "/." in destination or "//" in destination.split("://", 1)[-1] \
            or destination.startswith("file://"):
        return protected_by(destination, roots)
    return None


@dataclass(frozen=True)
class Bounds:
    """The roots one run may act in: its destination, its state root, and the sources
    a ``move`` may delete (None: this command is not given them, like ``recover``; a
    move's deletion then rests on its own check, that the source's copy is at the
    destination, inside it, with the published size)."""

    destination: str
    state_root: str
    sources: tuple[str, ...] | None = ()

    def allows(self, role: str, url: str) -> bool:
        """Whether a step may act on ``url`` in ``role``: state paths inside the state
        root; destination paths inside the destination and outside every protected
        root; sources inside one of the run's sources."""
        if role == STATE:
            return inside(url, self.state_root)
        if role == DESTINATION:
            return inside(url, self.destination) and protected_by(
                url, protected_roots(self.destination, self.state_root)) is None
        if role == SOURCE:
            return self.sources is None or any(inside(url, s) for s in self.sources)
        if role == NAME:
            return plain_name(url)
        return False

    def first_outside(self, targets: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
        """The first (role, url) of ``targets`` this run may not act on, or None."""
        return next(((role, url) for role, url in targets
                     if not self.allows(role, url)), None)


def plain_name(name: str) -> bool:
    """Whether ``name`` is one path component that stays where it is joined."""
    return bool(name) and name not in (".", "..") and not any(
        c in name for c in "/\\\x00")


def source_roots(sources: Iterable[str]) -> tuple[str, ...]:
    """The folders a run's sources name: a glob's part before its first wildcard."""
    out = []
    for src in sources:
        cut = min((i for i, c in enumerate(src) if c in "*?["), default=len(src))
        head = src[:cut]
        out.append(head if cut == len(src) else head.rsplit("/", 1)[0] or "/")
    return tuple(out)
