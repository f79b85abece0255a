"""What every object the run writes is created with: the write options (driver and executor).

``--storage-class``, ``--kms-key-id``, ``--acl``, ``--metadata``, ``--tag`` and
``--requester-pays`` (job keys and ``distcp.copy`` parameters of the same names) are
one frozen ``WriteOptions``. It travels inside the destination's storage options
under ``KEY`` (the sources' too, for ``requester_pays`` alone): those options already
reach every place that opens the destination (tasks, commit steps, publishing tasks,
split files' staging, replays), and ``Storage.__init__`` takes the value out before
any fsspec filesystem sees the options. Each backend applies it where it creates a
data object (never to the state directory's documents) and says which options it
has (``Storage.write_options``); ``write_problem`` refuses the others before Spark
starts, in one line naming the option and the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from distcp.errors import ConfigurationError

#: The storage options' key the write options travel under (no fsspec option is named so).
KEY = "pydistcp:write"

#: Option -> its flag, and what a store that lacks it has not (for the refusal).
FLAGS = {"storage_class": "--storage-class", "kms_key_id": "--kms-key-id", "acl": "--acl",
         "metadata": "--metadata", "tags": "--tag", "requester_pays": "--requester-pays"}
LACKS = {"storage_class": "no storage classes", "kms_key_id": "no managed encryption keys",
         "acl": "no canned ACLs", "metadata": "no object metadata", "tags": "no object tags",
         "requester_pays": "no requester-pays buckets"}

Pairs = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """The options every data object of a run is created with; empty: none."""

    storage_class: str | None = None
    kms_key_id: str | None = None
    acl: str | None = None
    metadata: Pairs = ()
    tags: Pairs = ()
    requester_pays: bool = False

    def given(self) -> tuple[str, ...]:
        """The names of the options set, in ``FLAGS`` order."""
        return tuple(name for name in FLAGS if getattr(self, name))

    def __bool__(self) -> bool:
        return bool(self.given())

    @property
    def for_objects(self) -> bool:
        """Whether anything but requester pays is set (what objects are created with)."""
        return any(n != "requester_pays" for n in self.given())


def of(options: Mapping[str, Any] | None) -> WriteOptions:
    """The write options carried in storage ``options`` (none: an empty value)."""
    found = (options or {}).get(KEY)
    return found if isinstance(found, WriteOptions) else WriteOptions()


def without(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Storage ``options`` without the write options (what a store's own are)."""
    return {k: v for k, v in (options or {}).items() if k != KEY}


#: The schemes whose fsspec filesystem takes ``requester_pays=True`` (s3fs, gcsfs): what
#: a storage with ``requester_pays`` among its ``write_options`` is given.
REQUESTER_PAYS_SCHEMES = ("s3", "s3a", "gs", "gcs")


def for_fsspec(url: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Storage ``options`` as the fsspec filesystem of ``url`` takes them: the write
    options left out, ``requester_pays`` set where they ask for it (a listing task
    builds its filesystem from the run's options, not through a ``Storage``)."""
    out = without(options)
    if of(options).requester_pays and url.split("://", 1)[0] in REQUESTER_PAYS_SCHEMES:
        out["requester_pays"] = True
    return out


def carrying(options: Mapping[str, Any], writes: WriteOptions) -> dict[str, Any]:
    """Storage ``options`` carrying ``writes`` (or none, when it is empty)."""
    out = without(options)
    if writes:
        out[KEY] = writes
    return out


def to_record(writes: WriteOptions) -> dict[str, Any]:
    """What objects are created with, as a commit log entry keeps it (JSON; no secret:
    a managed key is named by its id). Requester pays is the reading run's own."""
    return {name: (list(map(list, value)) if isinstance(value, tuple) else value)
            for name in writes.given() if name != "requester_pays"
            for value in (getattr(writes, name),)}


def from_record(record: Mapping[str, Any] | None) -> WriteOptions:
    """``to_record``'s value back; a record without one: no options."""
    if not record:
        return WriteOptions()
    return WriteOptions(
        storage_class=record.get("storage_class"), kms_key_id=record.get("kms_key_id"),
        acl=record.get("acl"),
        metadata=tuple((str(k), str(v)) for k, v in record.get("metadata", ())),
        tags=tuple((str(k), str(v)) for k, v in record.get("tags", ())))


def pairs(value: Mapping[str, Any] | Iterable[str] | None, flag: str) -> Pairs:
    """``--metadata``/``--tag``'s values, a mapping or ``KEY=VALUE`` strings, as sorted
    pairs; ConfigurationError naming ``flag`` and the bad entry (no ``=``, an empty key, a key
    given twice, a value that is not a string)."""
    if not value:
        return ()
    if isinstance(value, str):
        value = (value,)
    found: dict[str, str] = {}
    items: Iterable[tuple[Any, Any]]
    if isinstance(value, Mapping):
        items = value.items()
    else:
        split: list[tuple[Any, Any]] = []
        for entry in value:
            if isinstance(entry, (tuple, list)) and len(entry) == 2:  # pairs already
                split.append((entry[0], entry[1]))
                continue
            key, sep, text = str(entry).partition("=")
            if not sep:
                raise ConfigurationError(f"{flag} takes KEY=VALUE, got {entry!r}")
            split.append((key, text))
        items = split
    for key, text in items:
        if not isinstance(key, str) or not key.strip():
            raise ConfigurationError(f"{flag}: an empty key (give KEY=VALUE)")
        if not isinstance(text, (str, int, float)) or isinstance(text, bool):
            raise ConfigurationError(f"{flag} {key}: the value must be a string")
        if key in found:
            raise ConfigurationError(f"{flag} {key}: given twice")
        found[key] = str(text)
    return tuple(sorted(found.items()))


def values_problem(writes: WriteOptions) -> str | None:
    """Why the values themselves cannot be sent to any store, or None."""
    for name in ("storage_class", "kms_key_id", "acl"):
        value = getattr(writes, name)
        if value is not None and (not value.strip() or value != value.strip()):
            return f"{FLAGS[name]}: {value!r} is not a name (empty, or spaces around it)"
    for name in ("metadata", "tags"):
        for key, value in getattr(writes, name):
            if key != key.strip() or any(c in key for c in "\r\n\t =&") or not key.isprintable():
                return (f"{FLAGS[name]} {key!r}: a key is letters, digits and - _ . : / "
                        "(no spaces, '=' or '&')")
            if "\r" in value or "\n" in value:
                return f"{FLAGS[name]} {key}: a value cannot hold a line break"
    return None


def write_problem(writes: WriteOptions, url: str, storage: Any, display: str) -> str | None:
    """The first option of ``writes`` the storage at ``url`` (shown as ``display``) does
    not take, as one line (``--tag: gs://b has no object tags``), or a metadata key it
    keeps its own value under; None when it takes them all. ``requester_pays`` is
    judged by ``requester_pays_problem`` (it applies to sources too)."""
    for name in writes.given():
        if name != "requester_pays" and name not in storage.write_options:
            return f"{FLAGS[name]}: {display} has {LACKS[name]}"
    for key, _ in writes.metadata:
        if key.lower() in storage.own_metadata_keys:
            return (f"--metadata {key}: {display} keeps pydistcp's own value under that key "
                    "(the source's mtime or mode); choose another key")
    problem: str | None = storage.write_value_problem(writes, display)
    return problem


def requester_pays_problem(stores: list[tuple[Any, str]]) -> str | None:
    """``--requester-pays`` needs one store of the run (a source or the destination,
    ``(storage, display)``) that has requester-pays buckets."""
    if any("requester_pays" in s.write_options for s, _ in stores):
        return None
    if len(stores) == 1:
        return f"--requester-pays: {stores[0][1]} has {LACKS['requester_pays']}"
    names = ", ".join(d for _, d in stores)
    return f"--requester-pays: none of {names} has requester-pays buckets"
