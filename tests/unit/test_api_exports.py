"""The public names of ``distcp``: exported, typed, and importable without Spark."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import distcp
from distcp import errors


def test_every_error_class_and_the_result_types_are_exported() -> None:
    classes = {n for n, v in vars(errors).items()
               if isinstance(v, type) and issubclass(v, errors.DistcpError)}
    assert classes <= set(distcp.__all__), classes - set(distcp.__all__)
    assert {"Summary", "Failure", "copy"} <= set(distcp.__all__)
    assert all(hasattr(distcp, name) for name in distcp.__all__)


def test_the_package_ships_its_py_typed_marker() -> None:
    assert (Path(distcp.__file__).parent / "py.typed").is_file()


def test_importing_distcp_imports_neither_spark_nor_a_plugin() -> None:
    code = ("import distcp, sys; "
            "bad = [m for m in sys.modules if m.startswith(('pyspark', 'gnupg', 's3fs'))]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ), timeout=60)


def test_cli_names_map_to_configuration_fields_and_old_names_warn() -> None:
    import warnings

    from distcp import _configuration_names

    assert _configuration_names({"convert": ["gunzip"], "conf": {"a": "b"},
                                 "gpg_recipient": ["x"], "progress": False}) == {
        "converters": ["gunzip"], "spark_conf": {"a": "b"}, "gpg_recipients": ["x"],
        "progress": False}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _configuration_names({"converters": ["gunzip"]}) == {"converters": ["gunzip"]}
    assert [w.category for w in caught] == [DeprecationWarning]
    assert "use convert=" in str(caught[0].message)
    try:
        _configuration_names({"convert": ["a"], "converters": ["b"]})
    except errors.ConfigurationError as e:
        assert "convert= or converters=" in str(e)
    else:
        raise AssertionError("both spellings were accepted")


def test_status_and_recover_functions_on_a_destination_without_state(tmp_path: Path) -> None:
    report = distcp.status(str(tmp_path))
    assert report["state_dir"] == str(tmp_path / ".pydistcp")
    assert report["pending"] == [] and report["running"] is None
    summary = distcp.recover(str(tmp_path))
    assert isinstance(summary, distcp.Summary) and summary.ok
    assert summary.sequences_replayed == 0 and summary.sequences_set_aside == 0
