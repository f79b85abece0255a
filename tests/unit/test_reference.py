"""The README's command reference is the CLI's --help, word for word."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from distcp.cli import main
from distcp.reference import current_block, render, with_contents

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_reference_matches_the_cli() -> None:
    block = current_block(README.read_text(encoding="utf-8"))
    assert block, "README.md lacks the cli-reference markers"
    assert block == render(), ("README.md's command reference is stale: run "
                               "`python -m distcp.reference --write README.md`")


def test_reference_holds_each_commands_real_help() -> None:
    text = render()
    for command in ("copy", "status", "recover", "cleanup"):
        assert f"#### `pydistcp {command}`" in text
    result = CliRunner().invoke(main, ["copy", "--help"], terminal_width=100)
    assert result.exit_code == 0
    for line in result.output.splitlines():
        if line.strip().startswith("--"):
            assert line.strip().split()[0] in text


def test_readme_contents_list_every_section() -> None:
    text = README.read_text(encoding="utf-8")
    assert with_contents(text) == text, ("README.md's Contents are stale: run "
                                         "`python -m distcp.reference --write README.md`")
