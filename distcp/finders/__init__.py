"""Dataset finders: which datasets one run copies (driver).

A finder turns the run's sources and flags into datasets (``base``): one root
(``single``), every directory a glob matches (``glob``), or one stream dataset per
topic (``stream``). Plugins register in the ``pydistcp.finders`` entry-point group.
"""
