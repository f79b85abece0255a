"""``distcp.planning.beside``: a plan made in a forked child, its errors, its fallbacks."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distcp.errors import PlanningError
from distcp.planning import beside


@pytest.fixture(autouse=True)
def _enabled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(beside, "_enabled", True)
    yield


def _pid_and_value() -> tuple[int, str]:
    return os.getpid(), "planned"


def test_the_plan_is_made_in_a_child_and_comes_back() -> None:
    pid, value = beside.plan_beside(_pid_and_value, ["not_a_module_anyone_has"]) or (0, "")
    assert value == "planned"
    assert pid not in (0, os.getpid())  # made by another process


def _copies_then_waits() -> int:
    beside.copies_ahead()
    beside.copies_ahead()  # told once: a second call writes nothing more
    os.system("sleep 0.3")  # the parent's import, not the answer, comes first
    return 7


def test_meanwhile_modules_are_imported_here_once_the_plan_copies_something() -> None:
    sys.modules.pop("colorsys", None)
    assert beside.plan_beside(_copies_then_waits, ["colorsys"]) == 7
    assert "colorsys" in sys.modules


def test_a_plan_with_nothing_to_copy_leaves_the_imports_undone() -> None:
    """A no-op rerun's walks keep both cores: nothing is imported beside them."""
    sys.modules.pop("colorsys", None)
    assert beside.plan_beside(lambda: (os.system("sleep 0.3"), 7)[1], ["colorsys"]) == 7
    assert "colorsys" not in sys.modules


def test_copies_ahead_outside_a_planning_child_does_nothing() -> None:
    beside.copies_ahead()
    assert beside._ahead is None


def test_the_childs_error_is_raised_here_as_it_was() -> None:
    def fails() -> None:
        raise PlanningError("--include x: no file matched", path="/src")

    with pytest.raises(PlanningError, match="no file matched") as caught:
        beside.plan_beside(fails, ["not_a_module_anyone_has"])
    assert caught.value.path == "/src"


def test_a_bug_in_the_child_keeps_its_traceback_as_a_note() -> None:
    def buggy() -> None:
        {}["missing"]

    with pytest.raises(KeyError) as caught:
        beside.plan_beside(buggy, ["not_a_module_anyone_has"])
    assert "in buggy" in caught.value.__notes__[0]  # where it happened, in the child


class _Unloadable(Exception):
    def __init__(self, a: str, b: str) -> None:  # pickle rebuilds it with one argument
        super().__init__(f"{a} {b}")


@pytest.mark.parametrize("plan", [
    pytest.param(lambda: beside.refused_session(), id="needs-the-session"),
    pytest.param(lambda: (_ for _ in ()).throw(_Unloadable("x", "y")), id="error-that-cannot-travel"),
    pytest.param(lambda: lambda: None, id="plan-that-cannot-travel"),
    pytest.param(lambda: os._exit(137), id="child-died"),
])
def test_what_cannot_come_back_is_planned_here(plan: object) -> None:
    assert beside.plan_beside(plan, ["not_a_module_anyone_has"]) is None  # type: ignore[arg-type]


def test_no_fork_unless_enabled_or_when_the_client_is_imported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def never() -> None:
        raise AssertionError("planned although it should not fork")

    assert beside.plan_beside(never, ["os"]) is None  # imported already: nothing to overlap
    monkeypatch.setattr(beside, "_enabled", False)
    assert beside.plan_beside(never, ["not_a_module_anyone_has"]) is None


@pytest.mark.parametrize(("src", "dst", "options", "forks"), [
    ("/src", "/dst", {}, True),
    ("s3://bucket/src", "/dst", {}, False),  # a big prefix's walk could not come back
    ("/src", "s3://bucket/dst", {}, False),
    ("/src", "/dst", {"listing": "spark"}, False),  # planning needs the session
    ("/src", "/dst", {"dry_run": True}, False),  # no session at all
    ("/src", "/dst", {"copying": "driver"}, False),  # no session either: nothing to import
])  # whether a session opens cheaply is opens_cheaply's (tests/unit/test_opens_cheaply.py)
def test_which_runs_plan_beside(src: str, dst: str, options: dict[str, object],
                                forks: bool) -> None:
    """A run whose files to copy come to the driver (``collects``: here, every decision
    shown) may copy them on Spark: it plans beside the client's import."""
    from distcp.configuration import CopyConfiguration
    from distcp.run.choice import plans_beside

    cfg = CopyConfiguration.build([src], dst, **{"engine": "warm", **options})
    assert plans_beside(cfg, "every decision is shown or logged") is forks


@pytest.mark.parametrize(("options", "forks"), [
    ({}, False),  # its chunks are copied by processes forked here: no session opens
    ({"copying": "spark"}, True),  # a Spark job copies them
    ({"catalog_table": "db.events"}, True),  # the registrations open the session
])
def test_a_kept_plan_copied_here_is_planned_in_the_run_s_own_process(
        options: dict[str, object], forks: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from distcp.configuration import CopyConfiguration
    from distcp.run.choice import plans_beside

    cfg = CopyConfiguration.build(["/src"], "/dst", **{"engine": "warm", **options})
    assert plans_beside(cfg, None) is forks
    monkeypatch.setattr(beside, "_enabled", False)  # an API caller's process: no fork
    assert plans_beside(cfg, None) is True  # its copy may take Spark: decided by plan_beside


def test_the_session_module_imports_decimal_before_pyspark_does() -> None:
    """A Ctrl-C inside ``_decimal``'s first initialisation made its re-import print a C
    warning beside the run's one line (``distcp.spark.session``)."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", "import sys, distcp.spark.session; "
                          "print('decimal' in sys.modules, 'pyspark' in sys.modules)"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "False"]


def test_a_ctrl_c_during_a_fork_reaches_the_parent_after_it_and_the_child_never(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The interrupt lands inside the fork (here: just before it); Python's at-fork
    handlers never see it. The parent raises it once the block ends, with the child's
    pid in hand; the child, which ignores Ctrl-C from its first line on, never sees it."""
    real = os.fork

    def interrupted_fork() -> int:
        signal.raise_signal(signal.SIGINT)
        return real()

    monkeypatch.setattr(os, "fork", interrupted_fork)
    before = signal.getsignal(signal.SIGINT)
    r, w = os.pipe()
    children = []
    with pytest.raises(KeyboardInterrupt):
        with beside.interrupts_held():
            child = beside.fork()
            if child == 0:  # pragma: no cover - the child ends in os._exit
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.raise_signal(signal.SIGINT)  # the held one, were it passed on
                os.write(w, b"alive")
                os._exit(0)
            children.append(child)
    os.close(w)
    with os.fdopen(r, "rb") as answer:
        assert answer.read() == b"alive"
    assert len(children) == 1  # kept before the interrupt was raised
    assert os.waitpid(children[0], 0)[1] == 0
    assert signal.getsignal(signal.SIGINT) is before  # put back


def test_a_share_of_the_work_is_done_by_a_child_beside_this_process() -> None:
    with beside.shared(_pid_and_value) as wait:
        mine = os.getpid()  # this process's own share, meanwhile
        pid, value = wait() or (0, "")
    assert value == "planned" and pid not in (0, mine)


def test_a_shared_works_error_is_raised_here_and_nothing_comes_without_a_fork(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def fails() -> None:
        raise PlanningError("unreadable directory", path="/src/d1")

    with pytest.raises(PlanningError, match="unreadable") as caught:
        with beside.shared(fails) as wait:
            wait()
    assert caught.value.path == "/src/d1"
    with beside.shared(lambda: os._exit(137)) as wait:  # a child that died: do it here
        assert wait() is None
    monkeypatch.setattr(beside, "_enabled", False)  # an API caller's process
    with beside.shared(_pid_and_value) as wait:
        assert wait() is None


def test_leaving_the_block_early_kills_the_child_still_at_work() -> None:
    import time

    r, w = os.pipe()

    def slow() -> None:
        os.write(w, str(os.getpid()).encode())
        time.sleep(30)

    with pytest.raises(RuntimeError):
        with beside.shared(slow):
            child = int(os.read(r, 32))
            raise RuntimeError("this process's own share failed")
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(child, 0)


def test_a_share_is_forked_only_once_no_thread_of_ours_is_importing(
        tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child forked while ``preload``'s thread held a module's import lock waited for
    it forever when it imported that module (a walk's first copy-rows file imports
    pyarrow.parquet): ``shared`` waits for the imports first."""
    import importlib
    from pathlib import Path

    folder = Path(str(tmp_path))
    (folder / "slow_to_import_here.py").write_text("import time\ntime.sleep(0.5)\nVALUE = 7\n")
    monkeypatch.syspath_prepend(str(folder))
    beside.preload(("slow_to_import_here",))
    previous = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError()))
    signal.alarm(20)  # a hung child would block the read below forever
    try:
        with beside.shared(lambda: importlib.import_module("slow_to_import_here").VALUE) \
                as wait:
            assert wait() == 7
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        sys.modules.pop("slow_to_import_here", None)


def test_a_spark_session_is_opened_only_once_the_preload_thread_has_imported(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PySpark imports numpy and pandas in the run's thread while its context starts; a
    Ctrl-C landing in the import machinery while the preload thread imported pyarrow
    left both threads waiting on each other's import locks (an interrupted run hung):
    ``spark_session`` waits for the preload's imports first."""
    from distcp.spark.session import spark_session

    (tmp_path / "slow_preload_here.py").write_text("import time\ntime.sleep(0.5)\nDONE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        beside.preload(("slow_preload_here",))
        with spark_session("local[2]", {}, str(tmp_path / "spark.log")) as session:
            assert session is spark  # the active one, and the preload's imports done
            # (a module is in sys.modules from its import's start: its last line says done)
            assert getattr(sys.modules.get("slow_preload_here"), "DONE", 0) == 1
    finally:
        sys.modules.pop("slow_preload_here", None)
