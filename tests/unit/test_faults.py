"""The fault-injection switches the crash tests set (distcp.faults)."""

from __future__ import annotations

import pytest

from distcp import faults


@pytest.mark.parametrize(("setting", "expected"), [
    (None, False), ("", False), ("after_stage:3", True), ("after_stage:", True),
    ("after_stage", False),  # crash_point needs the ":<n>" too: it never fires on this
    ("first_attempt_after_stage:1", False), ("before_publish:1", False)])
def test_armed_answers_as_crash_point_would_fire(monkeypatch: pytest.MonkeyPatch,
                                                 setting: str | None, expected: bool) -> None:
    if setting is None:
        monkeypatch.delenv("DISTCP_CRASH_AT", raising=False)
    else:
        monkeypatch.setenv("DISTCP_CRASH_AT", setting)
    assert faults.armed("after_stage") is expected
