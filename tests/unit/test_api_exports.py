"""The public names of ``distcp``: exported, typed, and importable without Spark."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import distcp
from distcp import errors


def test_every_error_class_and_the_result_types_are_exported() -> None:
    classes = {n for n, v in vars(errors).items()
               if isinstance(v, type) and issubclass(v, errors.DistcpError)}
    assert classes <= set(distcp.__all__), classes - set(distcp.__all__)
    assert {"Summary", "Failure", "CleanupReport", "StatusReport", "copy", "status", "recover",
            "cleanup"} <= set(distcp.__all__)
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

    from distcp.options import configuration_options

    opts = configuration_options({"convert": ["gunzip"], "conf": {"a": "b"},
                                  "gpg_recipient": ["x"], "progress": False})
    assert (opts["converters"], opts["spark_conf"], opts["gpg_recipients"]) == (
        ("gunzip",), {"a": "b"}, ("x",))
    assert opts["progress"] is False and not {"convert", "conf", "gpg_recipient"} & set(opts)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert configuration_options({"converters": ["gunzip"]})["converters"] == ("gunzip",)
    assert [w.category for w in caught] == [DeprecationWarning]
    assert "use convert=" in str(caught[0].message)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            configuration_options({"convert": ["a"], "converters": ["b"]})
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


def test_cleanup_of_a_destination_without_state_frees_nothing(tmp_path: Path) -> None:
    report = distcp.cleanup(str(tmp_path), older_than="0s")
    assert report == distcp.CleanupReport(destination=str(tmp_path),
                                          state_dir=str(tmp_path / ".pydistcp"))
    assert report.render() == (f"freed 0 B under {tmp_path}: staging of 0 dead run(s), 0 split "
                               "file(s), 0 kept cop(ies), 0 orphaned multipart upload(s)")


def test_cleanup_frees_a_dead_run_and_keeps_a_recent_one(tmp_path: Path) -> None:
    staging = tmp_path / ".pydistcp" / "staging"
    (staging / "20200101T000000-abcdef").mkdir(parents=True)  # job ids start with their time
    (staging / "20200101T000000-abcdef" / "part").write_bytes(b"x" * 1000)
    (staging / "29990101T000000-fedcba").mkdir()  # "started" in the future: younger than 1h
    (staging / "29990101T000000-fedcba" / "part").write_bytes(b"y" * 10)
    preview = distcp.cleanup(str(tmp_path), older_than=3600, dry_run=True)
    assert (preview.jobs, preview.bytes, preview.dry_run) == (1, 1000, True)
    assert preview.render().startswith(f"would free 1000 B under {tmp_path}: staging of 1 dead")
    assert len(list(staging.iterdir())) == 2  # nothing removed
    report = distcp.cleanup(str(tmp_path), older_than=3600)
    assert (report.jobs, report.bytes, report.dry_run) == (1, 1000, False)
    assert [p.name for p in staging.iterdir()] == ["29990101T000000-fedcba"]
    assert not (tmp_path / ".pydistcp" / "lock").exists()
    with pytest.raises(errors.ConfigurationError, match=r"^older_than: not a duration: 'soon'"):
        distcp.cleanup(str(tmp_path), older_than="soon")


def test_cleanup_command_prints_the_report_of_distcp_cleanup(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from distcp.cli import main

    job = tmp_path / ".pydistcp" / "progress" / "20200101T000000-abcdef"
    job.mkdir(parents=True)
    (job / "journal").write_bytes(b"z" * 300)
    r = CliRunner().invoke(main, ["cleanup", str(tmp_path), "--older-than", "1h", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert r.output == (f"would free 300 B under {tmp_path}: staging of 0 dead run(s), 0 split "
                        "file(s), 0 kept cop(ies), 0 orphaned multipart upload(s)\n")
    assert job.is_dir()
    r = CliRunner().invoke(main, ["cleanup", str(tmp_path), "--older-than", "1h"])
    assert r.exit_code == 0 and r.output.startswith("freed 300 B under "), r.output
    assert not job.exists()
