"""DRIVER, stage 1: find datasets, list, decide what to copy, pack it into work units.

Reads only; everything decided here is a value (distcp.model) sent to executors.
"""
