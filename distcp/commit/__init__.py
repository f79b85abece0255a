"""Stage 3: publish staged files through the commit log, exactly once (driver and executor).

Commit steps, their write-ahead log, publishing, replay and recovery of
earlier runs, and status. The driver decides and logs each sequence; per-file steps
may be carried out by publishing tasks on the executors (``fanout``, ``--publishing``).
"""
