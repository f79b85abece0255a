"""The destination's lock on real S3 servers: a server that refuses a second
``If-None-Match: *`` create is learnt once (moto, as S3 itself), and its lock is then one
PutObject with no read-back; one that writes over the key (``rclone serve s3``) keeps the
HEAD before and the read-back after."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from distcp.errors import DestinationBusyError
from distcp.state.lock import DestinationLock
from distcp.storage import storage_for
from distcp.storage.base import Storage
from distcp.storage.s3 import lean
from tests.fixtures.s3_server import S3Server, moto_server, rclone_server, s3_any  # noqa: F401

_fresh = itertools.count()


def _storage(options: dict[str, Any]) -> Storage:
    """A storage of its own (a setting no other has): nothing learnt yet."""
    return storage_for("s3://dst/x", {**options, "listings_expiry_time": 2000 + next(_fresh)})


def _sent(action: Any) -> tuple[Any, int]:
    before = lean.requests_sent()
    out = action()
    return out, lean.requests_sent() - before


def test_a_create_learns_whether_the_server_refuses_a_second_one(
        s3_any: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # nothing remembered yet
    honours = s3_any.kind != "rclone"  # rclone serve s3 writes over the key
    storage = _storage(s3_any.options)
    assert not storage.creates_exclusively("s3://dst/l/lock")  # nothing learnt yet
    assert _sent(lambda: storage.create_new("s3://dst/l/lock", b"me")) == (True, 3)
    assert storage.creates_exclusively("s3://dst/l/lock") is honours
    assert s3_any.objects(prefix="l/") == {"l/lock": b"me"}  # the PUT sent again: same bytes
    # taken: refused by the PUT itself (honoured), else by the HEAD before it
    assert _sent(lambda: storage.create_new("s3://dst/l/lock", b"other")) == (False, 1)
    assert _sent(lambda: storage.create_new("s3://dst/l/next", b"you")) == (
        True, 1 if honours else 2)
    assert s3_any.objects(prefix="l/") == {"l/lock": b"me", "l/next": b"you"}

    # a later run (a storage of its own): a server that wrote over the key is remembered
    # on this machine, without its URL in the clear; one that refused is asked again
    later = _storage(s3_any.options)
    assert not later.creates_exclusively("s3://dst/l/lock")
    assert _sent(lambda: later.create_new("s3://dst/l/third", b"x")) == (
        True, 3 if honours else 2)
    assert later.creates_exclusively("s3://dst/l/lock") is honours
    remembered = tmp_path / "pydistcp" / "s3-writes-over"
    assert remembered.exists() is not honours
    if not honours:
        assert s3_any.endpoint.split("//")[1] not in remembered.read_text()
        assert len(remembered.read_text().split()) == 1


def test_the_lock_is_held_by_one_run_on_either_server(s3_any: S3Server) -> None:  # noqa: F811
    root = f"s3://dst/state-{next(_fresh)}"
    options = {**s3_any.options, "listings_expiry_time": 2000 + next(_fresh)}
    with DestinationLock(root, options, "job-first"):
        with pytest.raises(DestinationBusyError, match="held by copy job job-first"):
            DestinationLock(root, options, "job-second").acquire()
    with DestinationLock(root, options, "job-second") as second:
        assert second.holder() is not None and second.holder().job_id == "job-second"
    assert s3_any.objects(prefix=root.split("/", 3)[3]) == {}
