"""Choosing a storage once per URL, and carrying the choice to executors (driver and executor).

``spec_for(url, options)`` resolves the filesystem of a URL once, on the driver,
into a ``StorageSpec``: a frozen, picklable value (URL root, options, backend
name) that travels inside TaskSpec. ``spec.open()`` (or ``storage_for``) gives
the backend, built once per process and cached. Backends are named here as
"module:Class" strings and imported on first use, so nothing is registered
anywhere (least of all in fsspec) at import time.
"""

from __future__ import annotations

import copy
import importlib
import json
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from distcp.storage import filesystems as fsutil
from distcp.storage.base import Capabilities, Storage

#: Backend name -> "module:Class", imported lazily; one folder each under storage/.
BACKENDS: dict[str, str] = {
    "fsspec": "distcp.storage.fsspec.storage:FsspecStorage",
    "local": "distcp.storage.local.storage:LocalStorage",
    "object": "distcp.storage.s3.storage:ObjectStorage",
    "azure": "distcp.storage.azure.storage:AzureStorage",
    "gcs": "distcp.storage.gcs.storage:GcsStorage",
}
#: fsspec protocol -> the backend serving it; any other protocol is "fsspec"'s (and a
#: local filesystem is "local" whatever its protocol). A new store is a folder under
#: storage/ and a line here: the engine asks the backend, never the protocol.
PROTOCOLS: dict[str, str] = {"s3": "object", "s3a": "object", "az": "azure", "abfs": "azure",
                             "abfss": "azure", "gs": "gcs", "gcs": "gcs"}

#: The fsspec filesystems that read credentials from the environment and cache their
#: instances by options alone, as (module, class): a backend's line beside its protocols.
ENVIRONMENT_CLIENTS: tuple[tuple[str, str], ...] = (("s3fs", "S3FileSystem"),
                                                    ("adlfs", "AzureBlobFileSystem"),
                                                    ("gcsfs", "GCSFileSystem"))

_cache: dict[tuple[str, str], Storage] = {}
_names: dict[tuple[str, str], str] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class StorageSpec:
    """Which storage serves the URLs under ``root``; secrets stay out of repr."""

    root: str = ""
    backend: str = "local"
    options: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def capabilities(self) -> Capabilities:
        return backend_class(self.backend).capabilities

    def serves(self, url: str) -> bool:
        """Whether ``url`` is on a storage of this spec's backend (server-side copies)."""
        return backend_name(url, self.options) == self.backend

    def open(self) -> Storage:
        """This process's instance of the backend (built on first use)."""
        return _instance(self.backend, self.options)


_classes: dict[str, type[Storage]] = {}


def backend_class(name: str) -> type[Storage]:
    """The class registered under ``name``; imported on first use (then remembered:
    tasks ask for capabilities several times a file)."""
    known = _classes.get(name)
    if known is not None:
        return known
    try:
        module, _, attr = BACKENDS[name].partition(":")
    except KeyError:
        raise LookupError(f"unknown storage backend {name!r}; known: "
                          f"{', '.join(sorted(BACKENDS))}") from None
    cls: type[Storage] = getattr(importlib.import_module(module), attr)
    _classes[name] = cls
    return cls


def backend_name(url: str, options: dict[str, Any] | None = None) -> str:
    """The backend for ``url``: local disk, an object store, or any other fsspec fs.

    Plain paths and ``file://`` URLs are local, and a scheme of ``PROTOCOLS`` is its
    backend's, without building a filesystem (adlfs refuses to build one without an
    account: the preflight's probe must be the one to say so); for others one
    filesystem is built per scheme and options, once per process (an FTP filesystem
    connects when built).
    """
    if fsutil.local_path(url) is not None:
        return "local"
    known = PROTOCOLS.get(url.split("://", 1)[0])
    if known is not None:  # no filesystem built: a store's needs credentials to be built
        return known
    key = (url.split("://", 1)[0], _options_key(options or {}))
    name = _names.get(key)
    if name is None:
        fs, _ = fsutil.filesystem(url, options or {})
        name = _names[key] = backend_of(fs)
    return name


def backend_of(fs: Any) -> str:
    """The backend serving an fsspec filesystem already built."""
    if fsutil.is_local(fs):
        return "local"
    protocol = getattr(fs, "protocol", ())
    for name in protocol if isinstance(protocol, (tuple, list)) else (protocol,):
        if name in PROTOCOLS:
            return PROTOCOLS[name]
    return "fsspec"


def capabilities_of(fs: Any) -> Capabilities:
    """What an fsspec filesystem already built can do (its backend's capabilities)."""
    return backend_class(backend_of(fs)).capabilities


def _options_key(options: dict[str, Any]) -> str:
    """The options as a cache key. Tasks ask a few times per file with the same dict
    (``TaskSpec.src_options``), so the last keys are remembered with a copy of what they
    were made from: a dict changed since is serialised again (8 µs a call otherwise)."""
    if not options:
        return "{}"
    known = _keys.get(id(options))
    if known is not None and known[0] is options and known[1] == options:
        return known[2]
    key = json.dumps(options, sort_keys=True, default=repr)
    try:
        snapshot = copy.deepcopy(options)
    except Exception:  # noqa: BLE001 - an option that cannot be copied: not remembered
        return key
    if len(_keys) >= 64:
        _keys.clear()
    _keys[id(options)] = (options, snapshot, key)
    return key


_keys: dict[int, tuple[dict[str, Any], dict[str, Any], str]] = {}


def spec_for(url: str, options: dict[str, Any] | None = None) -> StorageSpec:
    """Resolve ``url``'s storage once; the spec then travels instead of the question."""
    return StorageSpec(url, backend_name(url, options), dict(options or {}))


def storage_for(url: str, options: dict[str, Any] | None = None) -> Storage:
    """The storage serving ``url`` (cached per process by backend and options)."""
    return _instance(backend_name(url, options), options or {})


def _instance(backend: str, options: dict[str, Any]) -> Storage:
    # Local disks take no options: one instance, found without serialising any
    # (per-file hot paths ask for it several times a file).
    key = (backend, "" if backend == "local" else _options_key(options))
    storage = _cache.get(key)
    if storage is None:
        with _lock:
            storage = _cache.get(key)
            if storage is None:
                storage = _cache[key] = backend_class(backend)(options)
    return storage


def forget_environment_clients() -> None:
    """Drop the store clients this process cached (fsspec keys its cache by options,
    not by the environment they were read from). Where a client's module was never
    imported there are none, and importing one only to say so cost a fresh worker 0.29 s
    before its first local copy (a warm engine's workers have no AWS variables of their
    own, so any the client has differs from theirs)."""
    for module, name in ENVIRONMENT_CLIENTS:
        cached = getattr(sys.modules.get(module), name, None)
        if cached is not None:
            cached.clear_instance_cache()
    reach = sys.modules.get("distcp.storage.s3.reach")  # S3 read without a client
    if reach is not None:
        reach.forget()


def written_url(url: str, options: Mapping[str, Any] | None = None) -> str:
    """``url`` as the state's records write it (the filesystem's own spelling of the
    path, no trailing slash): what destinations and roots are compared as. A store's
    own filesystem spells it (S3's stand-in needs no s3fs imported: ``reach.LazyS3``)."""
    if fsutil.local_path(url) is None and url.split("://", 1)[0] in PROTOCOLS:
        fs, path = storage_for(url, dict(options or {})).fs(url)
    else:
        fs, path = fsutil.filesystem(url, options)
    return fsutil.to_url(fs, path.rstrip("/") or "/")
