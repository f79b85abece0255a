"""Writes docs/job.schema.json from the copy command's options (driver).

``python -m distcp.jobschema --write docs/job.schema.json`` after a flag of ``copy``
changes (tests/unit/test_job_schema.py fails until then); without ``--write`` the schema
is printed. It sits beside the command, not in ``jobs/``: the keys are read from the
command's options (``distcp.cli.job_keys``), and the command loads job files, so a
writer inside ``jobs/`` made ``cli`` and ``jobs`` import each other.
"""

from __future__ import annotations

import sys

from distcp.cli import job_keys
from distcp.jobs.schema import render


def main(argv: list[str]) -> int:
    text = render(job_keys())
    if len(argv) == 2 and argv[0] == "--write":
        with open(argv[1], "w", encoding="utf-8") as f:
            f.write(text)
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
