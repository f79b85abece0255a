"""Replace a small document (a state file, a record) all at once (driver and executor).

Readers see the old or the new document, never half of one. Its own module
because both sides write such documents: the driver's state and commit log
(``distcp.state.store``, ``distcp.commit.log``) and executors' range records
(``distcp.copying.ranges``), and executors must not import the state module.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from distcp.storage import storage_for


def write_atomic(url: str, data: bytes, options: dict[str, Any], durable: bool = True) -> None:
    """Replace ``url`` with ``data`` so that readers see the old or the new, never half
    (the storage's way: temp file + rename, or one PUT).

    ``durable=False`` skips the local fsync, for records that only vouch for data that
    is not synced either (a split range's record: the whole file is re-checked at
    publish). On ext4 each fsync commits the journal, which stalls the writers of the
    big staging file next to it.
    """
    storage_for(url, options).write_atomic(url, data, durable)


def write_atomic_pieces(url: str, pieces: Iterable[bytes], options: dict[str, Any]) -> None:
    """``write_atomic`` of a document made piece by piece, never whole in memory where
    the storage writes a temp file (a commit log entry of a million files)."""
    storage_for(url, options).write_atomic_pieces(url, pieces)
