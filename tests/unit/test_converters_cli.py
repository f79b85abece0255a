"""The converter flags reach ConverterOptions (in-process CLI, dry runs: no Spark)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from distcp.cli import _options, main
from distcp.configuration import CopyConfiguration
from distcp.options import configuration_options


def _dry(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["copy", *args, "--dry-run"], env=env)
    return result.exit_code, result.output


def test_flags_build_the_converter_options(tmp_path: Path) -> None:
    (tmp_path / "pass").write_text("s3cret phrase\n")
    ctx = main.commands["copy"].make_context("copy", [
        str(tmp_path), str(tmp_path / "dst"), "--convert", "decrypt,gunzip", "--convert",
        "untar", "--gpg-home", str(tmp_path), "--gpg-passphrase-file", str(tmp_path / "pass"),
        "--gpg-recipient", "a@x", "--gpg-recipient", "b@x", "--gpg-require-signature",
        "--max-expansion-ratio", "7", "--max-expanded-bytes", "2M", "--expand-into-parent"])
    # the CLI's chain: flags -> distcp.copy's parameters -> the configuration's options
    cfg = CopyConfiguration.build([str(tmp_path)], "/dst",
                                  **configuration_options(_options(ctx.params)))
    o = cfg.converter_options
    assert cfg.converters == ("decrypt", "gunzip", "untar")
    assert (o.gpg_home, o.gpg_passphrase, o.gpg_recipients) == (str(tmp_path), "s3cret phrase",
                                                                ("a@x", "b@x"))
    assert (o.gpg_require_signature, o.max_expansion_ratio, o.max_expanded_bytes,
            o.expand_into_parent) == (True, 7.0, 2 << 20, True)
    assert "s3cret" not in repr(cfg)


def test_passphrase_from_the_environment(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PYDISTCP_GPG_PASSPHRASE", "from env")
    cfg = CopyConfiguration.build([str(tmp_path)], "/dst", converters=["decrypt"])
    assert cfg.converter_options.gpg_passphrase == "from env"


def test_dry_run_shows_expansion_directories(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "logs.tar.gz").write_bytes(b"")
    code, out = _dry(str(tmp_path / "src"), str(tmp_path / "dst"), "--convert", "untar")
    assert code == 0, out
    assert f"copy   {tmp_path / 'dst' / 'logs'}/  (new)" in out
    code, out = _dry(str(tmp_path / "src"), str(tmp_path / "dst"), "--convert", "untar",
                     "--expand-into-parent")
    assert f"copy   {tmp_path / 'dst'}/  (new)" in out


def test_bad_converter_flags_exit_2_with_one_line(tmp_path: Path) -> None:
    for args, text in [(["--convert", "zstd"], "unknown converters plugin 'zstd'"),
                       (["--convert", "encrypt"], "needs at least one --gpg-recipient"),
                       (["--convert", "untar", "--max-expanded-bytes", "0"],
                        "--max-expanded-bytes must be positive")]:
        code, out = _dry(str(tmp_path), str(tmp_path / "dst"), *args)
        assert code == 2 and text in out, out
