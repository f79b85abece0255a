"""What a storage raises that the engine acts on, by meaning (driver and executor).

The engine catches these without knowing which backend raised them: a backend maps
its own error (S3's 412, an empty UploadPartCopy answer) onto one of them.
"""

from __future__ import annotations

#: How a TaskResult says its file went through the task after server-side copy failed.
NO_SERVER_SIDE = "server-side copy not used: "


class ServerSideCopyUnsupported(OSError):
    """The store accepted a server-side copy but did not copy (rclone serve s3 v1.75
    answers UploadPartCopy with an empty 200 and stores an empty part): the task
    copies the bytes itself instead."""


class VersionChanged(OSError):
    """A conditional read found the entry no longer the version it was asked for
    (S3: 412 to a GET If-Match of the listed ETag)."""
