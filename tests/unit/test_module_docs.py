"""Every module says where it runs: the first line of its docstring ends with
``(driver).``, ``(executor).`` or ``(driver and executor).`` (issue 36, point 5).

Executor code must pickle, import no driver stage and hold bounded memory; a reader
should know which rules apply before reading further.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "distcp"
#: The three places a module can run, as its first docstring line ends.
WHERE = re.compile(r" \((driver|executor|driver and executor)\)\.$")
#: Nothing owed: every folder, ``storage/`` included, says it.
OWED: tuple[str, ...] = ()


def _modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py")
                  if p.relative_to(ROOT).parts[0] not in OWED)


def _first_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text()), clean=False)
    return doc.splitlines()[0] if doc else ""


def test_every_module_says_where_it_runs() -> None:
    missing = [f"{p.relative_to(ROOT.parent)}: {_first_line(p)!r}" for p in _modules()
               if not WHERE.search(_first_line(p))]
    assert missing == []


def test_the_check_sees_modules_and_packages() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in _modules()}
    assert {"__init__.py", "copying/task.py", "commit/__init__.py"} <= names
    assert {"storage/base.py", "storage/s3/storage.py"} <= names
    assert WHERE.search("Run one WorkUnit (executor).")
    assert not WHERE.search("EXECUTOR: run one WorkUnit.")
