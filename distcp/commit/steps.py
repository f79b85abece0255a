"""Commit steps: the only code that touches final destinations (driver and executor).

After Gobblin's CommitStep: every step is idempotent and has ``verify()`` (is it
already done? judged from the target's observed state, never from memory) and
``execute()``. A CommitSequence runs its steps in order, skipping the verified
ones, so running it again after a crash finishes the job instead of redoing it.
Steps hold URLs and small values only, never storage options (which may hold
secrets): those arrive through the CommitContext.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

from distcp.errors import PublishError, StateError
from distcp.faults import crash_hook_or_none, crash_point
from distcp.state.bounds import DESTINATION, NAME, STATE, Bounds
from distcp.storage import Staged, Storage, parse_staged, storage_for
from distcp.storage import filesystems as fsutil
from distcp.storage import writes as writeopts
from distcp.storage.staging import StagedFile
from distcp.storage.writes import WriteOptions


@dataclass(frozen=True)
class CommitContext:
    """What steps need at run time but must never be persisted."""

    dst_options: dict[str, Any] = field(default_factory=dict, repr=False)
    state_root: str = ""
    #: The sources' storage options (``move`` deletes sources); from the run, never the log.
    src_options: dict[str, Any] = field(default_factory=dict, repr=False)
    #: Dataset states read or written in this run (this process is their only writer
    #: while it runs), so steps of one sequence do not re-read a large manifest.
    state_cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    #: The run's Spark session, opened on first call (catalog steps); None where a
    #: command has no session to offer (``recover``): such steps then stay pending.
    spark: Callable[[], Any] | None = field(default=None, repr=False, compare=False)
    #: The run's event sink (``distcp.events.sinks.EventSink``: ``--events``); None: the
    #: default target under the state root.
    events: Any = field(default=None, repr=False, compare=False)
    #: ``--publishing``: carries out a per-file step on the executors and says True, or
    #: says False and leaves it to this process (``distcp.spark.publish``); None: this
    #: process does every step (``recover``, which has no Spark).
    fan_out: Callable[[CommitStep, CommitContext], bool] | None = field(
        default=None, repr=False, compare=False)
    #: The roots this run may act in (``distcp.state.bounds``): every record read back
    #: from the commit log is checked against them before any of its steps runs.
    bounds: Bounds | None = field(default=None, compare=False)
    #: Dataset states changed by the running sequence's state steps and not saved yet,
    #: by URN: their saves, done once when a step of another kind comes (or the sequence
    #: ends), so that one file set's manifest, watermark and run record cost one write
    #: of its document. None: each state step saves its own change.
    unsaved: dict[str, Callable[[], None]] | None = field(
        default=None, repr=False, compare=False)

    def storage(self, url: str) -> Storage:
        """The storage serving ``url`` (the destination's options)."""
        return storage_for(url, self.dst_options)

    def source_storage(self, url: str) -> Storage:
        """A source's storage (``move`` deletes sources): the run's source options."""
        return storage_for(url, self.src_options)


class CommitStep(ABC):
    """One idempotent action of a publish; serialisable by its ``kind``."""

    kind: ClassVar[str] = ""
    #: The field holding one independent entry per file, for a step that executors may
    #: carry out in pieces (``distcp.commit.fanout``); "" for a step done as a whole.
    per_file: ClassVar[str] = ""
    #: Entries a piece holds at least (0: ``distcp.commit.fanout.MIN_PIECE``); a step
    #: whose entry stands for many files sets 1.
    min_piece: ClassVar[int] = 0
    #: A change to a dataset's state that may be saved with the state steps next to it
    #: (``CommitContext.unsaved``): one document write for them all.
    changes_state: ClassVar[bool] = False
    #: Its effect cannot be there before the sequence's first run: it is named after
    #: its sequence (the event record, ``events/<id>.json``), or made of what this run
    #: just staged (``PublishKept``). A sequence this run has just written to the log
    #: (``CommitSequence.run``'s ``fresh``) skips its verify, a read that is a round
    #: trip on an object store. A replay still verifies it.
    new_until_run: ClassVar[bool] = False
    _kinds: ClassVar[dict[str, type[CommitStep]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.kind:
            CommitStep._kinds[cls.kind] = cls

    @abstractmethod
    def verify(self, ctx: CommitContext) -> bool:
        """True when the step's effect is already visible at the target."""

    @abstractmethod
    def execute(self, ctx: CommitContext) -> None:
        """Make the effect happen; safe to call again after a partial run."""

    def file_count(self) -> int:
        """The files the step's per-file entries stand for (0: a step done as a whole)."""
        return len(getattr(self, self.per_file)) if self.per_file else 0

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        """Every path the step acts on, with its role (``distcp.state.bounds``:
        destination, state or source), so that a record read back from the commit log
        is checked against the run's roots before anything acts on it. A step kind
        that does not say acts on something unknown: its records are set aside."""
        yield "unknown", self.kind

    def staged_files(self, options: dict[str, Any]) -> Iterator[StagedFile]:
        """The staged copies the step publishes (none by default): a replay that fails
        asks whether one of them is gone, which no later replay could mend."""
        return iter(())

    def upload_ids(self, options: dict[str, Any]) -> Iterator[str]:
        """The staged multipart uploads the step completes: while the step is pending,
        an orphan sweep must leave them (``distcp.commit.orphans``). None by default."""
        return iter(())

    def works_on(self, ctx: CommitContext) -> Storage:
        """The storage a per-file step changes (its capabilities say whether executors
        should carry it out): by default that of the first entry's final URL."""
        return ctx.storage(str(getattr(self, self.per_file)[0][1]))

    def to_dict(self) -> dict[str, Any]:
        """The step's fields as they are (tuples of plain values, which ``json`` writes
        as lists): no deep copy, so a file set of a million files is not held twice."""
        return {"kind": self.kind, **{f.name: getattr(self, f.name)
                                      for f in fields(self)}}  # type: ignore[arg-type]

    @staticmethod
    def from_dict(data: dict[str, Any]) -> CommitStep:
        data = dict(data)
        kind = data.pop("kind", None)
        cls = CommitStep._kinds.get(kind or "")
        if cls is None:
            raise StateError(f"unknown commit step kind {kind!r}")
        return cls(**{k: _tuples(v) for k, v in data.items()})


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


@dataclass(frozen=True)
class CommitSequence:
    """The ordered steps that publish one file set of one dataset."""

    dataset_urn: str
    file_set: str
    steps: tuple[CommitStep, ...]
    id: str = ""
    #: What the data objects are created with (``--storage-class``...), as the run that
    #: planned the set gave them; recorded with it (``CommitStepStore.persist``), so a
    #: replay by another run or by ``recover``, which has no such flags, publishes the
    #: objects as they were meant to be. None: not recorded yet (the planning run's own
    #: options apply).
    writes: WriteOptions | None = field(default=None, compare=False)

    def run(self, ctx: CommitContext, fresh: bool = False) -> None:
        """Run every step not yet verified done; a failing step raises PublishError.

        The crash points ``before_step`` and ``after_step`` (see ``faults``) bracket
        each step so the tests can kill the process at every commit boundary. A
        per-file step may be carried out by the executors (``ctx.fan_out``).
        ``fresh``: the sequence was written to the log by this run, just before, and
        has not run yet (``CommitStep.new_until_run``).
        """
        if self.writes is not None:  # requester pays stays this run's (it reads and pays)
            kept = replace(self.writes,
                           requester_pays=writeopts.of(ctx.dst_options).requester_pays)
            ctx = replace(ctx, dst_options=writeopts.carrying(ctx.dst_options, kept))
        unsaved: dict[str, Callable[[], None]] = {}
        ctx = replace(ctx, unsaved=unsaved)
        try:
            for step in self.steps:
                if not step.changes_state:
                    self._save(unsaved)
                crash_point("before_step")
                with self._failing(step.kind):
                    if ctx.fan_out is not None and ctx.fan_out(step, ctx):
                        pass  # the executors verified and executed it, piece by piece
                    elif (fresh and step.new_until_run) or not step.verify(ctx):
                        step.execute(ctx)
                crash_point("after_step")
        except Exception:
            self._save(unsaved)  # what the steps before it changed
            raise
        self._save(unsaved)

    def _save(self, unsaved: dict[str, Callable[[], None]]) -> None:
        with self._failing("dataset state"):
            save_changed(unsaved)

    @contextmanager
    def _failing(self, kind: str) -> Iterator[None]:
        """An OSError as the PublishError that names the set and what failed."""
        try:
            yield
        except (PublishError, StateError):
            raise
        except OSError as exc:
            raise PublishError(
                f"cannot publish {fsutil.display(self.dataset_urn)} ({self.file_set}): "
                f"{kind} failed: {exc}", file_set=self.file_set) from exc

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        """Every path its steps act on (``CommitStep.targets``), and its own id, which
        names its log entry."""
        yield NAME, self.id
        for step in self.steps:
            yield from step.targets(options)

    def to_dict(self) -> dict[str, Any]:
        written = writeopts.to_record(self.writes) if self.writes is not None else {}
        return {"id": self.id, "dataset_urn": self.dataset_urn, "file_set": self.file_set,
                **({"writes": written} if written else {}),
                "steps": [s.to_dict() for s in self.steps]}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> CommitSequence:
        return CommitSequence(data["dataset_urn"], data["file_set"],
                              tuple(CommitStep.from_dict(s) for s in data["steps"]), data["id"],
                              writeopts.from_record(data.get("writes")))


def save_changed(unsaved: dict[str, Callable[[], None]] | None) -> None:
    """Save the dataset states changed and not saved yet (``CommitContext.unsaved``),
    each with its steps' markers in the same write: a crash before it leaves them all
    to the replay."""
    while unsaved:
        unsaved.pop(next(iter(unsaved)))()


@dataclass(frozen=True)
class MakeDirectories(CommitStep):
    """Create final directories (parents of published files and empty source dirs)."""

    kind: ClassVar[str] = "mkdirs"
    urls: tuple[str, ...]

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        return ((DESTINATION, u) for u in self.urls)

    def verify(self, ctx: CommitContext) -> bool:
        return all(_isdir(ctx, u) for u in self.urls)

    def execute(self, ctx: CommitContext) -> None:
        for url in self.urls:
            ctx.storage(url).makedirs(url)


@dataclass(frozen=True)
class PublishFiles(CommitStep):
    """Move staged files to their final paths (a rename where the filesystem has one).

    ``moves`` are (staging URL, final URL, size). A move is done when its staging
    copy is gone and the final path has the staged size.
    """

    kind: ClassVar[str] = "publish"
    per_file: ClassVar[str] = "moves"
    moves: tuple[tuple[str, str, int], ...]

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        for staging, final, _ in self.moves:
            yield staged_target(staging)
            yield DESTINATION, final

    def verify(self, ctx: CommitContext) -> bool:
        if not self.moves:
            return True
        return ctx.storage(self.moves[0][1]).all_published(self._files())

    def execute(self, ctx: CommitContext) -> None:
        if not self.moves:
            return
        ctx.storage(self.moves[0][0]).publish_all(
            self._files(), crash_hook_or_none("mid_publish"))

    def staged_files(self, options: dict[str, Any]) -> Iterator[StagedFile]:
        return iter(self._files())

    def _files(self) -> tuple[StagedFile, ...]:
        return moved_files(self.moves)


def moved_files(moves: Iterable[tuple[str, str, int]]) -> tuple[StagedFile, ...]:
    """The staged files of ``PublishFiles``' moves (staging URL, final URL, size)."""
    return tuple(StagedFile(Staged.path(staging), final, size) for staging, final, size in moves)


@dataclass(frozen=True)
class SetAttributes(CommitStep):
    """Set mode and mtime of final directories, deepest first (publishing bumps mtimes)."""

    kind: ClassVar[str] = "attributes"
    entries: tuple[tuple[str, int | None, float | None], ...]

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        return ((DESTINATION, e[0]) for e in self.entries)

    def verify(self, ctx: CommitContext) -> bool:
        """Done when every directory already has its mode and mtime (a stat each);
        judged from the target, so a replay after the step ran leaves them alone."""
        return all(_has_attributes(ctx, *entry) for entry in self.entries)

    def execute(self, ctx: CommitContext) -> None:
        for url, mode, mtime in sorted(self.entries, key=lambda e: -e[0].count("/")):
            ctx.storage(url).set_attributes(url, mode, mtime)


@dataclass(frozen=True)
class SetOwners(CommitStep):
    """Give directories the owner and group of ``--chown`` (files get theirs staged)."""

    kind: ClassVar[str] = "owners"
    entries: tuple[tuple[str, str | None, str | None], ...]

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        return ((DESTINATION, e[0]) for e in self.entries)

    def verify(self, ctx: CommitContext) -> bool:
        return all(ctx.storage(url).has_owner(url, owner, group)
                   for url, owner, group in self.entries)

    def execute(self, ctx: CommitContext) -> None:
        for url, owner, group in self.entries:
            ctx.storage(url).set_owner(url, owner, group)


@dataclass(frozen=True)
class DeletePaths(CommitStep):
    """Remove destination entries that the source no longer has (``--delete``)."""

    kind: ClassVar[str] = "delete"
    urls: tuple[str, ...]

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        return ((DESTINATION, u) for u in self.urls)

    def verify(self, ctx: CommitContext) -> bool:
        return not any(_exists(ctx, u) for u in self.urls)

    def execute(self, ctx: CommitContext) -> None:
        for url in self.urls:  # deepest first; a link itself, never what it points to
            ctx.storage(url).remove(url)


@dataclass(frozen=True)
class RemoveStaging(DeletePaths):
    """Remove staging or recovery entries once everything in them is published
    (a delete under its own name, so a commit log reads as what it does)."""

    kind: ClassVar[str] = "remove-staging"

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        return ((STATE, u) for u in self.urls)


def staged_target(staging: str) -> tuple[str, str]:
    """A staged output's place and role: a staging file lives under the state root;
    a staged upload, an empty file or a published output is named by its final URL."""
    try:
        staged = parse_staged(staging)
    except ValueError:
        return "unknown", staging
    return (STATE if staged.needs_rename else DESTINATION), staged.location


def _has_attributes(ctx: CommitContext, url: str, mode: int | None,
                    mtime: float | None) -> bool:
    return ctx.storage(url).has_attributes(url, mode, mtime)


def _exists(ctx: CommitContext, url: str) -> bool:
    return ctx.storage(url).exists(url)


def _isdir(ctx: CommitContext, url: str) -> bool:
    return ctx.storage(url).isdir(url)
