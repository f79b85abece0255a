"""Every PYDISTCP_* variable the code reads is in the README's table."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_environment_variable_is_documented() -> None:
    code = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "distcp").rglob("*.py"))
    names = set(re.findall(r"\b((?:PY)?DISTCP_[A-Z][A-Z0-9_]*)\b", code))
    names |= {f"PYDISTCP_{n}" for n in ("MASTER", "PARALLELISM", "BUFFER_SIZE", "VERIFY",
                                         "PRESERVE")}  # read as f"PYDISTCP_{name.upper()}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("## Environment variables"):]
    end = table.find("\n## ", 1)  # the next section, or the end of the README
    table = table if end < 0 else table[:end]
    missing = sorted(n for n in names if f"`{n}`" not in table)
    assert not missing, f"undocumented in README's Environment variables: {missing}"
