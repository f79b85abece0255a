"""The storage seam (see ``base``): capabilities, backends, staged files (driver and executor).

``storage_for(url, options)`` gives the backend serving a URL; ``spec_for``
resolves it once into a picklable ``StorageSpec`` that executors ``open()``.
"""

from distcp.storage.base import Capabilities, Storage
from distcp.storage.errors import NO_SERVER_SIDE, ServerSideCopyUnsupported, VersionChanged
from distcp.storage.spec import (
    StorageSpec,
    backend_name,
    capabilities_of,
    spec_for,
    storage_for,
)
from distcp.storage.staged import Staged, StagedKind, parse_staged
from distcp.storage.staging import RangeAt, StagedFile, StagedStream, StageWriter
from distcp.storage.watchdog import bounded_by, watchdog_seconds

__all__ = ["NO_SERVER_SIDE", "Capabilities", "RangeAt", "ServerSideCopyUnsupported",
           "StageWriter", "Staged", "StagedFile", "StagedKind", "StagedStream", "Storage",
           "StorageSpec", "VersionChanged", "backend_name", "bounded_by", "capabilities_of",
           "parse_staged", "spec_for", "storage_for", "watchdog_seconds"]
