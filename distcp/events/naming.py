"""Dataset names by OpenLineage's naming spec (driver).

A namespace for the storage and a name for the path in it (``s3://bucket`` + ``key``;
``file`` + an absolute path; ``ftp://host:port`` + a path; ``abfs://container@account...``
+ a path: there the part before ``@`` is the container; ``az://`` is written ``abfs://``,
as adlfs names the two, so that both spellings of one blob are one dataset). No user
name or password ever goes in.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit


def dataset_name(url: str) -> tuple[str, str]:
    """(namespace, name) of a file or folder URL as pydistcp writes them."""
    parts = urlsplit(url)
    if not parts.scheme or parts.scheme == "file" or len(parts.scheme) == 1:  # C:\\ on Windows
        path = url.removeprefix("file://") if parts.scheme == "file" else url
        return "file", os.path.abspath(path) if path else "/"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    if parts.scheme == "az":  # adlfs's other name for abfs: one store, one namespace
        return dataset_name("abfs" + url[len("az"):])
    if parts.scheme in ("abfs", "abfss") and parts.username:
        # abfs://container@account.dfs.core.windows.net: the "user" is the container
        return f"{parts.scheme}://{parts.username}@{netloc}", parts.path.lstrip("/") or "/"
    if parts.scheme in ("s3", "s3a", "gs", "gcs", "abfs", "abfss"):
        return f"{parts.scheme}://{netloc}", parts.path.lstrip("/") or "/"
    return f"{parts.scheme}://{netloc}", parts.path or "/"
