"""The local-disk backend: ``os`` calls, kernel copies, holes kept (driver and executor).

``storage`` is the backend (``LocalStorage``), ``copyfile`` the kernel's copy of a
regular file, ``holes`` the data segments of a sparse file.
"""
