"""Datasets: the tables, topics and directory trees a run copies (driver and executor).

A dataset lists its files and maps them to destinations (``base``); the finders
(``distcp.finders``) say which datasets a run has. Listing is the driver's, unless a
tree is planned on Spark, where planning tasks carry a ``recursive`` dataset.
Plugins register in the ``pydistcp.datasets`` entry-point group.
"""
