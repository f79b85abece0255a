"""The command reference (docs/reference/cli.md) is the CLI's --help, word for word."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from distcp.cli import main
from distcp.reference import END, PAGE, START, current_block, render
from distcp.reference import main as write

ROOT = Path(__file__).resolve().parents[2]


def test_cli_reference_matches_the_cli() -> None:
    block = current_block((ROOT / PAGE).read_text(encoding="utf-8"))
    assert block, f"{PAGE} lacks the cli-reference markers"
    assert block == render(), (f"{PAGE} is stale: run "
                               f"`python -m distcp.reference --write {PAGE}`")


def test_reference_holds_each_commands_real_help() -> None:
    text = render()
    for command in ("copy", "move", "run", "check", "status", "recover", "cleanup"):
        assert f"## `pydistcp {command}`" in text
    result = CliRunner().invoke(main, ["copy", "--help"], terminal_width=100)
    assert result.exit_code == 0
    for line in result.output.splitlines():
        if line.strip().startswith("--"):
            assert line.strip().split()[0] in text


def test_write_replaces_the_block_and_keeps_the_page(tmp_path: Path) -> None:
    page = tmp_path / "cli.md"
    page.write_text(f"# intro\n\n{START}\nstale\n{END}\n\nafter\n", encoding="utf-8")
    assert write(["--write", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == f"# intro\n\n{render()}\n\nafter\n"


def test_the_readme_no_longer_holds_the_reference() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "cli-reference" not in readme and PAGE in readme
