"""BOTH: the destination's state directory: what belongs to it, and what may not enter it."""
