"""Local disk: one final folder's staged files published by one rename (driver and executor).

A copy task stages each plain file under its final name, in a staging folder of its own
per final folder (``distcp.copying.task.Folders``). When that staging folder holds
exactly the files a file set publishes to one final folder, and the final folder is
empty (the commit's ``MakeDirectories`` made it), one ``rename(2)`` publishes them all:
the kernel replaces an empty directory atomically and refuses one that holds anything
(ENOTEMPTY), so no entry of the destination is ever replaced this way. Every other file
is published by its own rename, as before. A first copy of 100,000 files in 1,000
folders published in 0.13 s here, against 1.16 s for the renames of each file.

What is left is what the renames of each file leave: the files at their final paths,
gone from staging (each file's ``is_published`` holds, so a replay finds them done), and
the final folder with its mode and owner (the staging folder takes its mode first; a
folder owned by someone else, or carrying extended attributes such as a default ACL,
keeps its own inode: its files are renamed one by one).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from distcp.storage.staged import Staged
from distcp.storage.staging import StagedFile

#: Fewer files than this to a folder: their own renames cost less than the folder's checks.
MIN_FILES = 2


@dataclass(frozen=True)
class FolderMove:
    """Staged files that one staging folder holds under their final names, all bound
    for one final folder: published by one rename of the folder where it can be. A
    results file's are grouped by Arrow (``resultfiles.publishing_by_folder``), without
    a value per file: B's 20,000 files took 2-3 ms a results file of 5,000 instead of
    5-6 ms as StagedFiles grouped one by one."""

    staged: str
    final: str
    names: tuple[str, ...]
    sizes: tuple[int, ...]

    def files(self) -> list[StagedFile]:
        """Its files one by one, for their own renames (or a hook to call on each)."""
        return [StagedFile(Staged.path(f"{self.staged}/{name}"), f"{self.final}/{name}",
                           size) for name, size in zip(self.names, self.sizes, strict=True)]


def folders_of(files: Sequence[StagedFile]) -> tuple[list[FolderMove], list[StagedFile]]:
    """``files`` that a folder's rename may publish, as FolderMoves, and the rest: the
    rule ``resultfiles.publishing_by_folder`` applies by Arrow to a results file's
    columns (a staged path whose name is its final name), here to values in hand."""
    groups: dict[tuple[str, str], tuple[list[str], list[int]]] = {}
    rest: list[StagedFile] = []
    for f in files:
        if f.staged.needs_rename:
            staged_in, staged_name = f.staged.location.rsplit("/", 1)
            final_in, final_name = f.final.rsplit("/", 1)
            if staged_name == final_name:
                names, sizes = groups.setdefault((staged_in, final_in), ([], []))
                names.append(final_name)
                sizes.append(f.size)
                continue
        rest.append(f)
    return [FolderMove(staged, final, tuple(names), tuple(sizes))
            for (staged, final), (names, sizes) in groups.items()], rest


def publish_folders(folders: Sequence[FolderMove],
                    after_each: Callable[[StagedFile], None] | None,
                    os_path: Callable[[str], str]) -> list[FolderMove]:
    """Publish each of ``folders`` its staging folder fills whole with one rename
    (``after_each``, if any, runs for each of its files; ``os_path``: a URL's path);
    returns those left to publish file by file."""
    left: list[FolderMove] = []
    for move in folders:
        if len(move.names) >= MIN_FILES and _replace_folder(
                os_path(move.staged), os_path(move.final), set(move.names)):
            if after_each is not None:
                for f in move.files():
                    after_each(f)
        else:
            left.append(move)
    return left


def _replace_folder(staged: str, final: str, names: set[str]) -> bool:
    """Rename ``staged`` over the empty folder ``final`` when it holds exactly ``names``;
    False (nothing done) when it does not, or the kernel refuses."""
    try:
        if set(os.listdir(staged)) != names:
            return False
        have, want = os.lstat(staged), os.lstat(final)
        if not stat.S_ISDIR(want.st_mode) or want.st_nlink > 2 \
                or (have.st_uid, have.st_gid) != (want.st_uid, want.st_gid):
            return False  # a link or a file there, subfolders, or another owner (the
            # kernel would refuse the first two too: ENOTDIR, ENOTEMPTY)
        if _extended(final):
            return False  # ACLs or labels of the user's folder: it keeps its inode
        if stat.S_IMODE(have.st_mode) != stat.S_IMODE(want.st_mode):
            os.chmod(staged, stat.S_IMODE(want.st_mode))
        os.rename(staged, final)  # ENOTEMPTY if a file is there: the renames of each file
    except OSError:
        return False
    return True


def _extended(path: str) -> bool:
    """Whether the folder carries extended attributes (POSIX ACLs, security labels),
    which a folder put in its place would not: where the platform cannot tell, it may."""
    listxattr = getattr(os, "listxattr", None)
    if listxattr is None:
        return True
    try:
        return bool(listxattr(path, follow_symlinks=False))
    except OSError as exc:  # a filesystem without them has none to lose
        return exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP)
