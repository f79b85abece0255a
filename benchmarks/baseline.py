"""Another version's code beside this checkout's, timed in the same rounds.

``--baseline DIR`` of the benchmarks: a tree holding another version's ``distcp/``
package (``git archive REV distcp | tar -x -C DIR``). A tool named ``T@base`` runs ``T``
on that code, interleaved with ``T`` on this checkout's, so a before/after comparison
shares the machine's mood instead of comparing two runs an hour apart.

Spark starts its Python workers with ``python -m`` in the current folder, so the
baseline's code must be first on the driver's path (``PYTHONPATH``) AND be the folder a
run starts in; its warm engine lives in a folder of its own.
"""

from __future__ import annotations

import compileall
import sys
from pathlib import Path

#: The suffix naming a tool's twin on the baseline's code.
BASE = "@base"


def load(where: Path) -> Path:
    """The baseline's root, its bytecode written (as installed, as ours); SystemExit
    naming the folder when it holds no ``distcp/`` package."""
    root = where.resolve()
    if not (root / "distcp" / "__init__.py").is_file():
        raise SystemExit(f"--baseline {where}: no distcp/ package in it")
    compileall.compile_dir(str(root / "distcp"), quiet=1)
    return root


def env(root: Path, base: dict[str, str]) -> dict[str, str]:
    """``base`` with the baseline's code first and its own warm engine folder."""
    return {**base, "PYTHONPATH": str(root), "PYDISTCP_ENGINE_DIR": str(root / ".engine")}


def command() -> list[str]:
    """How a baseline run starts pydistcp (run it with ``cwd`` at the baseline's root)."""
    return [sys.executable, "-m", "distcp"]
