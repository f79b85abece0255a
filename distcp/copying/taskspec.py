"""TaskSpec: the slice of a run's configuration that travels to every task (driver and executor).

Its own module so that everything executors run (``task``, ``sources``, ``ranges``,
``join``) can name it without importing each other. The task attempt's identity
comes from Spark, so it is computed in ``distcp.spark.arrow`` and handed down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from distcp.chmod import Chmod
from distcp.converters.base import ConverterOptions
from distcp.errors import DestinationNameError, StateCollisionError
from distcp.quality.checklist import CheckList
from distcp.state.bounds import landing_in
from distcp.storage import Storage, StorageSpec
from distcp.storage.filesystems import display


@dataclass(frozen=True)
class TaskSpec:
    """The slice of the configuration every task needs; secrets stay out of repr."""

    job_id: str
    staging_root: str
    progress_root: str
    buffer_size: int = 8 << 20
    verify: str = "digest"
    src_options: dict[str, Any] = field(default_factory=dict, repr=False)
    dst_options: dict[str, Any] = field(default_factory=dict, repr=False)
    converter_options: ConverterOptions = field(default_factory=ConverterOptions)
    #: The destination's storage, resolved once on the driver: tasks ask it how to stage.
    dst: StorageSpec = field(default_factory=StorageSpec)
    #: Sources and destination are on one store and endpoint: copy sources server-side.
    server_side: bool = False
    #: ... and ranges of split files too (the store's ``server_side_ranges``, asked once
    #: on the driver: a task never sends a range copy the store cannot make).
    server_side_ranges: bool = False
    #: The part size a server-side copy asks for (the store rounds it up to its rules).
    part_size: int = 8 << 20
    #: The client's variables tasks read (AWS credentials, S3 bound, crash points):
    #: a warm engine's workers have the server's environment, not the client's.
    env: dict[str, str] | None = field(default=None, repr=False)
    #: ``--bwlimit``: this task's share of the run's bytes per second (None: no limit).
    bwlimit: int | None = None
    #: Seconds one remote operation may take (``PYDISTCP_S3_TIMEOUT``, read once by the
    #: driver); None: the environment's, for tasks run outside a job (tests).
    request_timeout: float | None = None
    #: ``--check``: what every staged output must pass before it may publish (one
    #: destination's list; a fork gives each branch its own).
    checks: CheckList = field(default_factory=CheckList)
    #: ``--chmod``: also applied to the modes archive members carry (the planner has
    #: already applied it to every file's own mode).
    chmod: Chmod | None = None
    #: The folders no output may land in (``distcp.state.bounds.protected_roots``: the
    #: run's state root and the destination's default one), as the driver wrote them.
    protected: tuple[str, ...] = ()
    #: The run's state root (``distcp.state.layout``): split files' records live there.
    state_root: str = ""

    @cached_property
    def dst_storage(self) -> Storage:
        """The destination's storage, resolved once where this spec landed (a task):
        ``dst.open()`` looks its options up in the process's table on every call."""
        return self.dst.open()

    def __getstate__(self) -> dict[str, Any]:
        """Fields only: a storage resolved here is resolved again where the spec lands."""
        state = dict(self.__dict__)
        state.pop("dst_storage", None)
        return state

    def refuse_protected(self, origin: str, destination: str) -> None:
        """Raise StateCollisionError when ``destination`` lies in a protected folder, and
        DestinationNameError when the destination cannot hold its name (an object key
        that is not UTF-8): checked for every file and every expanded member before any
        byte is staged, so that one bad name fails its file alone. A destination ending
        in "/" is a folder (an archive's, or a directory it holds): nothing is written
        under that name, so no store is asked to hold it."""
        root = landing_in(destination, self.protected) if self.protected else None
        if root is not None:
            raise StateCollisionError(
                f"cannot copy {display(origin)} to {display(destination)}: that is inside "
                f"the state directory {display(root)}, where no data may land; rename it "
                "at the source or exclude it", path=origin)
        problem = None if destination.endswith("/") else \
            self.dst_storage.name_problem(destination)
        if problem:
            raise DestinationNameError(
                f"cannot copy {display(origin)} to {display(destination)}: {problem}; "
                "rename it at the source or exclude it (--exclude)", path=origin)

