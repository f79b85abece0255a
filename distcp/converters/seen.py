"""Names an expansion has seen, in bounded memory: a dict, spilled to SQLite (executor).

Refusing a duplicate archive member means remembering every member's name, and an
archive may hold a million (a set of them took ~100 MiB). ``NameTable`` keeps the
first IN_MEMORY names in a dict, which is all most archives need, then moves them to
a private temporary SQLite database (``sqlite3.connect("")``: a file SQLite deletes
itself, even when the process is killed) whose page cache is capped at CACHE_KIB.
"""

from __future__ import annotations

import sqlite3

#: Names held in a dict before the table moves to SQLite.
IN_MEMORY = 20_000
#: SQLite's page cache for a spilled table, in KiB.
CACHE_KIB = 8 << 10


class NameTable:
    """name -> small int (what the caller records about the name), spilled past IN_MEMORY."""

    def __init__(self, in_memory: int = IN_MEMORY) -> None:
        self.in_memory = in_memory
        self._dict: dict[str, int] | None = {}
        self._db: sqlite3.Connection | None = None

    def get(self, name: str) -> int | None:
        if self._dict is not None:
            return self._dict.get(name)
        assert self._db is not None
        row = self._db.execute("SELECT v FROM names WHERE k = ?", (name,)).fetchone()
        return None if row is None else int(row[0])

    def __contains__(self, name: str) -> bool:
        return self.get(name) is not None

    def put(self, name: str, value: int) -> None:
        if self._dict is not None:
            self._dict[name] = value
            if len(self._dict) > self.in_memory:
                self._spill(self._dict)
            return
        assert self._db is not None
        self._db.execute("INSERT OR REPLACE INTO names VALUES (?, ?)", (name, value))

    @property
    def spilled(self) -> bool:
        return self._db is not None

    def _spill(self, names: dict[str, int]) -> None:
        db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        db.execute("PRAGMA journal_mode = OFF")
        db.execute("PRAGMA synchronous = OFF")
        db.execute("PRAGMA temp_store = FILE")
        db.execute("CREATE TABLE names (k TEXT PRIMARY KEY, v INTEGER) WITHOUT ROWID")
        db.execute("BEGIN")  # never committed: the table lives as long as the expansion
        db.executemany("INSERT INTO names VALUES (?, ?)", names.items())
        self._db, self._dict = db, None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        self._dict = {}
