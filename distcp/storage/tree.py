"""A tree's root resolved once on its storage, for listing below it (driver and executor).

Listings give each entry as the backend's own path (a local path is its own URL), never
a URL per entry: a walk of 300,000 local files must not pay a conversion each. Where a
planner needs URLs, ``url_of`` turns one of those paths into its URL, and where it needs
relative paths, it cuts them against ``path``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from distcp.storage import filesystems as fsutil

if TYPE_CHECKING:
    from distcp.storage.base import Storage


@dataclass(frozen=True)
class Tree:
    """The root ``url`` of a tree on ``storage``: ``path`` is the backend's own spelling
    of it, as given (what every path a listing of it yields starts with).

    ``handle`` is the backend's filesystem, kept for the storage's own listing modules
    (``distcp.storage.treelisting``, which cut a listing into tasks); the engine passes
    it on and never calls it. A driver-side value: tasks carry URLs and options instead.
    """

    storage: Storage
    url: str
    path: str
    handle: Any = field(repr=False, compare=False)

    def url_of(self, path: str) -> str:
        """The URL of ``path``, a path of this tree's filesystem (as listings give
        them); a local path is its own URL."""
        return fsutil.to_url(self.handle, path)

    @property
    def kind(self) -> str | None:
        """How a listing of this tree can be cut into tasks: ``tree`` (by subtree),
        ``keys`` (by key range) or None (it cannot: one process walks it)."""
        return self.storage.listing_kind(self)

    def holds(self, other: Tree, path: str | None = None) -> bool:
        """Whether ``path`` of ``other``'s filesystem (by default its root) is this
        tree's root or lies below it: the same filesystem (class and options), and
        the same place once the storage spelled both its one way (a local link
        resolved), so a destination inside its own source is refused."""
        if type(self.handle) is not type(other.handle) or \
                self.handle.storage_options != other.handle.storage_options:
            return False
        inner = other.path if path is None else path
        outer = self.storage.same_place(self.path.rstrip("/"))
        inner = self.storage.same_place(inner.rstrip("/"))
        return inner == outer or inner.startswith(outer + "/")
