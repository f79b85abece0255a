"""Converters: what a copy does to the bytes between source and destination (driver and executor).

A converter renames its destinations at planning, on the driver, and transforms the
bytes in the copy tasks (``base``). ``--convert`` names a chain of them; plugins
register in the ``pydistcp.converters`` entry-point group (``distcp.registry``).
"""
