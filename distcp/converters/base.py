"""The Converter interface and the chain that applies several in order.

A converter is ``FileAwareInputStream -> Iterator[FileAwareInputStream]``:
one-to-one (gunzip, decrypt) or one-to-many (untar, unzip). Chains are lazy
generators, so each output stream is consumed by the writer before the next one
is produced and memory stays bounded by buffer sizes, not by file size.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from distcp.streams import FileAwareInputStream


@dataclass(frozen=True, slots=True)
class ConverterOptions:
    """Settings every converter may read; travels to executors inside the task spec.

    Secrets are excluded from ``repr`` so that logging a spec never leaks them.
    """

    gpg_home: str | None = None
    gpg_passphrase: str | None = field(default=None, repr=False)
    gpg_recipients: tuple[str, ...] = ()
    gpg_require_signature: bool = False
    max_expansion_ratio: float = 100.0
    max_expanded_bytes: int | None = None
    expand_into_parent: bool = False
    buffer_size: int = 1 << 20


class Converter(ABC):
    """Turns one input stream into zero or more output streams."""

    name: ClassVar[str] = ""
    one_to_many: ClassVar[bool] = False

    def __init__(self, options: ConverterOptions | None = None) -> None:
        self.options = options or ConverterOptions()

    @abstractmethod
    def convert(self, stream: FileAwareInputStream) -> Iterator[FileAwareInputStream]:
        """Yield the converted stream(s); raise ConversionError on bad input."""

    def rename(self, destination: str) -> str:
        """The destination after this converter, known at planning time.

        One-to-one converters rewrite the extension; one-to-many converters
        return the directory their entries expand into.
        """
        return destination


def rename_through(converters: Sequence[Converter], destination: str) -> str:
    """Apply each converter's ``rename`` in order (planning-time destination)."""
    for converter in converters:
        destination = converter.rename(destination)
    return destination


def chain(
    converters: Sequence[Converter], stream: FileAwareInputStream
) -> Iterator[FileAwareInputStream]:
    """Lazily apply ``converters`` in order to one input stream."""
    streams: Iterable[FileAwareInputStream] = (stream,)
    for converter in converters:
        streams = _flat_map(converter, streams)
    return iter(streams)


def _flat_map(
    converter: Converter, streams: Iterable[FileAwareInputStream]
) -> Iterator[FileAwareInputStream]:
    for s in streams:
        yield from converter.convert(s)


def build_chain(names: Sequence[str], options: ConverterOptions) -> list[Converter]:
    """Instantiate converters by registered name, in order."""
    from distcp.registry import CONVERTERS

    return [CONVERTERS.get(n)(options) for n in names]
