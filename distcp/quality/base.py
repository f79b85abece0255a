"""The QualityCheck interface: what a check is given and what it answers (driver and executor).

A check answers ``None`` (pass) or a one-line failure message for one staged output.
Checks that need the bytes (``reads_bytes``) do not read the staged object
themselves: on an object store it is an unfinished multipart upload nobody can
read. Instead each gets a fresh ``Inspector`` per output, fed every byte once,
either as the bytes are written (a tee) or from the staged local file afterwards;
``distcp.quality.checklist`` decides which, by the storage's capabilities. A check
that only needs the size reads nothing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Protocol


class Inspector(Protocol):
    """Receives one output's bytes, in order, each byte once. A chunk may be a view of
    the task's reused copy buffer: copy what must outlive the call."""

    def update(self, chunk: bytes | memoryview, /) -> None: ...


@dataclass(frozen=True, slots=True)
class StagedOutput:
    """One staged output as a check sees it.

    ``staging`` is the staging marker text (``distcp.storage.staged``: a staging path,
    or the pending upload on the final key); ``destination`` the final path it will
    publish to; ``size`` the bytes staged.
    """

    destination: str
    staging: str
    size: int


class QualityCheck(ABC):
    """One check, built once per task from its name and its argument (``NAME=ARG``).

    ``__init__`` validates the argument (raise ``ValueError`` with the cause: the
    driver builds every check before the run, so a bad argument is a usage error).
    Instances stay on the executor; what travels is the ``CheckSpec`` text.
    """

    #: The name ``--check`` takes (the entry-point name for a plugin).
    name: ClassVar[str] = ""
    #: Whether ``inspector`` must see the output's bytes.
    reads_bytes: ClassVar[bool] = False
    #: Whether the argument is required (True), refused (False) or optional (None).
    takes_arg: ClassVar[bool | None] = False

    def __init__(self, arg: str | None = None) -> None:
        self.arg = arg

    @classmethod
    def resolve(cls, arg: str | None) -> str | None:
        """The argument as executors get it, computed once on the driver (e.g. a file
        the driver can read and executors cannot): identity by default."""
        return arg

    def inspector(self) -> Inspector | None:
        """A fresh consumer of one output's bytes (only when ``reads_bytes``)."""
        return None

    @abstractmethod
    def check(self, output: StagedOutput, seen: Inspector | None) -> str | None:
        """None if ``output`` passes, else why not (the caller names check and file)."""
