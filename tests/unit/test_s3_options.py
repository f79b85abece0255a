"""Pure S3 helpers: the request bound's defaults, throttling, mtimes across precisions."""

from __future__ import annotations

import errno
import time
from types import SimpleNamespace
from typing import Any

import fsspec.asyn
import pytest

from distcp.mtimes import same_mtime
from distcp.storage import watchdog
from distcp.storage.s3 import ops as s3ops
from distcp.storage.s3 import settings as s3settings


def test_user_settings_win_over_the_bound_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(watchdog.TIMEOUT_ENV, raising=False)
    mine = {"key": "k", "config_kwargs": {"read_timeout": 900, "retries": {"max_attempts": 9}}}
    out = s3ops.bounded_options(mine)
    assert out["config_kwargs"] == {"read_timeout": 900, "retries": {"max_attempts": 9},
                                    "connect_timeout": s3settings.CONNECT_TIMEOUT_S,
                                    "max_pool_connections": s3settings.POOL_CONNECTIONS}
    assert mine["config_kwargs"] == {"read_timeout": 900, "retries": {"max_attempts": 9}}
    monkeypatch.setenv(watchdog.TIMEOUT_ENV, "4")
    assert watchdog.watchdog_seconds() == 4
    assert s3ops.bounded_options({})["config_kwargs"]["read_timeout"] == 4
    for bad in ("", "0", "-1", "nan", "inf", "soon"):
        monkeypatch.setenv(watchdog.TIMEOUT_ENV, bad)
        assert watchdog.watchdog_seconds() == watchdog.WATCHDOG_S


def test_a_task_uses_the_bound_the_driver_read_not_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(watchdog.TIMEOUT_ENV, "4")
    with watchdog.bounded_by(42.0):
        monkeypatch.setenv(watchdog.TIMEOUT_ENV, "7")  # a worker's own environment changes
        assert watchdog.watchdog_seconds() == 42.0
        assert s3ops.bounded_options({})["config_kwargs"]["read_timeout"] == 42.0
        assert s3ops.bounded_options({})["config_kwargs"]["connect_timeout"] == 10.0
    assert watchdog.watchdog_seconds() == 7  # outside a task: the environment, as before
    with watchdog.bounded_by(None):
        assert watchdog.watchdog_seconds() == 7


def test_the_driver_reads_the_bound_once_into_the_task_spec(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from distcp.configuration import CopyConfiguration
    from distcp.run.branch import task_spec

    monkeypatch.setenv(watchdog.TIMEOUT_ENV, "12.5")
    cfg = CopyConfiguration.build([str(tmp_path)], str(tmp_path / "dst"))
    assert task_spec(cfg, "job", str(tmp_path / "dst" / ".pydistcp")).request_timeout == 12.5
    monkeypatch.delenv(watchdog.TIMEOUT_ENV)
    spec = task_spec(cfg, "job", str(tmp_path / "dst" / ".pydistcp"))
    assert spec.request_timeout == watchdog.WATCHDOG_S


def test_mtimes_compare_at_the_coarser_precision() -> None:
    listed = 1_800_000_000.398  # rclone serve s3 lists milliseconds
    assert same_mtime(listed, 1_800_000_000.0)  # HEAD's Last-Modified: whole seconds
    assert same_mtime(1_800_000_000.0, listed)
    assert same_mtime(listed, listed + 0.0005)
    assert not same_mtime(listed, 1_800_000_001.0)
    assert not same_mtime(listed, listed + 0.1)  # both precise: a real change


def _flaky(failures: list[OSError]) -> Any:
    calls: list[int] = []

    async def request() -> str:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return "answer"

    return request, calls


def test_a_throttled_request_is_sent_again_after_growing_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(s3ops.time, "sleep", pauses.append)
    request, calls = _flaky([OSError(errno.EBUSY, "SlowDown")] * 3)
    fs = SimpleNamespace(loop=fsspec.asyn.get_loop())
    assert s3ops.sync_bounded(fs, "upload_part s3://b/k", request) == "answer"
    assert len(calls) == 4 and len(pauses) == 3
    assert pauses[0] < pauses[2]  # backs off: 0.25-0.5 s, then up to 2 s


def test_throttling_that_never_ends_and_other_errors_are_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(s3ops.time, "sleep", lambda s: None)
    fs = SimpleNamespace(loop=fsspec.asyn.get_loop())
    request, calls = _flaky([OSError(errno.EBUSY, "SlowDown")] * 99)
    with pytest.raises(OSError, match="SlowDown"):
        s3ops.sync_bounded(fs, "put_object s3://b/k", request)
    assert len(calls) == s3settings.THROTTLE_RETRIES + 1
    request, calls = _flaky([PermissionError(errno.EACCES, "AccessDenied")])
    with pytest.raises(PermissionError):
        s3ops.sync_bounded(fs, "put_object s3://b/k", request)
    assert len(calls) == 1  # not a throttle: never sent again


def test_throttle_retries_stop_within_the_s3_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """PYDISTCP_S3_TIMEOUT bounds a whole operation, its throttle pauses included: a
    pause that would end past it is not taken, the throttle error is raised."""
    monkeypatch.setenv("PYDISTCP_S3_TIMEOUT", "1")
    fs = SimpleNamespace(loop=fsspec.asyn.get_loop())
    request, calls = _flaky([OSError(errno.EBUSY, "SlowDown")] * 99)
    t = time.monotonic()
    with pytest.raises(OSError, match="SlowDown"):
        s3ops.sync_bounded(fs, "put_object s3://b/k", request)
    # every pause ends inside the bound; the attempt after the last one needs its own
    # moment (the suite once saw it end just past 1.0 s on a busy machine)
    assert time.monotonic() - t < 1.0 + 0.5 and 1 <= len(calls) <= 3
