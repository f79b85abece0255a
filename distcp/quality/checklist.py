"""CheckList: one destination's checks, as a value tasks carry (driver and executor).

The driver parses ``--check NAME[=ARG]`` into ``CheckSpec``s once, building every
check so that an unknown name or a bad argument is a usage error before any copy;
tasks rebuild the checks from the specs (plugins are classes, not pickled objects).
A fork gives each branch its own CheckList.

How a byte-reading check sees the bytes is decided by the destination's storage
(``feeds_while_writing``): where staging is a local file the file is read back after
it is written (the kernel copy stays on and an archive member costs one page-cache
read); anywhere else (an object store, whose staged object is an unfinished
multipart upload, or a remote fsspec filesystem) the bytes are fed to the checks
as they are written, so nothing is read twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from distcp.errors import ConfigurationError, PluginError
from distcp.quality.base import Inspector, QualityCheck, StagedOutput
from distcp.registry import CHECKS

#: Bytes read at a time when a staged local file is read back for the checks.
READ_BACK_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class CheckSpec:
    """One ``--check``: the check's name and its argument (resolved on the driver)."""

    name: str
    arg: str | None = None

    @property
    def text(self) -> str:
        return self.name if self.arg is None else f"{self.name}={self.arg}"


@dataclass(frozen=True, slots=True)
class CheckList:
    """The checks every staged output of one destination must pass, in order."""

    specs: tuple[CheckSpec, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.specs)

    @property
    def reads_bytes(self) -> bool:
        return any(c.reads_bytes for c in _built(self))

    def start(self) -> CheckRun | None:
        """The checks of one output, each with its own inspector (None: no checks)."""
        if not self.specs:
            return None
        checks = _built(self)
        return CheckRun(tuple(zip(self.specs, checks,
                                  (c.inspector() if c.reads_bytes else None for c in checks))))


class CheckRun:
    """The checks of one output while its bytes pass: ``update`` feeds every inspector."""

    def __init__(self, items: tuple[tuple[CheckSpec, QualityCheck, Inspector | None], ...]
                 ) -> None:
        self.items = items
        self.inspectors = [i for _, _, i in items if i is not None]

    @property
    def reads_bytes(self) -> bool:
        return bool(self.inspectors)

    def update(self, chunk: bytes | memoryview) -> None:
        for inspector in self.inspectors:
            inspector.update(chunk)

    def read_back(self, path: str) -> None:
        """Feed the inspectors from a staged local file."""
        with open(path, "rb") as f:
            while chunk := f.read(READ_BACK_CHUNK):
                self.update(chunk)

    def verdict(self, output: StagedOutput) -> str | None:
        """None if every check passes; else one line naming each failed check and the file."""
        failures = []
        for spec, check, seen in self.items:
            try:
                problem = check.check(output, seen)
            except Exception as exc:  # noqa: BLE001 - a broken check fails the file, as data
                problem = f"{type(exc).__name__}: {exc}"
            if problem:
                failures.append(f"check {spec.text!r} failed: {problem}")
        if not failures:
            return None
        return f"{output.destination}: quality " + "; ".join(failures)


class TeeStream:
    """A stream whose bytes also go to a CheckRun as they are read (object stores)."""

    def __init__(self, stream: Any, run: CheckRun) -> None:
        self.stream = stream
        self.run = run

    def readinto(self, buffer: memoryview) -> int:
        readinto = getattr(self.stream, "readinto", None)
        if readinto is not None:
            n = readinto(buffer) or 0
        else:
            data = self.stream.read(len(buffer))
            n = len(data)
            buffer[:n] = data
        if n:
            self.run.update(buffer[:n])
        return n

    def close(self) -> None:
        close = getattr(self.stream, "close", None)
        if close is not None:
            close()


def check_list(texts: Iterable[str]) -> CheckList:
    """``["gzip", "min-size=1K"]`` -> a CheckList, every check built once to validate it.

    Raises ConfigurationError naming the ``--check`` and the cause."""
    specs = []
    for text in texts:
        name, sep, arg = text.strip().partition("=")
        name = name.strip()
        try:
            cls = _check_class(name)
            value = _argument(cls, name, arg.strip() if sep else None)
            value = cls.resolve(value)
            cls(value)
        except (ValueError, TypeError, OSError) as exc:
            raise ConfigurationError(f"--check {text}: {exc}") from None
        specs.append(CheckSpec(name, value))
    return CheckList(tuple(specs))


def _check_class(name: str) -> type[QualityCheck]:
    try:
        cls: object = CHECKS.get(name)
    except PluginError as exc:
        raise ValueError(str(exc)) from None
    if not (isinstance(cls, type) and issubclass(cls, QualityCheck)):
        raise TypeError(f"check plugin {name!r} is not a distcp.quality.QualityCheck")
    return cls


def _argument(cls: type[QualityCheck], name: str, arg: str | None) -> str | None:
    if cls.takes_arg and not arg:
        raise ValueError(f"{name} needs an argument: {name}=VALUE")
    if cls.takes_arg is False and arg is not None:
        raise ValueError(f"{name} takes no argument")
    return arg


@lru_cache(maxsize=16)
def _built(checks: CheckList) -> tuple[QualityCheck, ...]:
    """The checks of ``checks``, built once per worker process (a schema parsed once)."""
    return tuple(_check_class(s.name)(s.arg) for s in checks.specs)
