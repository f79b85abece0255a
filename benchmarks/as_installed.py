"""Benchmarks measure pydistcp as an installed package runs: with its bytecode.

pip writes a package's bytecode when it installs it, and a checkout gets it at its first
import, except where the environment sets PYTHONDONTWRITEBYTECODE (this project's
machine does). There every process a run starts (the client, each Spark daemon and
Python worker) compiled the modules edited since their bytecode was last written: up to
0.15 s a process for the whole package, which no user pays.
"""

from __future__ import annotations

import compileall
from pathlib import Path


def write_bytecode() -> None:
    """Write the bytecode of the pydistcp these benchmarks run (only what is stale)."""
    import distcp

    compileall.compile_dir(str(Path(distcp.__file__).parent), quiet=1)
