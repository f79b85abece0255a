"""An Iceberg table's metadata, read as values: pure, no I/O (driver).

What replication needs of the Iceberg spec (iceberg.apache.org/spec): the versions
that metadata files' names hold (``v3.metadata.json``, ``00003-<uuid>.metadata.json``),
which one is current, and the rewriting of every path in a metadata document from the
source table's location to the destination's (what Iceberg's ``rewrite_table_path``
procedure does). Metadata is data: every path it holds must lie under the table's own
location, else the table is refused, in one line naming the path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from distcp.storage.filesystems import STATE_DIR_NAME

#: The folder of a table's metadata files, relative to the table location.
METADATA_DIR = "metadata"
#: The file naming the current metadata version, in the metadata folder (Hadoop tables).
VERSION_HINT = "version-hint.text"

_METADATA = re.compile(r"^(?:v(\d+)|(\d+)-[^/]+?)(?:\.gz)?\.metadata\.json$")


class IcebergError(ValueError):
    """A table this tool will not replicate (a path outside its location, metadata it
    cannot read); the message names what and why, in one line."""


def metadata_version(name: str) -> int | None:
    """The version a metadata file's name holds (``v3.metadata.json``,
    ``00003-<uuid>.metadata.json`` -> 3); None for another file."""
    m = _METADATA.match(name)
    if m is None:
        return None
    return int(m.group(1) or m.group(2))


def metadata_files(names: Iterable[str]) -> dict[int, str]:
    """The metadata files among the metadata folder's ``names``, by version; two files
    of one version (two writers raced) are refused: which one is the table is unknown."""
    out: dict[int, str] = {}
    for name in sorted(names):
        version = metadata_version(name)
        if version is None:
            continue
        if version in out:
            raise IcebergError(f"two metadata files of version {version} ({out[version]}, "
                               f"{name}): which one is the table is not known")
        out[version] = name
    return out


def current_version(files: Mapping[int, str], hint: bytes | None = None) -> int:
    """The table's current metadata version: what ``version-hint.text`` names when it
    names one of ``files``, else the newest; -1 for no metadata (no table)."""
    if hint is not None:
        try:
            named = int(hint.decode("ascii").strip())
        except (UnicodeDecodeError, ValueError):
            named = -1
        if named in files:
            return named
    return max(files, default=-1)


def relative(path: str, location: str, what: str) -> str:
    """``path`` (read from the table's metadata) relative to the table ``location``,
    checked: under it, no ``.``/``..``/empty component, not in the tool's state folder.
    ``what`` names where the path was read, for the message."""
    prefix = location.rstrip("/") + "/"
    rel = path[len(prefix):] if path.startswith(prefix) else None
    why = None
    if rel is None:
        why = f"is not under the table location {location}"
    elif "\x00" in rel or "\\" in rel:
        why = "holds a NUL or a backslash"
    elif any(p in ("", ".", "..") for p in rel.split("/")):
        why = "has an empty, '.' or '..' component"
    elif rel.split("/")[0] == STATE_DIR_NAME:
        why = f"lies in {STATE_DIR_NAME}/"
    if why is not None or rel is None:
        raise IcebergError(f"{what} references {path}, which {why}: tables whose files "
                           "live elsewhere are not replicated")
    return rel


def moved(path: str, source: str, destination: str, what: str) -> str:
    """``path`` under the source location, moved to the same place under the
    destination location (checked by ``relative``)."""
    return f"{destination.rstrip('/')}/{relative(path, source, what)}"


def rewritten_metadata(doc: Mapping[str, Any], destination: str, name: str) -> dict[str, Any]:
    """A metadata document (parsed JSON) with every path moved from its ``location`` to
    ``destination``: the location, each snapshot's manifest list, the metadata log,
    statistics files; a path outside the location is an IcebergError naming ``name``."""
    source = doc.get("location")
    if not isinstance(source, str) or not source:
        raise IcebergError(f"metadata {name} has no location")
    what = f"metadata {name}"
    out = dict(doc)
    out["location"] = destination.rstrip("/")
    out["snapshots"] = [{**s, "manifest-list": moved(s["manifest-list"], source, destination,
                                                     what)}
                        for s in _list(doc, "snapshots", name)]
    out["metadata-log"] = [{**e, "metadata-file": moved(e["metadata-file"], source,
                                                        destination, what)}
                           for e in _list(doc, "metadata-log", name)]
    for key in ("statistics", "partition-statistics"):
        if key in doc:
            out[key] = [{**s, "statistics-path": moved(s["statistics-path"], source,
                                                       destination, what)}
                        for s in _list(doc, key, name)]
    props = dict(doc.get("properties") or {})
    for key in ("write.data.path", "write.metadata.path", "write.object-storage.path"):
        if key in props:  # files written elsewhere than the location: moved, or refused
            props[key] = moved(props[key], source, destination, what)
    if props:
        out["properties"] = props
    return out


def _list(doc: Mapping[str, Any], key: str, name: str) -> list[dict[str, Any]]:
    value = doc.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise IcebergError(f"metadata {name}: {key} is not a list of objects")
    return value


def snapshot_ids(doc: Mapping[str, Any]) -> set[int]:
    """The ids of the snapshots a metadata document holds."""
    return {int(s["snapshot-id"]) for s in doc.get("snapshots") or ()}
