"""How converters rename destinations, known before any byte is read (driver and executor)."""

from __future__ import annotations

import posixpath

#: Archive extensions, longest first, stripped to name an archive's expansion directory.
ARCHIVE_SUFFIXES = (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tbz2", ".tbz", ".txz",
                    ".tar", ".zip")
#: Extensions of encrypted files, stripped by ``decrypt``.
GPG_SUFFIXES = (".gpg", ".pgp", ".asc")


def replace_suffix(destination: str, table: dict[str, str]) -> str:
    """Replace the first matching suffix of ``destination`` per ``table``
    (``{".gz": "", ".tgz": ".tar"}``); unchanged when none matches."""
    lower = destination.lower()
    for suffix, replacement in table.items():
        if lower.endswith(suffix) and len(destination) > len(suffix):
            return destination[: -len(suffix)] + replacement
    return destination


def archive_stem(name: str) -> str:
    """``logs.tar.gz`` -> ``logs``: the archive's name without its extensions."""
    lower = name.lower()
    for suffix in ARCHIVE_SUFFIXES:
        if lower.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def expansion_root(destination: str, into_parent: bool) -> str:
    """Where an archive at ``destination`` expands, with a trailing "/".

    ``DST/x/logs.tar`` -> ``DST/x/logs/`` by default, ``DST/x/`` with
    ``--expand-into-parent``. The trailing slash tells planning and the task
    that this destination is a directory an archive fills.
    """
    base = destination.rstrip("/")
    parent, name = posixpath.split(base)
    if into_parent:
        return parent.rstrip("/") + "/"
    return posixpath.join(parent, archive_stem(name)) + "/"
