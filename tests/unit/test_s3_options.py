"""Pure S3 helpers: the request bound's defaults and mtime comparison across precisions."""

from __future__ import annotations

import pytest

from distcp import s3 as s3ops
from distcp.task import same_mtime


def test_user_settings_win_over_the_bound_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(s3ops.TIMEOUT_ENV, raising=False)
    mine = {"key": "k", "config_kwargs": {"read_timeout": 900, "retries": {"max_attempts": 9}}}
    out = s3ops.bounded_options(mine)
    assert out["config_kwargs"] == {"read_timeout": 900, "retries": {"max_attempts": 9},
                                    "connect_timeout": s3ops.CONNECT_TIMEOUT_S}
    assert mine["config_kwargs"] == {"read_timeout": 900, "retries": {"max_attempts": 9}}
    monkeypatch.setenv(s3ops.TIMEOUT_ENV, "4")
    assert s3ops.watchdog_seconds() == 4
    assert s3ops.bounded_options({})["config_kwargs"]["read_timeout"] == 4
    for bad in ("", "0", "-1", "nan", "inf", "soon"):
        monkeypatch.setenv(s3ops.TIMEOUT_ENV, bad)
        assert s3ops.watchdog_seconds() == s3ops.WATCHDOG_S


def test_mtimes_compare_at_the_coarser_precision() -> None:
    listed = 1_800_000_000.398  # rclone serve s3 lists milliseconds
    assert same_mtime(listed, 1_800_000_000.0)  # HEAD's Last-Modified: whole seconds
    assert same_mtime(1_800_000_000.0, listed)
    assert same_mtime(listed, listed + 0.0005)
    assert not same_mtime(listed, 1_800_000_001.0)
    assert not same_mtime(listed, listed + 0.1)  # both precise: a real change
