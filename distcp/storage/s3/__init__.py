"""The S3 backend: multipart uploads as staging, the lean GET/PUT path (driver and executor).

``storage`` is the backend (``ObjectStorage``); ``ops`` the bounded requests and
multipart uploads, ``uploads`` staging and publishing, ``lean`` and ``wire`` the
hand-written fast path, ``listing`` the key listing of a prefix.
"""
