"""Importing a module the run needs later while the run waits on something else.

A warm run spends most of its wall time waiting on Spark (the job's tasks run in the
engine's workers) while the interpreter, idle, holds nothing. Publishing then imports
the OpenLineage client for the file sets' events, ~0.16 s here: done in that wait,
it costs no wall time. Only modules that nothing else imports meanwhile are taken
this way (a package imported from two threads at once can meet itself half-made).
"""

from __future__ import annotations

import importlib
import threading


def in_background(name: str) -> None:
    """Start importing ``name`` in a daemon thread; a failure is left for the real
    import to raise where the module is used."""

    def load() -> None:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S110 - the caller's own import reports it
            pass

    threading.Thread(target=load, name=f"pydistcp-import-{name}", daemon=True).start()
