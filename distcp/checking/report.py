"""The outcome of a check (driver).

What ``pydistcp check`` prints and writes, and what ``distcp.check`` returns.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from distcp.checking.compare import VERDICTS, Outcome
from distcp.datasets.versions import TableLag

#: The per-verdict report files (``--missing-on-dst`` ...) and the verdict each lists.
REPORT_FILES = {"match": "=", "differ": "*", "missing_on_dst": "-", "missing_on_src": "+",
                "error": "!"}


@dataclass
class CheckReport:
    """Every path's verdict and the counts. ``ok``: the two sides are identical."""

    source: str = ""
    destination: str = ""
    one_way: bool = False
    outcomes: list[Outcome] = field(default_factory=list)
    files_read: int = 0
    bytes_read: int = 0
    #: Paths whose source side a digest of the state's manifest stood in for.
    stored_digests: int = 0
    duration_s: float = 0.0
    log_file: str = ""
    #: Why the digests were read in this process, not a Spark job ("": on Spark, or
    #: nothing was read).
    read_here: str = ""
    #: How far each destination table is behind its source: said, not a difference.
    tables: list[TableLag] = field(default_factory=list)

    def count(self, verdict: str) -> int:
        return sum(1 for o in self.outcomes if o.verdict == verdict)

    @property
    def counts(self) -> dict[str, int]:
        tally: Counter[str] = Counter(o.verdict for o in self.outcomes)
        return {name: tally[v] for name, v in REPORT_FILES.items()}

    @property
    def ok(self) -> bool:
        return all(o.verdict == "=" for o in self.outcomes)

    def lines(self, verdicts: str = "".join(VERDICTS)) -> list[str]:
        """rclone's combined report lines (``= path``...), of ``verdicts`` only."""
        return [f"{o.verdict} {o.path}" for o in self.outcomes if o.verdict in verdicts]

    def render(self) -> str:
        """The counts line, after a line per table saying how far it is behind."""
        c = self.counts
        extra = "" if self.one_way else f", {c['missing_on_src']} missing on source"
        lags = "".join(lag.line() + "\n" for lag in self.tables)
        return (f"{lags}{c['match']} matching, {c['differ']} differing, "
                f"{c['missing_on_dst']} missing on destination{extra}, {c['error']} errors "
                f"({self.files_read} files read, {self.stored_digests} stored digests used, "
                f"{self.duration_s:.1f}s)")

    def to_json(self) -> str:
        data: dict[str, Any] = {k: v for k, v in asdict(self).items() if k != "outcomes"}
        data["ok"] = self.ok
        data["counts"] = self.counts
        data["differences"] = [asdict(o) for o in self.outcomes if o.verdict != "="]
        return json.dumps(data, indent=2)

    def write(self, targets: dict[str, str | None]) -> None:
        """Write the report files asked for: ``combined`` (every path with its symbol)
        and one file per verdict (``REPORT_FILES``), one path a line, as rclone does."""
        for name, path in targets.items():
            if not path:
                continue
            if name == "combined":
                text = self.lines()
            else:
                text = [o.path for o in self.outcomes if o.verdict == REPORT_FILES[name]]
            with open(path, "w", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in text))
