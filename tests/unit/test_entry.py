"""The ``pydistcp`` process ends with ``os._exit`` after the CLI (distcp.entry): what
exit does first must still happen, in a real process: buffered output reaches a pipe,
``atexit`` handlers run, non-daemon threads finish, the status is the CLI's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from distcp.entry import BLAS_THREADS_ENV, status_of
from distcp.resident import ARROW_POOL_ENV

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import atexit, sys, threading, time
from pathlib import Path
here = Path(sys.argv[1])
atexit.register(lambda: (here / "atexit").write_text("ran"))
def late():
    time.sleep(0.3)
    (here / "thread").write_text("finished")
threading.Thread(target=late).start()
sys.stdout.write("buffered, no newline")
sys.argv = ["pydistcp", *sys.argv[2:]]
from distcp.entry import run
run()
"""


@pytest.mark.parametrize(("args", "code"), [(["--version"], 0),
                                            (["copy", "/no/such/source", "/tmp/x"], 2)])
def test_the_command_s_end_keeps_exit_s_guarantees(tmp_path: Path, args: list[str],
                                                   code: int) -> None:
    (tmp_path / "script.py").write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(tmp_path / "script.py"), str(tmp_path), *args],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == code, proc.stderr
    assert proc.stdout.startswith("buffered, no newline")
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "finished"


def test_status_of_is_what_sys_exit_gives(capsys: pytest.CaptureFixture[str]) -> None:
    assert status_of(SystemExit()) == 0
    assert status_of(SystemExit(130)) == 130
    assert status_of(SystemExit("pydistcp: bye")) == 1
    assert capsys.readouterr().err == "pydistcp: bye\n"


BLAS_SCRIPT = """
import atexit, os, sys
from pathlib import Path
here = Path(sys.argv[1])
atexit.register(lambda: (here / "blas").write_text(os.environ.get("OPENBLAS_NUM_THREADS", "unset")))
sys.argv = ["pydistcp", "--version"]
from distcp.entry import run
run()
"""

THREADS = """
import os, sys
if sys.argv[1] == "command":
    from distcp.entry import one_blas_thread
    one_blas_thread()
import numpy
print(len(os.listdir("/proc/self/task")))
"""


@pytest.mark.parametrize(("given", "kept"), [(None, "1"), ("2", "2")])
def test_the_command_asks_openblas_for_one_thread_unless_the_user_chose(
        tmp_path: Path, given: str | None, kept: str) -> None:
    _command_with(tmp_path, BLAS_SCRIPT, BLAS_THREADS_ENV, given)
    assert (tmp_path / "blas").read_text() == kept


def _command_with(tmp_path: Path, script: str, name: str, given: str | None) -> None:
    """Run ``script`` (the command, in a process of its own, never handed to a resident)
    with the variable ``name`` set to ``given`` (None: unset); it must succeed."""
    (tmp_path / "script.py").write_text(script)
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "PYDISTCP_RESIDENT": "0"}
    if given is not None:
        env[name] = given
    proc = subprocess.run([sys.executable, str(tmp_path / "script.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False, env=env)
    assert proc.returncode == 0, proc.stderr


ARROW_SCRIPT = """
import atexit, os, sys
from pathlib import Path
here = Path(sys.argv[1])
def seen():
    import pyarrow
    (here / "pool").write_text(pyarrow.default_memory_pool().backend_name)
atexit.register(seen)
sys.argv = ["pydistcp", "--version"]
from distcp.entry import run
run()
"""


@pytest.mark.parametrize(("given", "kept"), [(None, "system"), ("mimalloc", "mimalloc")])
def test_the_command_has_pyarrow_allocate_through_malloc_unless_the_user_chose(
        tmp_path: Path, given: str | None, kept: str) -> None:
    """mimalloc's huge pages made a publish 0.09 s or 0.15 s from run to run
    (``resident.system_arrow_pool``): the pool pyarrow loads with in the command."""
    _command_with(tmp_path, ARROW_SCRIPT, ARROW_POOL_ENV, given)
    assert (tmp_path / "pool").read_text() == kept


@pytest.mark.skipif(len(__import__("os").sched_getaffinity(0)) < 2, reason="one core")
def test_with_one_blas_thread_numpy_starts_no_thread_of_its_own() -> None:
    """Without the setting, numpy's OpenBLAS starts threads of its own on this machine;
    with it, the process keeps its one thread."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}

    def threads(how: str) -> int:
        proc = subprocess.run([sys.executable, "-c", THREADS, how], capture_output=True,
                              text=True, timeout=120, check=True, env=env)
        return int(proc.stdout)

    assert threads("plain") > 1
    assert threads("command") == 1
