"""DRIVER, stage 3: publish staged files through the commit log, exactly once.

Commit steps, their write-ahead log, publishing, replay and recovery of
earlier runs, dataset state, status and the destination lock.
"""
