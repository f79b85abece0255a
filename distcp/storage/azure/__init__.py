"""The Azure Blob Storage backend: blocks staged, block lists committed (driver and executor).

``az://`` and ``abfs://`` URLs; blocks are staged on the final blob and the block list
is committed at publish.

``storage`` is the backend (``AzureStorage``); ``blobs`` the SDK clients, names and
requests; ``blocks`` staging and publishing; ``probe`` the preflight's words.
adlfs (fsspec) serves what the seam asks of every filesystem (listings, reads).
"""
