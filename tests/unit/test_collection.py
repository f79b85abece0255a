"""The cyclic collector is paused in the driver's and the tasks' per-file loops, and
always given back as the caller had it."""

from __future__ import annotations

import gc
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import distcp
from distcp import collection
from distcp.run import planners


@pytest.fixture(autouse=True)
def _collector_on() -> Any:
    gc.enable()
    yield
    gc.enable()


def test_paused_restores_the_collector_even_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), collection.paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_paused_leaves_a_collector_the_caller_turned_off_off() -> None:
    gc.disable()
    with collection.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_a_rerun_plans_without_collections(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    """A no-op rerun (nothing to copy: no Spark) plans with the collector paused, and
    the run gives it back."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "a").mkdir(parents=True)
    for n in range(3):
        (src / "a" / f"f{n}").write_bytes(b"x" * n)
    shutil.copytree(src, dst)  # copy2: same sizes and mtimes, so every file is skipped
    seen: list[bool] = []
    plan_all = planners.plan_all

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return plan_all(*args, **kwargs)

    monkeypatch.setattr(planners, "plan_all", recording)
    summary = distcp.copy(str(src), str(dst), progress=False)
    assert (summary.files_copied, summary.files_skipped) == (0, 3)
    assert seen == [False]
    assert gc.isenabled()


def test_a_copy_task_copies_without_collections(monkeypatch: pytest.MonkeyPatch) -> None:
    """A task's per-file loop runs paused; the worker gets its collector back after the
    last result (a reused Python worker runs other tasks next)."""
    from distcp.copying import task

    seen: list[bool] = []
    result = SimpleNamespace(requests=())

    def unit(*_args: Any) -> Any:
        seen.append(gc.isenabled())
        yield result

    monkeypatch.setattr(task, "_run_unit", unit)
    monkeypatch.setattr(task, "replace", lambda last, **_: last)
    assert list(task.stream_work_unit(None, None, "a0")) == [result]  # type: ignore[arg-type]
    assert seen == [False]
    assert gc.isenabled()
