"""The fault-injection switches the crash tests set (distcp.faults)."""

from __future__ import annotations

import os
import subprocess
import sys

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


def test_a_crash_hook_is_asked_once_and_fires_as_crash_point_would(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Unarmed, the hook is one no-op for every item; armed, the n-th call kills the
    process (exit 137) as ``crash_point`` does, counted in the same passages."""
    monkeypatch.delenv("DISTCP_CRASH_AT", raising=False)
    assert faults.crash_hook("mid_publish") is faults.crash_hook("other")  # both unarmed
    script = ("from distcp import faults\n"
              "hook = faults.crash_hook('mid_publish')\n"
              "for n in range(5):\n"
              "    print(n, flush=True)\n"
              "    hook(n)\n")
    env = {**os.environ, "DISTCP_CRASH_AT": "mid_publish:3"}
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       env=env, timeout=60, check=False)
    assert (r.returncode, r.stdout.split()) == (137, ["0", "1", "2"])
    env["DISTCP_CRASH_AT"] = "elsewhere:1"
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       env=env, timeout=60, check=False)
    assert (r.returncode, r.stdout.split()) == (0, ["0", "1", "2", "3", "4"])
