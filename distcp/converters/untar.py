"""``untar``: one tar stream in, one output per regular file or directory out (driver and executor).

Safe by construction rather than by filter (PITFALLS.md, Archives):

- members are read in stream mode (``r|``), never ``extract``/``extractall``;
  each entry's bytes go to our writer through ``extractfile``;
- only regular files and directories are accepted; links, devices, FIFOs and
  setuid/setgid bits are refused with the entry's name (under ``--archive-links skip``,
  most real tarballs holding some, symbolic links are skipped and reported instead, and a
  hard link to an earlier small regular member is expanded as a copy of its bytes:
  ``hardlinks``); names are validated by ``safety.entry_path`` (no absolute paths, no ``..``);
- gzip/bzip2/xz inside are opened by us, not by tarfile: tarfile never checks
  the gzip CRC, so after the last member we drain our gzip layer to EOF, which
  raises on a bad CRC or length;
- the archive must end with tar's end-of-archive block: tarfile silently stops
  at a truncated or corrupt header, we do not;
- expanded bytes are counted as produced, against ``--max-expansion-ratio`` and
  ``--max-expanded-bytes``.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Any, Self

from distcp.converters.base import Converter
from distcp.converters.codecs import describe
from distcp.converters.hardlinks import HeldMembers
from distcp.converters.iostreams import ConvertedReader, CountingReader, peek, upstream_damage
from distcp.converters.names import expansion_root
from distcp.converters.safety import ExpansionBudget, entry_mode, entry_path
from distcp.converters.seen import NameTable
from distcp.errors import ConversionError, CopyError
from distcp.storage.filesystems import display
from distcp.streams import FileAwareInputStream

#: tarfile's read-ahead; larger costs a copy of the rest per 512-byte header.
TAR_BUFSIZE = 64 << 10
#: Entries left out (``--archive-links skip``) named one by one in the result; the
#: rest are counted, so that the note stays small whatever the archive.
NOTES_MAX = 100
#: What ``_Expansion.names`` records about a member name.
_FILE, _DIR = 0, 1


#: tarfile's reasons to stop reading headers: a corrupt header, and the end-of-archive
#: block (private classes of tarfile, which its type stubs do not list).
INVALID_HEADER: type[tarfile.HeaderError] = vars(tarfile)["InvalidHeaderError"]
END_OF_ARCHIVE: type[tarfile.HeaderError] = vars(tarfile)["EOFHeaderError"]


class _StrictTarFile(tarfile.TarFile):
    """A TarFile that keeps why it stopped reading headers (``_StrictTarInfo``)."""

    #: Every TarInfo read so far (tarfile's own list; stream mode never empties it).
    members: list[tarfile.TarInfo]
    #: The header error that ended the archive, or None while it goes on.
    pydistcp_end: tarfile.HeaderError | None = None


class _StrictTarInfo(tarfile.TarInfo):
    """Records why tarfile stopped reading headers (it hides the reason)."""

    @classmethod
    def fromtarfile(cls, tar: tarfile.TarFile) -> Self:
        try:
            return super().fromtarfile(tar)
        except tarfile.HeaderError as exc:
            if isinstance(tar, _StrictTarFile):
                tar.pydistcp_end = exc
            raise


class UntarConverter(Converter):
    """Expands a tar (plain, .gz, .bz2 or .xz) under ``DST/<archive name>/``."""

    name = "untar"
    one_to_many = True

    def rename(self, destination: str) -> str:
        return expansion_root(destination, self.options.expand_into_parent)

    def convert(self, stream: FileAwareInputStream) -> Iterator[FileAwareInputStream]:
        job = _Expansion(self, stream)
        try:
            yield from job.run()
        finally:
            job.close()


class _Expansion:
    """The state of expanding one archive: its layers, budget and the names seen."""

    def __init__(self, converter: UntarConverter, stream: FileAwareInputStream) -> None:
        opts = converter.options
        self.stream = stream
        self.origin = stream.file.origin.url
        self.root = converter.rename(stream.destination)
        self.into_parent = opts.expand_into_parent
        self.consumed = CountingReader(stream.stream)
        self.budget = ExpansionBudget(self.origin, "untar", opts.max_expansion_ratio,
                                      opts.max_expanded_bytes)
        self.layer: Any = None
        self.tar_bytes: CountingReader | None = None
        #: Every member name seen, file or directory (bounded memory: ``seen``).
        self.names = NameTable()
        #: The last parent directory checked to have no file among its ancestors.
        self.clear_parent: str | None = None
        self.skip_links = opts.archive_links == "skip"
        #: Small regular members, kept for hard links to them (skip mode only).
        self.held = HeldMembers() if self.skip_links else None
        self.notes: list[str] = []
        self.more_notes = 0

    def note(self, text: str) -> None:
        """Name an entry left out; past NOTES_MAX, count it in the last note instead."""
        if len(self.notes) < NOTES_MAX:
            self.notes.append(text)
            return
        self.more_notes += 1
        more = f"and {self.more_notes} more links not expanded"
        if self.more_notes == 1:
            self.notes.append(more)
        else:
            self.notes[-1] = more

    def error(self, why: str) -> CopyError:
        """The archive's refusal, unless the stream it came from explains its bytes
        first (a tampered ciphertext is named as such, not as the bad tar it decrypts to)."""
        return upstream_damage(self.stream.stream) or ConversionError(
            f"cannot untar {display(self.origin)}: {why}", path=self.origin)

    def translate(self, exc: BaseException) -> CopyError:
        if isinstance(exc, CopyError):
            return exc
        if isinstance(exc, tarfile.ReadError):
            return self.error(f"truncated or corrupt tar ({exc})")
        return self.error(describe(exc))

    def run(self) -> Iterator[FileAwareInputStream]:
        tar = self._open()
        if not self.into_parent:
            mtime = self.stream.file.origin.mtime_ns or self.stream.file.origin.mtime
            yield self._output(self.root, io.BytesIO(), None, mtime)
        while True:
            member = self._next(tar)
            if member is None:
                break
            out = self._entry(tar, member)
            if out is not None:
                yield out
        self._finish(tar)

    def _open(self) -> _StrictTarFile:
        head, raw = peek(self.consumed, 6)
        if head.startswith(b"\x1f\x8b"):
            self.layer = gzip.GzipFile(fileobj=raw, mode="rb")
        elif head.startswith(b"BZh"):
            self.layer = bz2.BZ2File(raw, mode="rb")
        elif head.startswith(b"\xfd7zXZ\x00"):
            self.layer = lzma.LZMAFile(io.BufferedReader(raw), mode="rb")  # noqa: SIM115 - closed by close()
        else:
            self.layer = raw
        self.tar_bytes = CountingReader(self.layer)
        try:
            return _StrictTarFile.open(fileobj=self.tar_bytes, mode="r|", bufsize=TAR_BUFSIZE,
                                       tarinfo=_StrictTarInfo)
        except Exception as exc:
            raise self.translate(exc) from exc

    def _next(self, tar: _StrictTarFile) -> tarfile.TarInfo | None:
        try:
            member = tar.next()
        except Exception as exc:
            raise self.translate(exc) from exc
        tar.members.clear()  # stream mode keeps every TarInfo: O(members) memory otherwise
        return member

    def _entry(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> FileAwareInputStream | None:
        rel = entry_path(member.name, self.origin, "untar")
        if self.skip_links and member.islnk():
            return self._hard_link(member, rel)
        if self.skip_links and member.issym():
            self.note(f"symbolic link {member.name!r} -> {member.linkname!r}")
            return None
        _check_type(member, self.error)
        mode = entry_mode(member.mode, member.name, self.origin, "untar")
        if not rel:
            return None  # "./": the expansion root itself
        self._check_unique(rel, member.isdir())
        if member.isdir():
            return self._output(self.root + rel + "/", io.BytesIO(), mode, _mtime(member))
        try:
            raw: Any = tar.extractfile(member)
            if self.held is not None and self.held.wants(rel, member.size):
                raw = io.BytesIO(raw.read())  # at most HELD_MEMBER_MAX bytes
                self.held.hold(rel, raw.getvalue())
        except Exception as exc:
            raise self.translate(exc) from exc
        return self._output(self.root + rel, self._reader(raw), mode, _mtime(member))

    def _reader(self, raw: Any) -> ConvertedReader:
        return ConvertedReader(raw, self.translate, self.budget, lambda: self.consumed.count)

    def _hard_link(self, member: tarfile.TarInfo, rel: str) -> FileAwareInputStream | None:
        """A copy of the earlier member the link names, when held (``hardlinks``); else
        skipped and named. Its bytes count against the expansion budget like any entry."""
        try:
            target: str | None = entry_path(member.linkname, self.origin, "untar")
        except ConversionError:
            target = None  # an escaping name cannot be an earlier member of ours
        assert self.held is not None
        data = self.held.get(target)
        if data is None or not rel:
            why = self.held.why_not(target) if rel else "it names the expansion root"
            self.note(f"hard link {member.name!r} -> {member.linkname!r} ({why})")
            return None
        mode = entry_mode(member.mode, member.name, self.origin, "untar")
        self._check_unique(rel, False)
        self.held.hold(rel, data)  # a later link may name this one
        return self._output(self.root + rel, self._reader(io.BytesIO(data)), mode,
                            _mtime(member))

    def _check_unique(self, rel: str, is_dir: bool) -> None:
        """Refuse a name seen twice (tar lets the last win) or a file used as a directory."""
        parent = rel.rpartition("/")[0]
        if parent and parent != self.clear_parent:
            parts = parent.split("/")
            for i in range(1, len(parts) + 1):
                if self.names.get("/".join(parts[:i])) == _FILE:
                    raise self.error(f"entry {rel!r} is below a file entry of the same archive")
            self.clear_parent = parent  # members come grouped by directory: checked once
        kind = self.names.get(rel)
        if kind == _FILE or (not is_dir and kind == _DIR):
            raise self.error(f"duplicate member {rel!r}")
        self.names.put(rel, _DIR if is_dir else _FILE)
        if not is_dir and self.clear_parent is not None and (
                self.clear_parent + "/").startswith(rel + "/"):
            self.clear_parent = None  # a file now sits where that directory was

    def _finish(self, tar: _StrictTarFile) -> None:
        end = tar.pydistcp_end
        if isinstance(end, INVALID_HEADER):
            raise self.error(f"corrupt tar header at offset {tar.offset} ({end})")
        if not isinstance(end, END_OF_ARCHIVE):
            raise self.error("truncated tar: it ends without the end-of-archive block")
        try:
            while self.tar_bytes is not None and self.tar_bytes.read(1 << 20):
                pass  # drain every layer to EOF: the gzip CRC/length trailer is checked here
        except Exception as exc:
            raise self.translate(exc) from exc

    def _output(self, destination: str, reader: Any, mode: int | None,
                mtime: float | None) -> FileAwareInputStream:
        keep_time = "t" in self.stream.file.preserve
        return FileAwareInputStream(self.stream.file, reader, destination, mode,
                                    mtime if keep_time else None, self.notes)

    def close(self) -> None:
        self.names.close()
        if self.held is not None:
            self.held.close()
        if self.layer is not None and hasattr(self.layer, "close"):
            self.layer.close()


def _mtime(member: tarfile.TarInfo) -> int | float:
    """Nanoseconds from a pax ``mtime`` record (exact), else float seconds (ustar/GNU)."""
    text = member.pax_headers.get("mtime")
    if text:
        try:
            return int(Decimal(text) * 1_000_000_000)
        except (InvalidOperation, ValueError):
            pass
    return float(member.mtime)


def _check_type(member: tarfile.TarInfo, error: Any) -> None:
    """Only regular files and directories: anything else can escape or surprise."""
    if member.isreg() or member.isdir():
        return
    if member.issym():
        why = f"is a symbolic link to {member.linkname!r}"
    elif member.islnk():
        why = f"is a hard link to {member.linkname!r}"
    elif member.ischr() or member.isblk():
        why = "is a device file"
    elif member.isfifo():
        why = "is a FIFO"
    else:
        why = f"has unsupported type {member.type!r}"
    raise error(f"entry {member.name!r} {why}; only regular files and directories are "
                "expanded, nothing of this archive was published")
