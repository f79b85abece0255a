"""``python -m distcp`` is the ``pydistcp`` command."""

from distcp.cli import main

main(prog_name="pydistcp")
