"""FileAwareInputStream: a readable binary stream plus the file it belongs to (executor)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from distcp.model import CopyableFile


class ByteStream(Protocol):
    """What every stream on its way to the writer offers: its bytes in order, and
    ``close``. A source's reader, a decompressor, a converter's reader all are one;
    the writer uses ``readinto`` too where a stream has it."""

    def read(self, size: int = -1, /) -> bytes:
        """Up to ``size`` bytes (all that is left if negative); b"" at the end."""
        ...

    def close(self) -> None:
        ...


@dataclass(frozen=True)
class FileAwareInputStream:
    """One stream on its way to the writer.

    ``destination`` starts as the CopyableFile's destination and is rewritten by
    converters (``x.gz`` -> ``x``; an archive entry -> ``<dir>/<entry>``).
    ``mode``/``mtime`` describe this output when a converter knows them (archive
    entries), else None and the writer applies the origin's preserved attributes.
    The stream may raise a ``ConversionError`` from ``read()`` (at the latest at
    EOF) or ``close()``: that is how a converter reports input it must reject.
    """

    file: CopyableFile
    stream: ByteStream
    destination: str
    mode: int | None = None
    mtime: float | None = None
    #: What the converter left out of this input on purpose (links of an archive under
    #: ``--archive-links skip``), shared by all outputs of one input; the task puts it in
    #: the result's message and the summary lists it.
    notes: list[str] = field(default_factory=list, compare=False)

    @classmethod
    def of(cls, file: CopyableFile, stream: ByteStream) -> FileAwareInputStream:
        return cls(file=file, stream=stream, destination=file.destination)
