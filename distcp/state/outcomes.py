"""Each dataset's last run as the run saw it at its end: ok, or failed and why (driver).

The run history in a dataset's state document (``distcp.state.store``) is written by
commit steps, one line per file set published, so it cannot tell of a file that failed
before anything was published: a run whose archive failed whole wrote an "ok" line for
the set holding the dataset's folders and nothing for the archive, and a run that
published nothing wrote no line at all. So the run writes one more document per
dataset it was asked to copy when it ends (``outcomes/<key>.json``, replaced whole):
whether anything of that dataset failed, and the first failure's line. ``pydistcp
status`` reports the newer of it and the history's last line. A failed outcome is
always written; an ok one only replaces an outcome kept already (clearing the
failure): a run that copies nothing and fails nothing still leaves no trace in the
destination, and the history says how it went.

It is a report, not a commit: nothing acts on it, and a run that dies before its end
leaves the one before.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from distcp.names import printable
from distcp.state.layout import StateLayout
from distcp.state.store import read_json, urn_key
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.atomic import write_atomic
from distcp.storage.spec import written_url

OK = "ok"
FAILED = "failed"
#: How much of the first failure's line an outcome keeps: enough to say what failed
#: and why on one line of ``status``; the run's own output and log have it whole.
CAUSE_MAX = 240


@dataclass(frozen=True)
class RunOutcome:
    """How one run ended for one dataset."""

    urn: str
    job_id: str
    status: str
    #: The first failure's line, shortened (``cause_of``); empty when ok.
    cause: str = ""
    ended: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status == FAILED

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, urn: str) -> RunOutcome | None:
        """The outcome a document holds, or None when it is not one of ``urn``'s."""
        if not isinstance(data, dict) or data.get("urn") != urn:
            return None
        status = FAILED if data.get("status") == FAILED else OK
        return cls(urn, str(data.get("job_id", "")), status,
                   cause_of(str(data.get("cause", ""))), float(data.get("ended") or 0.0))


def cause_of(error: str) -> str:
    """The first line of ``error``, printable and at most CAUSE_MAX characters: a
    longer one keeps its start (what failed) and its end (why, what to do), the middle
    (a long path, most often) cut."""
    line = printable((error.strip().splitlines() or [""])[0])
    if len(line) <= CAUSE_MAX:
        return line
    head = CAUSE_MAX // 2
    return f"{line[:head - 1]}…{line[-(CAUSE_MAX - head):]}"


def outcome_of(urn: str, job_id: str, first_failure: str | None) -> RunOutcome:
    """The outcome of a run that ended now: failed with its first failure, else ok."""
    if first_failure is None:
        return RunOutcome(urn, job_id, OK, ended=time.time())
    return RunOutcome(urn, job_id, FAILED, cause_of(first_failure), time.time())


class OutcomeStore:
    """The ``outcomes/`` part of a state root."""

    def __init__(self, root: str, options: dict[str, Any]) -> None:
        self.root = root
        self.options = options

    def url_of(self, urn: str) -> str:
        return StateLayout(self.root).outcome(urn_key(urn))

    def save(self, outcome: RunOutcome) -> None:
        folder = StateLayout(self.root).outcomes
        storage_for(folder, self.options).prepare_folder(folder)
        write_atomic(self.url_of(outcome.urn),
                     json.dumps(outcome.to_dict(), sort_keys=True).encode(), self.options)

    def load(self, urn: str) -> RunOutcome | None:
        """The dataset's last outcome; None if no run ended with one (or it is not
        the dataset's: a document is never taken for another dataset's)."""
        return RunOutcome.from_dict(read_json(self.url_of(urn), self.options, "run outcome"),
                                    urn)

    def names(self) -> set[str]:
        """The documents' names (one listing, whatever the number of datasets)."""
        folder = written_url(StateLayout(self.root).outcomes, self.options)
        try:
            return set(storage_for(folder, self.options).names(folder))
        except FileNotFoundError:
            return set()

    def kept_for(self, urn: str, names: set[str]) -> bool:
        """Whether ``names`` (``names()``) hold an outcome of ``urn``."""
        return f"{urn_key(urn)}.json" in names

    def urns(self) -> list[str]:
        """The datasets an outcome is kept for."""
        folder = written_url(StateLayout(self.root).outcomes, self.options)
        out = []
        for name in sorted(self.names()):
            if name.endswith(".json"):
                data = read_json(fsutil.join(folder, name), self.options, "run outcome")
                if isinstance(data, dict) and isinstance(data.get("urn"), str) \
                        and name == f"{urn_key(data['urn'])}.json":
                    out.append(data["urn"])
        return out
