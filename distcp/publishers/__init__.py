"""Publishers: how a file set's staged outputs are published (driver).

A publisher turns one file set's task results into a commit sequence (``base``),
which the commit log then carries out: renames and completed uploads (``rename``,
the default), optionally followed by a catalog registration (a commit step of
``distcp.commit.catalog_steps``). Plugins
register in the ``pydistcp.publishers`` entry-point group.
"""
