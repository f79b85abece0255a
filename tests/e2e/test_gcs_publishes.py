"""A file set's staged GCS objects published from one thread, against fake-gcs-server on
127.0.0.1 (``GcsStorage.publish_all``, ``distcp.storage.gcs.publishes``).

Every staged object is rewritten to its final name by one request written by hand, its
metadata (the kept mtime and mode) carried over, and deleted once every rewrite has
answered; the SDK's rewrite and delete are not called. What this way does not publish
(a staged object gone, a proxy in the environment) goes the SDK's way, whose errors are
the ones raised.
"""

from __future__ import annotations

from typing import Any

import pytest

from distcp.storage import storage_for
from distcp.storage.gcs import objects
from distcp.storage.staged import Staged
from distcp.storage.staging import StagedFile
from tests.fixtures.gcs_server import GcsServer, fake_gcs_server, gcs  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e


def _staged(gcs: GcsServer, prefix: str, bodies: dict[str, bytes]  # noqa: F811
            ) -> list[StagedFile]:
    """Each body uploaded as a staging object with a kept mtime and mode, as a task
    stages it."""
    bucket = gcs.client().bucket("dst")
    files = []
    for name, body in bodies.items():
        staged = bucket.blob(f"{prefix}/.staging/{name}")
        staged.metadata = objects.kept_attributes(0o640, 1_700_000_000.0 + len(body))
        staged.upload_from_string(body)
        files.append(StagedFile(Staged.path(f"gs://dst/{staged.name}"),
                                f"gs://dst/{prefix}/out/{name}", len(body)))
    return files


def _forbid_the_sdk(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SDK's rewrite and delete counted, not sent."""
    calls: list[str] = []

    def counted(kind: str) -> Any:
        return lambda options, *paths, **kw: calls.append(f"{kind} {paths[0]}")

    monkeypatch.setattr(objects, "rewrite", counted("rewrite"))
    monkeypatch.setattr(objects, "delete", counted("delete"))
    return calls


def test_a_file_set_is_rewritten_and_its_staged_objects_deleted_without_the_sdk(
        gcs: GcsServer, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    bodies = {f"d{i % 3}/f{i}": bytes([i]) * (i + 1) for i in range(60)}
    bodies["odd name #?%&"] = b"data, not syntax"
    files = _staged(gcs, "set", bodies)
    calls = _forbid_the_sdk(monkeypatch)
    storage = storage_for("gs://dst/set", {})
    seen: list[str] = []
    storage.publish_all(files, lambda f: seen.append(f.final))
    assert calls == []
    assert sorted(seen) == sorted(f.final for f in files)
    assert gcs.objects("dst", "set/") == {f"set/out/{n}": b for n, b in bodies.items()}
    kept = gcs.metadata("dst", "set/out/d1/f4")
    assert kept[objects.MTIME_KEY] == "1700000005" and kept[objects.MODE_KEY] == "640"
    assert storage.all_published(files)


def test_what_the_pipelined_way_did_not_publish_goes_the_sdk_way(
        gcs: GcsServer) -> None:  # noqa: F811
    """A staged object already published (a replay) passes; one gone without its final
    object fails as a move would, with the SDK's error; the rest are published."""
    files = _staged(gcs, "mixed", {"a": b"A", "b": b"BB", "c": b"CCC"})
    storage = storage_for("gs://dst/mixed", {})
    storage.publish_all(files[:1])
    gcs.client().bucket("dst").blob("mixed/.staging/c").delete()
    with pytest.raises(FileNotFoundError, match="mixed/.staging/c"):
        storage.publish_all(files)
    assert gcs.objects("dst", "mixed/") == {"mixed/out/a": b"A", "mixed/out/b": b"BB"}


def test_a_proxy_leaves_the_publish_to_the_sdk(gcs: GcsServer,  # noqa: F811
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    files = _staged(gcs, "proxied", {"a": b"A", "b": b"BB"})
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    calls = _forbid_the_sdk(monkeypatch)
    storage_for("gs://dst/proxied", {}).publish_all(files)
    assert sorted(calls) == ["delete dst/proxied/.staging/a", "delete dst/proxied/.staging/b",
                             "rewrite dst/proxied/.staging/a", "rewrite dst/proxied/.staging/b"]
