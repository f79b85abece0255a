"""The installed pydistcp code, as the processes that outlive a run compare it (driver).

The warm engine keys itself by it (its reused Python workers would keep running old
code) and the resident client refuses runs once it changed (its forks would).
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def code_hash() -> str:
    """Names, sizes and mtimes of the installed distcp sources: an edited checkout or an
    upgrade changes it (about 250 ``stat`` calls: asked once a run, or once a fork)."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        st = path.stat()
        h.update(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()
