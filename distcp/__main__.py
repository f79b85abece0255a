"""``python -m distcp`` is the ``pydistcp`` command."""

from distcp.entry import run

run()
