"""The worker daemon drops the ``pyspark.zip`` of the installed PySpark, and only that
one, from its path (``distcp.spark.daemon.installed_first``), on real files."""

from __future__ import annotations

import zipfile
from pathlib import Path

from distcp.spark.daemon import installed_first


def _pyspark(site: Path) -> Path:
    (site / "pyspark").mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    for name, package in (("pyspark.zip", "pyspark"), ("py4j-0.10.9.9-src.zip", "py4j")):
        with zipfile.ZipFile(lib / name, "w") as z:
            z.writestr(f"{package}/__init__.py", "")
    return lib


def test_the_zip_inside_the_installed_package_goes_and_the_rest_stays(tmp_path: Path) -> None:
    lib = _pyspark(tmp_path / "site")
    path = [str(tmp_path), str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip"),
            str(tmp_path / "site")]
    assert installed_first(path) == [path[0], path[2], path[3]]


def test_the_zip_of_another_spark_stays(tmp_path: Path) -> None:
    _pyspark(tmp_path / "site")
    other = _pyspark(tmp_path / "spark-home") / "pyspark.zip"  # a SPARK_HOME distribution
    path = [str(other), str(tmp_path / "site")]
    assert installed_first(path) == path


def test_no_installed_pyspark_keeps_the_zip(tmp_path: Path) -> None:
    lib = _pyspark(tmp_path / "site")
    path = [str(lib / "pyspark.zip"), str(tmp_path / "empty")]
    assert installed_first(path) == path
    assert installed_first([str(tmp_path)]) == [str(tmp_path)]


def test_preload_imports_the_task_modules_and_starts_no_thread() -> None:
    # in a fresh interpreter, as the daemon runs it: a thread started here would be
    # missing from every worker forked after it (and any lock it held, locked forever)
    import subprocess
    import sys

    code = ("import os, sys; from distcp.spark import daemon; got = daemon.preload(); "
            "print(got == daemon.PRELOAD, all(m in sys.modules for m in got), "
            "len(os.listdir(f'/proc/{os.getpid()}/task')), 'pyarrow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.stdout.split() == ["True", "True", "1", "False"], done.stderr
