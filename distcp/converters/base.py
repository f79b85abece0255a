"""The Converter interface and the chain that applies several in order (driver and executor).

A converter is ``FileAwareInputStream -> Iterator[FileAwareInputStream]``:
one-to-one (gunzip, decrypt) or one-to-many (untar, unzip). Chains are lazy
generators, so each output stream is consumed by the writer before the next one
is produced and memory stays bounded by buffer sizes, not by file size.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from distcp.errors import ConfigurationError, PluginError
from distcp.registry import CONVERTERS
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
    #: Links inside a tar: ``refuse`` the archive whole, or ``skip`` them and report each.
    archive_links: str = "refuse"
    buffer_size: int = 1 << 20
    #: A private local directory of the running task (its staging area), where
    #: converters that need random access (unzip) spool their input; set by the
    #: task, None means the system's temporary directory.
    scratch_dir: str | None = None


#: How a task result says which entries of its input a converter left out on purpose.
NOT_EXPANDED = "not expanded (--archive-links skip): "


class Converter(ABC):
    """Turns one input stream into zero or more output streams."""

    name: ClassVar[str] = ""
    one_to_many: ClassVar[bool] = False
    #: Whether a copying process forked by the command may run it (``run.workers``):
    #: not when its preflight already ran a library's threads and child processes in
    #: the command's own process, whose state a forked child would inherit mid-use.
    forks: ClassVar[bool] = True

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

    def check_options(self) -> None:
        """Raise ConfigurationError when ``options`` cannot work for this converter
        (called once when the run is configured, before anything is read)."""

    def preflight(self) -> None:
        """Check, before Spark starts, what the tasks will need from this machine (a
        tool, a key); raise one of our errors when it cannot work. Called for local
        masters only: a cluster's executors are other machines."""


class UnknownConverterError(ConfigurationError, PluginError):
    """A --convert name nobody registered: a bad invocation (exit 2) and a plugin lookup
    failure, so callers catching either see it."""


def check_chain(names: Sequence[str], options: ConverterOptions) -> None:
    """Refuse unknown converter names and unusable options up front (exit 2)."""
    if options.max_expansion_ratio <= 0:
        raise ConfigurationError("--max-expansion-ratio must be positive")
    if options.max_expanded_bytes is not None and options.max_expanded_bytes <= 0:
        raise ConfigurationError("--max-expanded-bytes must be positive")
    if options.archive_links not in ("refuse", "skip"):
        raise ConfigurationError(
            f"--archive-links must be refuse or skip, not {options.archive_links!r}")
    try:
        converters = build_chain(names, options)
    except PluginError as exc:
        raise UnknownConverterError(f"--convert: {exc}", **exc.attrs) from exc
    for converter in converters:
        converter.check_options()


def expands(names: Sequence[str]) -> bool:
    """Whether a chain of these converter names expands a file into many (an archive):
    only then can two sources' outputs meet on one file unseen by planning."""
    return any(CONVERTERS.get(name).one_to_many for name in names)


def forks_safely(names: Sequence[str]) -> bool:
    """Whether every converter of a chain may run in a forked copying process."""
    return all(CONVERTERS.get(name).forks for name in names)


def rename_through(converters: Sequence[Converter], destination: str) -> str:
    """Apply each converter's ``rename`` in order (planning-time destination)."""
    for converter in converters:
        destination = converter.rename(destination)
    return destination


def chain(
    converters: Sequence[Converter], stream: FileAwareInputStream
) -> Iterator[FileAwareInputStream]:
    """Lazily apply ``converters`` in order to one input stream.

    ``stream.destination`` is the planned destination, which already holds the
    renames of every converter up to and including the first one-to-many one
    (planning cannot see past an archive's entries). Those converters run with
    ``rename`` as the identity so that nothing is renamed twice; converters
    after an expansion rename each entry themselves (``untar,gunzip``: ``d/a.gz``
    -> ``d/a``). Converters must therefore derive output destinations through
    ``self.rename``.
    """
    streams: Iterable[FileAwareInputStream] = (stream,)
    planned = True
    for converter in converters:
        if planned:
            planned = not converter.one_to_many
            converter = _without_rename(converter)
        streams = _flat_map(converter, streams)
    return iter(streams)


def _without_rename(converter: Converter) -> Converter:
    twin = copy.copy(converter)
    twin.rename = _identity  # type: ignore[method-assign]
    return twin


def _identity(destination: str) -> str:
    return destination


def _flat_map(
    converter: Converter, streams: Iterable[FileAwareInputStream]
) -> Iterator[FileAwareInputStream]:
    for s in streams:
        yield from converter.convert(s)


def build_chain(names: Sequence[str], options: ConverterOptions) -> list[Converter]:
    """Instantiate converters by registered name, in order."""
    classes: list[type[Converter]] = [CONVERTERS.get(n) for n in names]
    return [cls(options) for cls in classes]
