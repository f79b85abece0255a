"""What a fork run is made of: its branches and the fork's own settings (driver).

Each branch is a whole copy configuration. Built from ``--fork`` flags or from a job
file's ``[[branches]]``; both give the same values, so the driver knows one model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Literal

from distcp.configuration import CopyConfiguration
from distcp.errors import ConfigurationError
from distcp.storage import filesystems as fsutil

ForkPolicy = Literal["all", "independent"]


@dataclass(frozen=True)
class Route:
    """A branch's routing rule (the ``rules`` operator): which files it receives.
    Empty: every file. Globs match the path under the dataset root, or the file name
    when they hold no '/'; ``datasets`` globs match the dataset's URN."""

    globs: tuple[str, ...] = ()
    min_size: int | None = None
    max_size: int | None = None
    datasets: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return self == Route()


@dataclass(frozen=True)
class Branch:
    """One destination of the fork, with everything that is per branch: its converters,
    attributes, storage options and quality checks live in ``cfg``."""

    name: str
    cfg: CopyConfiguration
    route: Route = field(default_factory=Route)


@dataclass(frozen=True)
class ForkSettings:
    """The fork's run-wide settings (``--fork-policy``, ``--fork-operator``, queues)."""

    policy: ForkPolicy = "all"
    operator: str = ""
    #: Chunks (of up to 1 MiB) one branch's queue holds: the memory bound per branch.
    queue: int = 4
    #: Seconds a branch may leave its queue full before it is failed.
    queue_timeout: float = 600.0


def settings_of(cfg: CopyConfiguration) -> ForkSettings:
    return ForkSettings(policy=cfg.fork_policy, operator=cfg.fork_operator,  # type: ignore[arg-type]
                        queue=cfg.fork_queue, queue_timeout=cfg.fork_queue_timeout)


def branch_name(index: int) -> str:
    return f"fork_{index}"


def branches_of(cfg: CopyConfiguration) -> tuple[Branch, ...]:
    """``pydistcp copy SRC DST --fork DST2 ...``: DST is ``fork_0``, each --fork the next;
    a fork's converters come from ``--fork-convert N=CHAIN`` (none by default) and it
    has no ``--check`` (DST's, like --convert, fit DST's outputs). Its
    storage options are DST's where it is on the same kind of filesystem as DST."""
    chains = fork_chains(cfg.fork_convert, len(cfg.fork))
    main_kind = _scheme(cfg.destination)
    out = [Branch(branch_name(0), replace(cfg, fork=(), fork_convert=()))]
    for n, destination in enumerate(cfg.fork, 1):
        same_kind = _scheme(destination) == main_kind
        out.append(Branch(branch_name(n), replace(
            cfg, destination=destination, fork=(), fork_convert=(),
            converters=chains.get(n, ()), check=(),
            dst_options=cfg.dst_options if same_kind else {})))
    return tuple(out)


def fork_chains(specs: tuple[str, ...], forks: int) -> dict[int, tuple[str, ...]]:
    """``--fork-convert 1=decrypt,gunzip``: the chain of the first --fork, by position."""
    chains: dict[int, tuple[str, ...]] = {}
    for spec in specs:
        index, sep, names = spec.partition("=")
        if not sep or not index.strip().isdigit():
            raise ConfigurationError(f"--fork-convert {spec!r}: expected N=CHAIN, e.g. "
                                     "1=decrypt,gunzip (N: the --fork's position, from 1)")
        n = int(index)
        if not 1 <= n <= forks:
            raise ConfigurationError(f"--fork-convert {spec!r}: there is no --fork number {n} "
                                     f"(the run has {forks})")
        chains[n] = tuple(c.strip() for c in names.split(",") if c.strip())
    return chains


def check_branches(branches: tuple[Branch, ...]) -> None:
    """Names unique and destinations apart: two branches writing one place would
    publish over each other."""
    names = [b.name for b in branches]
    for n, name in enumerate(names):
        if name in names[:n]:
            raise ConfigurationError(f"fork branch name {name!r} is used twice")
    roots = [(_root(b.cfg.destination), b.name) for b in branches]
    for n, (root, name) in enumerate(roots):
        for other, other_name in roots[:n]:
            if root == other or root.startswith(other + "/") or other.startswith(root + "/"):
                raise ConfigurationError(
                    f"fork branches {other_name!r} and {name!r} write to overlapping "
                    f"destinations ({fsutil.display(other)}, {fsutil.display(root)}); each "
                    "branch needs a destination of its own")
    for b in branches:
        if b.cfg.move:
            raise ConfigurationError("move does not work with --fork or several branches yet: "
                                     "a source deleted after one branch published could be "
                                     "missing for another; copy, then move one branch")
        if b.cfg.split_size:
            raise ConfigurationError(f"fork branch {b.name!r}: --split-size does not work "
                                     "with --fork yet (each file is read once, whole)")
        if b.cfg.visibility == "file":
            raise ConfigurationError(f"fork branch {b.name!r}: --visibility file does not "
                                     "work with --fork (a branch publishes with its file set)")


def _root(url: str) -> str:
    """A destination as compared for overlap: a local one as an absolute path."""
    local = fsutil.local_path(url)
    return os.path.abspath(local) if local is not None else url.rstrip("/")


def _scheme(url: str) -> str:
    """The URL's filesystem kind, without building a filesystem (FTP would connect)."""
    return "file" if fsutil.local_path(url) is not None else url.split("://", 1)[0]
