"""The Azure Blob Storage backend (``az://``, ``abfs://``): blocks staged on the final
blob, the block list committed at publish (driver and executor).

``storage`` is the backend (``AzureStorage``); ``blobs`` the SDK clients, names and
requests; ``blocks`` staging and publishing; ``probe`` the preflight's words.
adlfs (fsspec) serves what the seam asks of every filesystem (listings, reads).
"""
