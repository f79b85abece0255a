"""Google's SDK behind the backend: the client, object names, requests (driver and executor).

gcsfs answers a folder's entries and streamed reads; a tree's listing, state
documents, exclusive creates, rewrites and metadata go through
``google-cloud-storage``, built from the same options gcsfs takes (``token``,
``project``, ``endpoint_url``) or else Google's standard environment:
``STORAGE_EMULATOR_HOST`` (an emulator, no credentials) and Application Default
Credentials (``GOOGLE_APPLICATION_CREDENTIALS``, gcloud's login). Tests set
``NO_GCE_CHECK`` and point ``GCE_METADATA_HOST``/``GCE_METADATA_IP`` at loopback: with
no credentials, Google's auth library otherwise asks a metadata server and waits.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from google.api_core import exceptions as gexc
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage as gcs

from distcp.storage.keptmtimes import GCS_MODE_KEY, GCS_MTIME_KEY
from distcp.storage.writes import WriteOptions

#: Seconds to connect and to wait for an answer: a silent server must not hang a run.
TIMEOUT = (20, 120)
#: The metadata keys gsutil and ``gcloud storage`` keep a file's POSIX mtime and mode
#: under (``-P``): their tools read back what we write (``distcp.storage.keptmtimes``).
MTIME_KEY = GCS_MTIME_KEY
MODE_KEY = GCS_MODE_KEY

_clients: dict[str, gcs.Client] = {}
_lock = threading.Lock()


def _after_fork() -> None:
    """A forked child builds its own clients: the parent's hold sessions whose pooled
    connections both processes would send requests on, and a lock a parent's thread
    may have held at the fork."""
    global _lock
    _lock = threading.Lock()
    _clients.clear()


os.register_at_fork(after_in_child=_after_fork)


def client(options: dict[str, Any]) -> gcs.Client:
    """The SDK client of these storage options, built once per process and options."""
    key = json.dumps([options, os.environ.get("STORAGE_EMULATOR_HOST"),
                      os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")],
                     sort_keys=True, default=repr)
    known = _clients.get(key)
    if known is None:
        with _lock:
            known = _clients[key] = build(options)
    return known


def build(options: dict[str, Any]) -> gcs.Client:
    """A new client: gcsfs's ``token`` (``anon``, a key file's path, its JSON as a dict,
    or credentials), else the emulator's anonymous access or Google's default chain
    (which raises ``DefaultCredentialsError`` when it finds nothing)."""
    token = options.get("token")
    project = options.get("project") or "_"
    extra: dict[str, Any] = {}
    if options.get("endpoint_url"):
        extra["client_options"] = {"api_endpoint": options["endpoint_url"]}
    if token == "anon":
        return gcs.Client(project=project, credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
                          **extra)
    if isinstance(token, str) and token not in ("google_default", "cloud", "cache"):
        return gcs.Client.from_service_account_json(token, project=project, **extra)
    if isinstance(token, dict):
        return gcs.Client.from_service_account_info(token, project=project, **extra)
    if token is not None and hasattr(token, "refresh"):
        return gcs.Client(project=project, credentials=token, **extra)
    if os.environ.get("STORAGE_EMULATOR_HOST"):
        return gcs.Client(project=project, **extra)  # the SDK's anonymous emulator access
    import google.auth

    credentials, found = google.auth.default(
        scopes=["https://www.googleapis.com/auth/devstorage.full_control"])
    return gcs.Client(project=options.get("project") or found or "_",
                      credentials=credentials, **extra)


def split(path: str) -> tuple[str, str]:
    """The bucket and object name of a gcsfs path (``bucket/name``)."""
    bucket, _, name = path.partition("/")
    return bucket, name


def bucket(options: dict[str, Any], name: str, made: gcs.Client | None = None) -> gcs.Bucket:
    """The bucket ``name`` (of ``made``, else this process's client of ``options``); with
    ``requester_pays`` (gcsfs's option) every request names the project that pays
    (``userProject``: gcsfs's ``project``, else the client's)."""
    found = made or client(options)
    payer = (options.get("project") or found.project) if options.get("requester_pays") else None
    return found.bucket(name, user_project=payer)


def blob(options: dict[str, Any], path: str, generation: int | None = None) -> gcs.Blob:
    """The object at ``path`` (``generation``: that version of it, pinned)."""
    name, key = split(path)
    return bucket(options, name).blob(key, generation=generation)


#: What a listing asks of each object: what a walk's statuses are made of (size, mtime,
#: the kept mtime in the metadata, the generation), not its ACLs, hashes and the rest.
LISTED = ("items(name,size,generation,metageneration,updated,timeCreated,metadata),"
          "nextPageToken")


def listed(options: dict[str, Any], fs: Any, path: str) -> dict[str, dict[str, Any]]:
    """Every object below the folder ``path`` (``bucket/prefix``), in one listing, each
    as gcsfs's ``find(detail=True)`` describes it (gcsfs's own ``_process_object`` of
    the same resource: the same sizes, mtimes and generations whichever listed it).

    gcsfs's walk lists the tree twice (the second time to find an object that is also a
    folder's name), each in pages of 1,000; the SDK asks for no page size, so the
    service gives its own (1,000 on GCS; fake-gcs-server all at once, where each page
    costs it a pass over every object: 20,000 objects listed twice by gcsfs took 17.6 s
    there, once by the SDK 1.0 s, 2026-12-04). An error is the ``OSError`` gcsfs
    would raise: FileNotFoundError, PermissionError, else OSError."""
    name, key = split(path.rstrip("/"))
    found: dict[str, dict[str, Any]] = {}
    try:
        for item in client(options).list_blobs(bucket(options, name),
                                               prefix=key + "/" if key else None,
                                               fields=LISTED, timeout=TIMEOUT):
            info = fs._process_object(name, item._properties)
            found[info["name"]] = info
    except gexc.NotFound as exc:
        raise FileNotFoundError(f"no bucket {name}: {exc}") from exc
    except gexc.Forbidden as exc:
        raise PermissionError(f"listing gs://{path}: {exc}") from exc
    except gexc.GoogleAPIError as exc:
        raise OSError(f"listing gs://{path}: {exc}") from exc
    return found


def exists(options: dict[str, Any], path: str) -> bool:
    """Whether an object (any generation) is at ``path`` now (one GET of its metadata)."""
    return bool(blob(options, path).exists(timeout=TIMEOUT))


def rewrite(options: dict[str, Any], src: str, dst: str,
            writes: WriteOptions | None = None) -> None:
    """``dst`` made by the service from ``src``, whole or not at all, its metadata kept.

    Within one location and storage class GCS rewrites in one call without copying
    the bytes; otherwise it copies server-side, call by call (the token resumes).
    With ``writes`` the new object is created with them (``rewrite_with``)."""
    if writes is not None and writes.for_objects:
        rewrite_with(options, src, dst, writes)
        return
    source, target = blob(options, src), blob(options, dst)
    token, _, _ = target.rewrite(source, timeout=TIMEOUT)
    while token is not None:
        token, _, _ = target.rewrite(source, token=token, timeout=TIMEOUT)


#: The object's properties a rewrite whose request names the new object's must carry
#: over itself (the request's resource replaces the source's).
_KEPT = ("contentType", "contentEncoding", "contentDisposition", "contentLanguage",
         "cacheControl")


def rewrite_with(options: dict[str, Any], src: str, dst: str, writes: WriteOptions) -> None:
    """The rewrite of ``src`` to ``dst`` whose new object has the write options: its
    storage class and metadata in the request's resource (the source's metadata, the
    mtime pydistcp kept there, merged over the user's), its key as
    ``destinationKmsKeyName`` (CMEK) and its ACL as ``destinationPredefinedAcl``, all in
    the one request that makes it appear: no reader sees it without them. The SDK's
    ``Blob.rewrite`` takes no predefined ACL, so the request is sent as it would send it.
    """
    source, target = blob(options, src), blob(options, dst)
    held = source.bucket.get_blob(source.name, timeout=TIMEOUT)
    if held is None:
        raise gexc.NotFound(f"no object {src}")  # type: ignore[no-untyped-call]
    resource: dict[str, Any] = {k: held._properties[k] for k in _KEPT if k in held._properties}
    metadata = {**dict(writes.metadata), **dict(held.metadata or {})}
    if metadata:
        resource["metadata"] = metadata
    if writes.storage_class:
        resource["storageClass"] = writes.storage_class
    query: dict[str, Any] = dict(target._query_params)
    if writes.kms_key_id:
        query["destinationKmsKeyName"] = writes.kms_key_id
    if writes.acl:
        query["destinationPredefinedAcl"] = writes.acl
    path = f"{source.path}/rewriteTo{target.path}"
    while True:
        answer = client(options)._post_resource(path, resource, query_params=query,
                                                timeout=TIMEOUT)
        if answer.get("done"):
            return
        query["rewriteToken"] = answer["rewriteToken"]


def compose(options: dict[str, Any], parts: list[str], dst: str) -> None:
    """``dst`` made by the service from ``parts`` in order (one bucket, at most 32)."""
    target = blob(options, dst)
    target.compose([blob(options, p) for p in parts], timeout=TIMEOUT)


def size(options: dict[str, Any], path: str) -> int:
    """The object's size (one GET of its metadata); FileNotFoundError when none."""
    found = bucket(options, split(path)[0]).get_blob(split(path)[1], timeout=TIMEOUT)
    if found is None:
        raise FileNotFoundError(path)
    return int(found.size or 0)


#: The most sources one compose request takes.
MAX_COMPOSE = 32


def compose_all(options: dict[str, Any], parts: list[str], dst: str) -> None:
    """``dst`` made by the service from any number of ``parts`` in order: 32 at a time,
    each later request composing the object so far with the next 31."""
    compose(options, parts[:MAX_COMPOSE], dst)
    rest = parts[MAX_COMPOSE:]
    while rest:
        compose(options, [dst, *rest[:MAX_COMPOSE - 1]], dst)
        rest = rest[MAX_COMPOSE - 1:]


def delete(options: dict[str, Any], path: str) -> None:
    """Delete the object; one gone already is fine."""
    try:
        blob(options, path).delete(timeout=TIMEOUT)
    except gexc.NotFound:
        pass


def metadata(options: dict[str, Any], path: str) -> dict[str, str]:
    """The object's custom metadata; FileNotFoundError when there is no object."""
    found = bucket(options, split(path)[0]).get_blob(split(path)[1], timeout=TIMEOUT)
    if found is None:
        raise FileNotFoundError(path)
    return dict(found.metadata or {})


def kept_attributes(mode: int | None, mtime: float | None) -> dict[str, str]:
    """A file's mtime (whole seconds) and mode as the metadata gsutil keeps them under."""
    values = {}
    if mtime is not None:
        seconds = mtime / 1e9 if isinstance(mtime, int) else mtime
        values[MTIME_KEY] = str(int(seconds))
    if mode is not None:
        values[MODE_KEY] = format(mode & 0o7777, "o")
    return values


#: What every object written here is stored as (gcsfs stores a big file's the same).
CONTENT_TYPE = "application/octet-stream"


def upload(options: dict[str, Any], path: str, body: bytes, metadata: dict[str, str]) -> int:
    """``body`` as the object ``path`` with ``metadata``, in one request through the SDK
    (``gcs/uploads.py`` writes it by hand first); the size the service says it holds.
    The SDK checks the MD5 the service answers against the body's (a mismatch deletes
    the object and raises ``DataCorruption``)."""
    target = blob(options, path)
    if metadata:
        target.metadata = metadata
    target.upload_from_string(body, content_type=CONTENT_TYPE, checksum="md5",
                              timeout=TIMEOUT)
    return int(target.size if target.size is not None else -1)


def set_metadata(options: dict[str, Any], path: str, values: dict[str, str]) -> None:
    """Merge ``values`` into the object's custom metadata (one PATCH)."""
    target = blob(options, path)
    target.metadata = values
    target.patch(timeout=TIMEOUT)
