"""The Google Cloud Storage backend: objects staged, rewritten into place (driver and executor).

``gs://`` and ``gcs://`` URLs. ``storage`` is the backend (``GcsStorage``); ``objects``
the SDK's client, names and requests; ``probe`` the preflight's words. gcsfs (fsspec)
serves what the seam asks of every filesystem (listings, reads, staging streams).
"""
