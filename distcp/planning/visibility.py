"""Pure: which files appear as soon as they are copied, per-file visibility (driver).

By default (``--visibility file-set``) an object store's objects appear when their
file set is published: each file is staged as an uncompleted multipart upload and
the publish step completes them (three requests for a small file). With
``--visibility file`` each object appears, whole, as soon as its task has copied it
and checked its source, rclone's guarantee: one PutObject for a file smaller than a
part, an immediate complete for a bigger one. A file set of a single file gets the
same, since publishing that set *is* publishing its file.

Not per file, whatever the option: the files of a dataset whose file sets publish in
an order (a Delta table: a commit only after its data), split files (their ranges are joined at publish)
and, unless ``file`` is asked for, converted files (an archive expands into many
objects that land with their set).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import replace

from distcp.model import CopyableFile, WorkUnit


def per_file(files: Sequence[CopyableFile], visibility: str,
             ordered: Collection[str] = ()) -> frozenset[str]:
    """Guids of ``files`` (all files the run copies) that are published per file.

    Never a file of an ``ordered`` dataset (a Delta table, whose file sets publish in
    order): its commit file, alone in its set, would appear before its data."""
    files = [f for f in files if f.dataset_urn not in ordered] if ordered else files
    if visibility == "file":
        return frozenset(f.guid for f in files)
    sizes = Counter((f.dataset_urn, f.file_set) for f in files)
    return frozenset(f.guid for f in files
                     if sizes[(f.dataset_urn, f.file_set)] == 1 and not f.converters)


def mark(units: Sequence[WorkUnit], guids: frozenset[str]) -> list[WorkUnit]:
    """``units`` with the files they publish per file named; ranges never are."""
    out = []
    for u in units:
        now = tuple(f.guid for f in u.files if f.guid in guids) if u.split is None else ()
        out.append(replace(u, publish_now=now) if now else u)
    return out
