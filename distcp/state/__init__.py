"""The destination's state directory: what belongs in it, what may not (driver and executor)."""
