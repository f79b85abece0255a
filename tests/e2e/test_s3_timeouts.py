"""A server that stops answering ends a run with an error, never a hang.

Between s3fs and a real moto server sits a TCP proxy that can freeze (connections
stay open, nothing is forwarded), which is how a stalled or SIGSTOPped server looks
from the client. ``PYDISTCP_S3_TIMEOUT`` makes the bound a few seconds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from distcp.state.store import DatasetState, StateStore, read_json, write_atomic
from distcp.storage import filesystems as fsutil
from distcp.storage import watchdog
from distcp.storage.s3 import ops as s3ops
from distcp.storage.s3 import settings as s3settings
from tests.conftest import run_cli
from tests.fixtures.s3_server import (  # noqa: F401 - fixtures
    ACCESS_KEY,
    SECRET_KEY,
    S3Server,
    assert_no_canary,
    moto_server,
    s3,
)
from tests.fixtures.stall_proxy import StallProxy, stall_proxy  # noqa: F401 - fixture

pytestmark = pytest.mark.e2e
BOUND = 2.0


def options_via(proxy: StallProxy) -> dict[str, Any]:
    return {"key": ACCESS_KEY, "secret": SECRET_KEY,
            "client_kwargs": {"endpoint_url": proxy.endpoint, "region_name": "us-east-1"}}


@pytest.fixture()
def short_bound(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setenv(watchdog.TIMEOUT_ENV, str(BOUND))
    return BOUND


@contextmanager
def default_bound() -> Iterator[None]:
    """The default bound for the calls a test makes while the server is live: on a
    busy machine a first call (a new client, its first connection) took over 2 s."""
    with pytest.MonkeyPatch.context() as live:
        live.delenv(watchdog.TIMEOUT_ENV, raising=False)
        yield


def test_state_documents_on_a_stalled_server_fail_naming_the_file_within_the_bound(
        stall_proxy: StallProxy, short_bound: float) -> None:  # noqa: F811
    options = options_via(stall_proxy)
    url = "s3://dst/root/.pydistcp/datasets/x.json"
    with default_bound():  # answered while the server is live
        write_atomic(url, b'{"a": 1}', options)
        assert read_json(url, options, "dataset state") == {"a": 1}
    stall_proxy.frozen.set()
    for action in (lambda: write_atomic(url, b"{}", options),
                   lambda: read_json(url, options, "dataset state"),
                   lambda: StateStore("s3://dst/root/.pydistcp", options).save(
                       DatasetState("urn:x"))):
        t = time.monotonic()
        with pytest.raises(TimeoutError) as info:
            action()
        took = time.monotonic() - t
        assert took < short_bound + 3, took
        message = str(info.value)
        assert "s3://dst/root/.pydistcp/datasets/" in message and "no answer" in message
        assert watchdog.TIMEOUT_ENV in message and SECRET_KEY not in message


def test_a_lean_get_on_a_stalled_server_fails_within_its_attempts(
        s3: S3Server, stall_proxy: StallProxy, short_bound: float) -> None:  # noqa: F811
    from distcp.storage.s3 import lean as s3get

    s3.client().put_object(Bucket="src", Key="lean/a.bin", Body=b"x" * 64)
    fs, _ = fsutil.filesystem("s3://src/", options_via(stall_proxy))
    etag = fs.info("s3://src/lean/a.bin")["ETag"]
    before = s3get.requests_sent()
    assert s3ops.get_if_match(fs, "s3://src/lean/a.bin", etag) == b"x" * 64
    assert s3get.requests_sent() == before + 1  # the lean path, its connection kept
    stall_proxy.frozen.set()
    t = time.monotonic()
    with pytest.raises(OSError) as info:
        s3ops.get_if_match(fs, "s3://src/lean/a.bin", etag)
    took = time.monotonic() - t
    assert took < s3settings.MAX_ATTEMPTS * short_bound + 3, took
    assert "GET s3://src/lean/a.bin" in str(info.value) and SECRET_KEY not in str(info.value)


def test_multipart_calls_on_a_stalled_server_fail_within_the_bound(
        stall_proxy: StallProxy, short_bound: float) -> None:  # noqa: F811
    fs, _ = fsutil.filesystem("s3://dst/x", options_via(stall_proxy))
    stall_proxy.frozen.set()
    t = time.monotonic()
    with pytest.raises(TimeoutError, match="create_multipart_upload s3://dst/big.bin"):
        s3ops.create(fs, "s3://dst/big.bin")
    assert time.monotonic() - t < short_bound + 3


def test_every_s3fs_request_gets_socket_timeouts_and_bounded_attempts(
        stall_proxy: StallProxy, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Calls we make through s3fs's own API (listing, reading) end too, after at most
    s3fs's 5 tries x botocore's 3 attempts, each ended by the per-attempt timeout
    (capped by the bound: 1 s here). The attempts are counted at the proxy (a timed-out
    connection is never reused); the time only proves it ends (the ideal is 5 x (3 x 1 s
    + botocore's backoff of up to 1 + 2 s) + s3fs's own backoff, doubled for a loaded
    machine: CI measured 46 s once for an ideal of about 37 s)."""
    bound = 1.0
    monkeypatch.setenv(watchdog.TIMEOUT_ENV, str(bound))
    fs, _ = fsutil.filesystem("s3://dst/x", options_via(stall_proxy))
    fs.pipe_file("dst/d/f.txt", b"x")
    stall_proxy.frozen.set()
    fs.invalidate_cache()
    before = stall_proxy.accepted
    t = time.monotonic()
    with pytest.raises(OSError, match="(?i)timeout"):
        fs.ls("dst/d")
    took = time.monotonic() - t
    attempts = stall_proxy.accepted - before  # (+1 if a live connection was reused first)
    assert 1 <= attempts <= 5 * s3settings.MAX_ATTEMPTS, attempts
    assert took < 2 * (5 * (s3settings.MAX_ATTEMPTS * bound + 3) + 2), took


def test_a_run_whose_server_stops_answering_at_publish_ends_naming_the_file(
        s3: S3Server, tmp_path: Path) -> None:  # noqa: F811
    """The real CLI on Spark: the server goes silent at the first commit-log write."""
    host, port = s3.endpoint.removeprefix("http://").split(":")
    proxy = StallProxy((host, int(port)), trigger=b"/.pydistcp/commits/")
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "a.txt").write_bytes(b"a" * 1000)
    (src / "b.bin").write_bytes(b"b" * 100_000)
    try:
        t = time.monotonic()
        r = run_cli("copy", str(src), "s3://dst/tree", "--no-progress", "--master", "local[2]",
                    "--log-dir", str(tmp_path / "logs"),
                    env={**s3.env, "AWS_ENDPOINT_URL": proxy.endpoint,
                         watchdog.TIMEOUT_ENV: "3"})
        took = time.monotonic() - t
    finally:
        proxy.close()
    assert proxy.frozen.is_set(), "the run never wrote its commit log"
    assert r.returncode != 0 and took < 240, (r.returncode, took)
    assert "no answer from the S3 server within 3 s" in r.stderr, r.stderr
    assert "internal error" not in r.stderr and "rerun to finish" in r.stderr, r.stderr
    assert "s3://dst/tree/.pydistcp/commits/" in r.stderr and watchdog.TIMEOUT_ENV in r.stderr
    assert_no_canary(r.stdout, r.stderr)
    assert {k for k in s3.objects("dst") if "/.pydistcp/" not in k} == set()


def test_a_unit_of_small_objects_on_a_stalled_server_fails_within_a_few_bounds(
        s3: S3Server, stall_proxy: StallProxy, short_bound: float,  # noqa: F811
        tmp_path: Path) -> None:
    """The unit's reads from one thread give up after the read bound, and what they did
    not read goes its usual way on the task's threads, all at once: 32 objects cost a
    few bounds, not 32 times three attempts."""
    from distcp.copying.task import TaskSpec, run_work_unit
    from distcp.model import CopyableFile, WorkUnit

    options = options_via(stall_proxy)
    with default_bound():
        for n in range(32):
            s3.client().put_object(Bucket="src", Key=f"unit/o{n:02d}", Body=b"y" * 64)
        fs, path = fsutil.filesystem("s3://src/unit", options)
        files = tuple(CopyableFile(origin=fsutil.status(fs, info), dataset_urn="d",
                                   file_set="", destination=str(tmp_path / "out" / name))
                      for name, info in sorted(fs.find(path, detail=True).items()))
    spec = TaskSpec(job_id="j", staging_root=str(tmp_path / "staging"),
                    progress_root=str(tmp_path / "p"), src_options=options)
    stall_proxy.frozen.set()
    t = time.monotonic()
    results = run_work_unit(WorkUnit(unit_id=0, files=files), spec, "a0")
    took = time.monotonic() - t
    assert took < short_bound + 2 * s3settings.MAX_ATTEMPTS * short_bound + 5, took
    assert [r.origin for r in results] == [f.origin.url for f in files]
    assert all(r.status == "failed" and r.origin.removeprefix("s3://") in r.message
               and SECRET_KEY not in r.message for r in results), results[0].message
    assert not list((tmp_path / "staging").rglob("o*"))
