"""Any other fsspec filesystem (FTP, SFTP, memory, ...) as a backend (driver and executor).

``storage`` is the backend (``FsspecStorage``); ``ftp`` the FTP filesystem that
translates names and lists with MLSD.
"""
