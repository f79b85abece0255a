"""Pure planning: what each dataset wants + what the target has -> a Plan (driver and executor).

No I/O here: listings come in as values, the plan goes out as a value, so every
rule (skip, overwrite, delete, duplicate targets) is unit-tested with literals.
The shape follows Hadoop DistCp's listing: validate, build, then check that no
two files share a destination.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from distcp.copying.copyrows import CopyRows
from distcp.datasets.icebergplan import CatalogSwap
from distcp.datasets.partitions import StreamMarks
from distcp.datasets.versions import TableVersions
from distcp.errors import DuplicateDestinationError, PlanningError
from distcp.model import CopyableDirectory, CopyableFile, FileStatus
from distcp.mtimes import same_mtime
from distcp.storage.filesystems import display
from distcp.values import built_by_plain_stores


@built_by_plain_stores
@dataclass(frozen=True, slots=True)
class Action:
    """One planned decision about a file, with the reason shown by --dry-run (one per
    file of a plan: slots, no per-instance dict)."""

    file: CopyableFile
    reason: str
    #: The destination's status when the copy waits on a comparison of contents
    #: (``--checksum`` with no digest known for both sides: ``CONTENTS``); the run
    #: reads both sides before copying (``distcp.planning.contents``). None: copy as
    #: planned; a run that does not compare copies it, as before.
    existing: FileStatus | None = None


def action_of(f: CopyableFile, decision: Decision, existing: FileStatus | None) -> Action:
    """The action of a decision; a copy that waits on contents keeps what it is
    compared with."""
    reason = decision[0]
    return Action(f, reason, existing if reason == CONTENTS else None)


@dataclass(frozen=True)
class DatasetPlan:
    urn: str
    destination_root: str
    copy: tuple[Action, ...]
    skip: tuple[Action, ...]
    delete: tuple[str, ...]
    directories: tuple[CopyableDirectory, ...]
    #: A stream dataset's watermarks and partitions, for the commit steps that move them.
    marks: StreamMarks | None = None
    #: Files skipped, when they were counted where they were decided (planning on
    #: Spark: ``skip`` then holds their decisions only when asked); None: ``len(skip)``.
    skips_counted: int | None = None
    #: Files to copy that planning tasks kept in files of their own instead of sending
    #: them (``distcp.copying.copyrows``): copied and published without passing here.
    kept: tuple[CopyRows, ...] = ()
    #: The file sets in publishing order, each published only once every set before
    #: it was published whole (``DatasetListing.order``: a Delta table); empty: none.
    order: tuple[str, ...] = ()
    #: The file sets announced by an event when published (None: every set).
    announced: frozenset[str] | None = None
    #: A table's versions, for the versions it is behind after publishing.
    versions: TableVersions | None = None
    #: Catalog registrations ending a file set's sequence (``DatasetListing``'s).
    registrations: tuple[CatalogSwap, ...] = ()

    @property
    def bytes_to_copy(self) -> int:
        return sum(a.file.origin.size for a in self.copy) + sum(r.bytes for r in self.kept)

    @property
    def files_kept(self) -> int:
        return sum(r.files for r in self.kept)

    @property
    def files_skipped(self) -> int:
        return len(self.skip) if self.skips_counted is None else self.skips_counted


@dataclass(frozen=True)
class Plan:
    datasets: tuple[DatasetPlan, ...]

    @property
    def files_to_copy(self) -> list[CopyableFile]:
        return [a.file for d in self.datasets for a in d.copy]

    @property
    def bytes_to_copy(self) -> int:
        return sum(d.bytes_to_copy for d in self.datasets)


def plan_dataset(
    urn: str,
    destination_root: str,
    files: Iterable[CopyableFile],
    directories: Iterable[CopyableDirectory],
    target: Mapping[str, FileStatus],
    *,
    overwrite: bool = False,
    delete: bool = False,
    compare: str = "default",
    mtimes_kept: bool = True,
    protected: Collection[str] = (),
    marks: StreamMarks | None = None,
    order: tuple[str, ...] = (),
    announced: frozenset[str] | None = None,
    versions: TableVersions | None = None,
    registrations: tuple[CatalogSwap, ...] = (),
) -> DatasetPlan:
    """Decide copy/skip for each file and, with ``delete``, what to remove.

    ``protected``: target entries the run's filters leave out; never deleted, nor are
    the directories holding them.
    """
    copy: list[Action] = []
    skip: list[Action] = []
    dirs = tuple(directories)
    for f in files:
        existing = target.get(f.destination)
        if f.destination.endswith("/"):  # an archive expands into this directory
            _check_expansion_root(f, target)
            existing = _expansion_of(f, existing)
        elif existing is not None and existing.is_dir:
            raise PlanningError(
                f"cannot replace directory {display(f.destination)} with file "
                f"{display(f.origin.url)}", path=f.destination)
        decision = decide(f, existing, overwrite, compare, mtimes_kept)
        (copy if decision[1] else skip).append(action_of(f, decision, existing))
    for d in dirs:
        existing = target.get(d.destination)
        if existing is not None and not existing.is_dir:
            raise PlanningError(
                f"cannot replace file {display(d.destination)} with directory "
                f"{display(d.origin.url)}", path=d.destination)
    doomed = _extras(target, [a.file for a in copy + skip], dirs, protected) if delete else ()
    return DatasetPlan(urn, destination_root, tuple(copy), tuple(skip), doomed, dirs, marks,
                       order=order, announced=announced, versions=versions,
                       registrations=registrations)


def _check_expansion_root(f: CopyableFile, target: Mapping[str, FileStatus]) -> None:
    there = target.get(f.destination.rstrip("/"))
    if there is not None and not there.is_dir:
        raise PlanningError(
            f"cannot expand {display(f.origin.url)} into {display(f.destination)}: a file "
            "is there", path=f.destination)


@dataclass(frozen=True, slots=True)
class Expansions(FileStatus):
    """A folder archives expand into, as planning sees it: which archives' exact versions
    (guids) were published there and are still present. Several archives share one
    folder under ``--expand-into-parent``: each is up to date only if its own guid is."""

    guids: frozenset[str] = frozenset()


def expansion_targets(files: Iterable[CopyableFile], target: Mapping[str, FileStatus],
                      published: Collection[str], destination_root: str, *,
                      listed: bool = True) -> dict[str, FileStatus]:
    """The target as planning sees archives.

    ``DST/x/`` (trailing "/") stands for "the archives expanded here" (``Expansions``):
    an archive counts only when the state says this exact origin version (its guid, in
    ``published``) was published and, for a real listing (``listed``), its directory
    still exists. A directory's own mtime cannot tell: publishing into it changes it,
    and with --expand-into-parent several archives share it.
    """
    out = dict(target)
    expanded: dict[str, set[str]] = {}
    for f in files:
        if not f.destination.endswith("/"):
            continue
        out.pop(f.destination, None)
        root_url = f.destination.rstrip("/")
        root = target.get(root_url)
        present = not listed or (root is not None and root.is_dir) or (
            root_url == destination_root.rstrip("/") and bool(target))
        if f.guid in published and present:
            expanded.setdefault(f.destination, set()).add(f.guid)
    for folder, guids in expanded.items():
        out[folder] = Expansions(folder, -1, 0.0, guids=frozenset(guids))
    return out


def _expansion_of(f: CopyableFile, existing: FileStatus | None) -> FileStatus | None:
    """An archive's own expansion in the folder it expands into: present, with the
    archive's mtime, when its guid is among the folder's ``Expansions``; else none."""
    if isinstance(existing, Expansions):
        return FileStatus(f.destination, -1, f.origin.mtime) if f.guid in existing.guids \
            else None
    return existing


#: (reason shown by --dry-run, copy?)
Decision = tuple[str, bool]

#: ``--checksum``'s reason for a file of its target's size whose digests are not both
#: known: copied unless reading both sides finds the same contents (rclone ``-c``).
CONTENTS = "same size, contents to compare (--checksum)"


def skips_same(overwrite: bool, compare: str) -> bool:
    """Whether ``decide`` skips every plain file (no link, checksum or converter) whose
    size and mtime are exactly its target's: under every comparison but ``--checksum``,
    unless ``--overwrite``. A planner may then skip such a file on its stat, before it
    makes it a CopyableFile (a no-op rerun's every file; tested against ``decide``)."""
    return not overwrite and compare != "checksum"


def decide(f: CopyableFile, existing: FileStatus | None, overwrite: bool,
           compare: str = "default", mtimes_kept: bool = True) -> Decision:
    """(reason, copy?) for one file against what the target has at its destination.

    ``compare`` follows rclone: "ignore-existing" skips whatever the destination has,
    "size-only" looks at sizes alone, "checksum" skips on equal size and checksum and,
    when a checksum is not known for both sides, leaves a file of the same size to a
    comparison of contents (``CONTENTS``: a copy until the run reads both sides).

    ``mtimes_kept``: whether the destination keeps the mtimes it is given (its storage's
    ``Capabilities.mtimes``). An object store's is the upload time: a preserved mtime can
    never match it, so there a copy is up to date when it is not older than its source
    (rclone's ``--update --use-server-modtime``), and a rerun skips what it copied.
    """
    link = f.origin.link_target
    if existing is None:
        return ("new", True) if link is None else (f"new symbolic link to {link}", True)
    if overwrite:
        return "--overwrite", True
    if compare == "ignore-existing":
        return "destination exists (--ignore-existing)", False
    if f.origin.link_target is not None or existing.link_target is not None:
        return _decide_link(f.origin, existing)
    if compare == "size-only":
        return _by_size_only(f, existing)
    if compare == "checksum":
        return _by_checksum(f, existing)
    rule = ("same" if mtimes_kept else "not-older") if "t" in f.preserve else "none"
    return _by_default(f, existing, rule)


def _by_size_only(f: CopyableFile, existing: FileStatus) -> Decision:
    """--size-only: mtimes and checksums are not trusted on this destination."""
    if existing.size == f.origin.size:
        return "same size (--size-only)", False
    return "size differs", True


def _by_checksum(f: CopyableFile, existing: FileStatus) -> Decision:
    """--checksum: skip only on a known, equal checksum (never on a guess); with none
    known for both sides, the contents decide (planning reads nothing: ``CONTENTS``)."""
    if existing.size != f.origin.size:
        return "size differs", True
    if not (f.origin.checksum and existing.checksum):
        return CONTENTS, True
    if f.origin.checksum == existing.checksum:
        return "same size and checksum (--checksum)", False
    return "checksum differs", True


def _by_default(f: CopyableFile, existing: FileStatus, rule: str) -> Decision:
    """Checksums when both sides know one, else size, then mtime by ``rule``: "same"
    (a preserved mtime the destination keeps), "not-older" (preserved, but the
    destination keeps its own), "none" (not preserved)."""
    o = f.origin
    if f.converters:
        return _by_converted_mtime(f, existing, rule)
    if o.checksum and existing.checksum:
        if o.checksum == existing.checksum and o.size == existing.size:
            return "same checksum", False
        return "checksum differs", True
    if existing.size != o.size:
        return "size differs", True
    return _by_mtime(f, existing, rule)


def _by_converted_mtime(f: CopyableFile, existing: FileStatus, rule: str) -> Decision:
    """A converted copy differs from its source in size and checksum: only a preserved
    mtime can tell that it is up to date."""
    if rule == "same" and same_mtime(existing.mtime, f.origin.mtime):
        return "converted copy with the same mtime exists", False
    if rule == "not-older" and _not_older(existing.mtime, f.origin.mtime):
        return "converted copy not older than its source exists", False
    return "converted copy is older or differs", True


def _by_mtime(f: CopyableFile, existing: FileStatus, rule: str) -> Decision:
    """Same size: a preserved mtime the destination keeps must match; otherwise a
    destination at least as new as the source is kept."""
    if rule == "same":
        if same_mtime(existing.mtime, f.origin.mtime):
            return "same size and mtime", False
        return "mtime differs", True
    if _not_older(existing.mtime, f.origin.mtime):
        return "same size, destination not older", False
    return "source is newer", True


def _not_older(destination: float, source: float) -> bool:
    """At the coarser precision of the two readings: an FTP server's whole-second mtime
    of a copy made with MFMT is not older than its source's fraction of that second."""
    return destination >= source or same_mtime(destination, source)


def _decide_link(origin: FileStatus, existing: FileStatus) -> Decision:
    """A link is its target text: the same text at the destination is the same link,
    whatever the comparison mode (size, mtime and checksum belong to files).

    A target known only from the state's manifest (``--incremental``) has no link
    text: the link is copied again (one ``symlink`` call, no source bytes read).
    """
    if origin.link_target is None:
        return "destination is a symbolic link", True
    if existing.link_target == origin.link_target:
        return f"same symbolic link to {origin.link_target}", False
    if existing.link_target is None:
        return f"symbolic link to {origin.link_target}, destination is not a link", True
    return (f"symbolic link target differs ({existing.link_target} -> "
            f"{origin.link_target})"), True


def _extras(target: Mapping[str, FileStatus], kept: list[CopyableFile],
            dirs: tuple[CopyableDirectory, ...], protected: Collection[str] = ()
            ) -> tuple[str, ...]:
    """Target entries that the dataset does not have; deepest first."""
    keep = {f.destination for f in kept} | {d.destination for d in dirs} | set(protected)
    expanded = tuple(f.destination for f in kept if f.destination.endswith("/"))
    for url in [f.destination for f in kept] + list(protected):
        parent = posixpath.dirname(url)
        while parent and parent not in keep:
            keep.add(parent)
            parent = posixpath.dirname(parent)
    # What archives expanded is not known before they are read: keep all of it.
    extras = [url for url in target if url not in keep and url.rstrip("/") + "/" not in expanded
              and not url.startswith(expanded)]
    return tuple(sorted(extras, key=lambda u: (-u.count("/"), u)))


def check_max_delete(plans: Iterable[DatasetPlan], limit: int | None) -> None:
    """rclone's --max-delete: refuse the whole run, before any change, above ``limit``."""
    count = sum(len(p.delete) for p in plans)
    if limit is not None and count > limit:
        raise PlanningError(f"--max-delete {limit}: the plan would delete {count} entries; "
                            "nothing was changed")


def check_duplicates(plans: Iterable[DatasetPlan], shared_folders: bool = False) -> None:
    """Refuse two origin files that map to one destination (DistCp's final check).

    Two archives expanding into one folder (``logs.tar.gz`` and ``logs.tgz`` both into
    ``logs/``) are two sources mapping to one destination too; only
    ``--expand-into-parent`` (``shared_folders``) asks archives to share their folder,
    and then a member both hold is refused after staging (``commit.collisions``)."""
    seen: dict[str, CopyableFile] = {}
    for p in plans:
        for a in p.copy + p.skip:
            other = seen.setdefault(a.file.destination, a.file)
            if other is a.file or (shared_folders and a.file.destination.endswith("/")):
                continue
            what = ("two archives expand into the one folder "
                    if a.file.destination.endswith("/") else "two sources map to ")
            raise DuplicateDestinationError(
                f"{what}{display(a.file.destination)}: {display(other.origin.url)} and "
                f"{display(a.file.origin.url)}; rename one at the source", path=a.file.destination)
