"""Stage a symbolic link as a link (``--links copy``), verified (executor).

rsync ``-l`` semantics: the staged entry is a new link holding the source's target
text verbatim (a relative target stays relative, a dangling one stays dangling); it
goes through staging, verification and the file set's publish like any file, so a
reader of the destination never sees a link the run did not verify. Verified means:
the source still holds the listed text, and ``readlink`` of the staged entry returns
exactly that text. A link's "bytes" are its target text: its size is the text's
length (what ``lstat`` reports) and its digest the digest of the text.
"""

from __future__ import annotations

import os

from distcp.checksum import Digest
from distcp.copying.writer import Staged
from distcp.errors import DestinationWriteError, IntegrityError, SourceReadError
from distcp.model import CopyableFile
from distcp.storage import filesystems as fsutil
from distcp.storage.filesystems import os_path


def stage_link(file: CopyableFile, staging_url: str, holds_links: bool = True) -> Staged:
    """Create the staged link for ``file`` (a link origin) at ``staging_url``;
    ``holds_links``: whether the destination's storage holds symbolic links."""
    target = file.origin.link_target
    assert target is not None, "stage_link is for link origins only"
    _check_source(file, target)
    path = os_path(staging_url)
    if not holds_links:  # preflight refuses such runs; a plan from elsewhere may not
        raise DestinationWriteError(
            f"cannot stage symbolic link {fsutil.display(staging_url)}: only a local "
            "destination holds links (--links copy)", path=staging_url)
    try:
        os.symlink(target, path)
        got = os.readlink(path)
    except OSError as exc:
        _discard(path)
        raise DestinationWriteError(
            f"cannot stage symbolic link {fsutil.display(staging_url)}: {exc.strerror or exc}",
            path=staging_url) from exc
    if got != target:
        _discard(path)
        raise IntegrityError(f"staged link differs: source {target!r}, staged {got!r} "
                             f"({fsutil.display(staging_url)})", path=staging_url)
    digest = Digest()
    digest.update(os.fsencode(target))
    return Staged(staging_url, os.lstat(path).st_size, digest.hexdigest())


def _check_source(file: CopyableFile, target: str) -> None:
    """The source is still the listed link: never stage a text the plan did not see."""
    source = os_path(file.origin.url)
    shown = fsutil.display(file.origin.url)
    try:
        now = os.readlink(source)
    except FileNotFoundError as exc:
        raise SourceReadError(f"source vanished since listing: {shown}", path=shown) from exc
    except OSError as exc:  # EINVAL: no longer a link
        raise SourceReadError(f"source changed while copying: {shown} (no longer a "
                              f"symbolic link: {exc.strerror})", path=shown) from exc
    if now != target:
        raise SourceReadError(f"source changed while copying: {shown} (link to {now!r}, "
                              f"listed {target!r})", path=shown)


def apply_link_attributes(staging_url: str, *, mtime: float | None, owner: str | None,
                          group: str | None) -> None:
    """The link's own mtime and ownership (never its target's: ``follow_symlinks=False``).
    A link has no mode of its own on Linux, so none is set. An ``int`` mtime is
    nanoseconds (exact), a ``float`` seconds. Only called on a link ``stage_link`` made."""
    path = os_path(staging_url)
    if owner is not None or group is not None:
        _lchown(path, owner, group)
    if isinstance(mtime, int):
        os.utime(path, ns=(mtime, mtime), follow_symlinks=False)
    elif mtime is not None:
        os.utime(path, (mtime, mtime), follow_symlinks=False)


def _lchown(path: str, owner: str | None, group: str | None) -> None:
    from distcp.chown import ids

    try:
        os.chown(path, *ids(owner, group), follow_symlinks=False)
    except (KeyError, PermissionError):
        pass  # unknown name here, or not allowed: keep the process's own


def _discard(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
