"""The storage seam (see ``base``): capabilities, backends, staged files.

``storage_for(url, options)`` gives the backend serving a URL; ``spec_for``
resolves it once into a picklable ``StorageSpec`` that executors ``open()``.
"""

from distcp.storage.base import Capabilities, Storage
from distcp.storage.spec import (
    StorageSpec,
    backend_name,
    capabilities_of,
    spec_for,
    storage_for,
)
from distcp.storage.staged import Staged, StagedKind, parse_staged
from distcp.storage.staging import RangeAt, StagedFile, StagedStream, StageWriter

__all__ = ["Capabilities", "RangeAt", "StageWriter", "Staged", "StagedFile", "StagedKind",
           "StagedStream", "Storage", "StorageSpec", "backend_name", "capabilities_of",
           "parse_staged", "spec_for", "storage_for"]
