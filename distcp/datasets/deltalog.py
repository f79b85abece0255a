"""A Delta Lake table's ``_delta_log/``, read as values: pure, no I/O (driver).

What replication needs of the Delta protocol (github.com/delta-io/delta PROTOCOL.md):
the versions a log's file names hold, the files each commit references (``add`` and
``cdc`` paths, a deletion vector's file) as paths relative to the table root, and the
checks that keep a path read from a log inside the table. A log is data: nothing in it
may name a place outside the destination table, nor the tool's own folders.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from distcp.storage.filesystems import STATE_DIR_NAME

#: The folder of a table's log, relative to the table root.
LOG_DIR = "_delta_log"
#: The pointer to the last checkpoint, in the log folder: copied last of all.
LAST_CHECKPOINT = "_last_checkpoint"
#: A v2 checkpoint's sidecar files, in the log folder.
SIDECARS = "_sidecars"

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.[^/]+)?\.(parquet|json)$")
_CRC = re.compile(r"^(\d{20})\.crc$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}


class LogError(ValueError):
    """A log this tool will not replicate (a path outside the table, an unreadable
    commit); the message names what and why, in one line."""


def commit_name(version: int) -> str:
    """The file name of commit ``version`` in the log folder."""
    return f"{version:020d}.json"


def commit_version(name: str) -> int | None:
    """The version of a commit file's name (``00000000000000000003.json`` -> 3)."""
    m = _COMMIT.match(name)
    return int(m.group(1)) if m else None


def checkpoint_version(name: str) -> int | None:
    """The version of a checkpoint's file name (classic, multi-part or v2), or of a
    version checksum (``.crc``): files that only summarise commits already published."""
    m = _CHECKPOINT.match(name) or _CRC.match(name)
    return int(m.group(1)) if m else None


def last_version(names: Iterable[str]) -> int:
    """The newest commit among the log folder's ``names``; -1 for no commit (no table)."""
    return max((v for v in map(commit_version, names) if v is not None), default=-1)


def versions_after(names: Iterable[str], after: int) -> list[int]:
    """The commits of ``names`` newer than ``after``, in version order; a gap in them
    (a commit missing between two others) is refused: it cannot be replayed."""
    found = sorted(v for v in map(commit_version, names) if v is not None and v > after)
    expected = after + 1
    for v in found:
        if v != expected:
            raise LogError(f"the log has no commit {expected} (it goes on at {v}): "
                           + ("older commits were cleaned up; replicating from a checkpoint "
                              "is not supported yet" if expected == 0 else "a gap in the log"))
        expected += 1
    return found


@dataclass(frozen=True)
class Referenced:
    """A file a commit adds to the table: its path relative to the table root."""

    path: str
    #: What references it (``add``, ``cdc``, ``deletion vector``), for messages.
    kind: str


def referenced(document: bytes, version: int) -> list[Referenced]:
    """The files commit ``version`` (its JSON lines) adds: data files and change-data
    files by their decoded relative paths, and the files of their deletion vectors.
    An absolute path (a shallow clone's) or one that leaves the table is a LogError."""
    out: list[Referenced] = []
    for action in _actions(document, version):
        for kind in ("add", "cdc"):
            body = action.get(kind)
            if isinstance(body, dict):
                out.extend(_files(body, kind, version))
    return out


def snapshot_files(commits: Mapping[int, bytes]) -> list[Referenced]:
    """The files a reader of the table at the newest of ``commits`` reads (every commit
    from version 0, by version): its live data files and their deletion vectors, the
    log replayed as the protocol says (an ``add`` makes a path live, a ``remove`` of it
    ends it; within one commit the removes go first, so a file whose deletion vector
    was replaced keeps its new one). What ``check`` compares a replica with."""
    live: dict[str, list[Referenced]] = {}
    for version in sorted(commits):
        actions = list(_actions(commits[version], version))
        for action in actions:
            body = action.get("remove")
            if isinstance(body, dict):
                live.pop(table_path(_text(body, "path", version), version), None)
        for action in actions:
            body = action.get("add")
            if isinstance(body, dict):
                files = _files(body, "add", version)
                live[files[0].path] = files
    return [r for files in live.values() for r in files]


def _actions(document: bytes, version: int) -> Iterator[dict[str, Any]]:
    """Commit ``version``'s actions (its JSON lines that are objects)."""
    for n, line in enumerate(document.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LogError(f"commit {version} line {n} is not JSON ({exc.msg})") from None
        if isinstance(action, dict):
            yield action


def _files(body: dict[str, object], kind: str, version: int) -> list[Referenced]:
    """The file an ``add`` or ``cdc`` action names, then its deletion vector's file."""
    out = [Referenced(table_path(_text(body, "path", version), version), kind)]
    dv = body.get("deletionVector")
    if isinstance(dv, dict):
        out.extend(_deletion_vector(dv, version))
    return out


def _text(body: dict[str, object], key: str, version: int) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise LogError(f"commit {version} has an action without a {key}")
    return value


def table_path(uri: str, version: int) -> str:
    """A log's path (a URI, percent-encoded: the protocol's rule) as a path relative to
    the table root, checked: never absolute, never ``..``, never into the log folder or
    the tool's state folder. The message names the path and the commit."""
    if _SCHEME.match(uri) or uri.startswith("/"):
        raise LogError(f"commit {version} references the absolute path {uri} (a shallow "
                       "clone?): tables whose files live elsewhere are not replicated")
    path = unquote(uri)
    parts = path.split("/")
    why = None
    if "\x00" in path or "\\" in path:
        why = "holds a NUL or a backslash"
    elif any(p in ("", ".", "..") for p in parts):
        why = "has an empty, '.' or '..' component"
    elif parts[0] in (LOG_DIR, STATE_DIR_NAME):
        why = f"lies in {parts[0]}/"
    if why:
        raise LogError(f"commit {version} references {uri!r}, which {why}: not a file of "
                       "the table")
    return path


def _deletion_vector(dv: dict[str, object], version: int) -> Iterator[Referenced]:
    """A deletion vector's file: ``u`` (a UUID, Z85-encoded, after an optional folder
    prefix: ``<prefix>/deletion_vector_<uuid>.bin``), ``p`` (an absolute path: refused);
    ``i`` is inline (no file)."""
    kind, where = dv.get("storageType"), dv.get("pathOrInlineDv")
    if kind == "i":
        return
    if not isinstance(where, str):
        raise LogError(f"commit {version} has a deletion vector without a path")
    if kind == "p":
        yield Referenced(table_path(where, version), "deletion vector")
        return
    if kind != "u" or len(where) < 20:
        raise LogError(f"commit {version} has a deletion vector of unknown kind {kind!r}")
    prefix, encoded = where[:-20], where[-20:]
    name = f"deletion_vector_{_uuid(z85_decode(encoded, version))}.bin"
    yield Referenced(table_path(f"{prefix}/{name}" if prefix else name, version),
                     "deletion vector")


def z85_decode(text: str, version: int = -1) -> bytes:
    """ZeroMQ's Z85 (what Delta encodes a deletion vector's UUID with): 5 characters
    to 4 bytes, big-endian."""
    if len(text) % 5:
        raise LogError(f"commit {version}: {text!r} is not Z85 (length)")
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for c in text[i:i + 5]:
            if c not in _Z85_VALUE:
                raise LogError(f"commit {version}: {text!r} is not Z85 ({c!r})")
            value = value * 85 + _Z85_VALUE[c]
        if value >= 1 << 32:
            raise LogError(f"commit {version}: {text!r} is not Z85 (overflow)")
        out += value.to_bytes(4, "big")
    return bytes(out)


def _uuid(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def last_checkpoint_version(document: bytes) -> int | None:
    """The version ``_last_checkpoint`` points at; None when it cannot be read."""
    try:
        value = json.loads(document).get("version")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None
