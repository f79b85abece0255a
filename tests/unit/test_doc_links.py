"""Every relative link in the documentation names a file that exists, and every
``#anchor`` a heading of the page it points to.

The README is an index of guides, the guides link to each other and to the benchmark
results; a page moved or a heading renamed must not leave a reader at a dead end.
Anchors are GitHub's: the heading lowercased, punctuation dropped, spaces made hyphens,
a repeated heading numbered ``-1``, ``-2``...
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted({ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "benchmarks" / "RESULTS.md",
                ROOT / "benchmarks" / "README.md", *(ROOT / "docs").rglob("*.md")})

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`]*`")


def _prose(text: str) -> list[str]:
    """The page's lines outside fenced code blocks, with inline code removed."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(CODE_SPAN.sub("", line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> frozenset[str]:
    """The anchors of a page's headings, inline code included (``## `pydistcp copy` ``)."""
    found, fenced, seen = [], False, {}
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = None if fenced else re.match(r"^#{1,6} (.+?)\s*$", line)
        if match:
            base = slug(match.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.append(base if n == 0 else f"{base}-{n}")
    return frozenset(found)


def _links(page: Path) -> list[str]:
    return [m.group(1) for line in _prose(page.read_text(encoding="utf-8"))
            for m in LINK.finditer(line)]


def broken(page: Path, root: Path = ROOT) -> list[str]:
    """Each relative link of ``page`` that leaves ``root``, names no file, or names no
    heading of the page it points to."""
    problems = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(root)}: ({target})"
        if root not in dest.parents:
            problems.append(f"{where} leaves the repository")
        elif not dest.exists():
            problems.append(f"{where} names no file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where} names no heading of {dest.relative_to(root)}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert not broken(page)


def test_the_checker_sees_a_broken_link_and_a_broken_anchor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## `pydistcp copy`\n\n## Where it stands\n")
    page.write_text("# Page\n\n[ok](other.md#pydistcp-copy) [ok](other.md#where-it-stands)\n"
                    "[ok](#page) `[not a link](gone.md)`\n\n```\n[in code](gone.md)\n```\n"
                    "[gone](gone.md) [bad anchor](other.md#nowhere) [web](https://example.com)\n")
    assert broken(page, tmp_path) == [
        "page.md: (gone.md) names no file",
        "page.md: (other.md#nowhere) names no heading of other.md"]


def test_slugs_are_githubs() -> None:
    assert slug("Errors and exit status") == "errors-and-exit-status"
    assert slug("After a crash: `status`, `recover`, `cleanup`") == \
        "after-a-crash-status-recover-cleanup"
    assert slug("Archive members: one task's memory") == "archive-members-one-tasks-memory"
    assert slug("Raw: copy-B-2026-11-27-beside") == "raw-copy-b-2026-11-27-beside"
