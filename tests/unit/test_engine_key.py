"""The warm engine's key names the interpreter by its environment and real binary, so
``pydistcp`` (whose shebang is the environment's ``python3``) and ``python -m distcp``
(its ``python``) share one engine: they were two, each run of the other cold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ASK = "import json; from distcp.spark.engine import interpreter; print(json.dumps(interpreter()))"


def _key_of(python: str) -> list[str]:
    out = subprocess.run([python, "-c", ASK], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60).stdout
    return list(json.loads(out))


def test_python_and_python3_of_one_environment_share_the_key() -> None:
    names = [Path(sys.executable).with_name(n) for n in ("python", "python3")]
    if not all(p.exists() for p in names):
        pytest.skip("this environment has not both python and python3")
    keys = [_key_of(str(p)) for p in names]
    assert keys[0] == keys[1] == [sys.prefix, os.path.realpath(sys.executable)]



def test_the_key_names_pysparks_version_without_importing_pyspark() -> None:
    """Every run asks for its engine's key; one that opens no session (a no-op rerun)
    must not pay PySpark's import for it."""
    ask = ("import json, sys; from distcp.spark.engine import pyspark_version; "
           "v = pyspark_version(); print(json.dumps([v, 'pyspark' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         timeout=60).stdout
    from pyspark.version import __version__

    assert json.loads(out) == [__version__, False]
