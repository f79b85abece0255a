"""``python -m distcp`` is the ``pydistcp`` command (driver)."""

from distcp.entry import run

run()
