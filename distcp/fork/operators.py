"""The fork operator decides, per file, which branches receive it (driver).

Seed 000's ForkOperator, as a pure function of planning: it sees the origin file
and its dataset, never the bytes, and answers one decision per branch. Built-ins:
``identity`` (every branch) and ``rules`` (each branch's Route); users register
their own in the entry-point group ``pydistcp.forks``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from fnmatch import fnmatchcase

from distcp.errors import PluginError
from distcp.fork.branches import Branch, Route
from distcp.model import CopyableFile
from distcp.registry import Registry


class ForkOperator(ABC):
    """Which branches receive a file. The number of branches is fixed before the run;
    ``branches_for`` must answer one bool per branch, in the branches' order."""

    def __init__(self, branches: Sequence[Branch]) -> None:
        self.branches = tuple(branches)

    @abstractmethod
    def branches_for(self, file: CopyableFile, relative: str) -> Sequence[bool]:
        """One decision per branch for ``file`` (``relative``: its path under its
        dataset's root, '/'-separated)."""


class IdentityOperator(ForkOperator):
    """Every branch receives every file (the default)."""

    def branches_for(self, file: CopyableFile, relative: str) -> Sequence[bool]:
        return [True] * len(self.branches)


class RulesOperator(ForkOperator):
    """Each branch receives what its Route admits (a branch without rules: everything)."""

    def branches_for(self, file: CopyableFile, relative: str) -> Sequence[bool]:
        return [admits(b.route, file, relative) for b in self.branches]


def admits(route: Route, file: CopyableFile, relative: str) -> bool:
    size = file.origin.size
    if route.min_size is not None and size < route.min_size:
        return False
    if route.max_size is not None and size > route.max_size:
        return False
    if route.datasets and not any(fnmatchcase(file.dataset_urn, g) for g in route.datasets):
        return False
    if route.globs:
        name = relative.rsplit("/", 1)[-1]
        return any(fnmatchcase(relative if "/" in g else name, g) for g in route.globs)
    return True


FORKS: Registry[ForkOperator] = Registry("forks", "distcp.fork.operators:ForkOperator")
FORKS.register("identity", "distcp.fork.operators:IdentityOperator")
FORKS.register("rules", "distcp.fork.operators:RulesOperator")


def operator_for(name: str, branches: Sequence[Branch]) -> ForkOperator:
    """The operator ``name`` names; unset: ``rules`` when a branch has a route, else
    ``identity``."""
    if not name:
        name = "rules" if any(not b.route.empty for b in branches) else "identity"
    cls = FORKS.get(name)
    if not (isinstance(cls, type) and issubclass(cls, ForkOperator)):
        raise PluginError(f"fork operator {name!r} is not a ForkOperator subclass", name=name)
    return cls(branches)


def decide(operator: ForkOperator, name: str, file: CopyableFile, relative: str
           ) -> tuple[bool, ...]:
    """The operator's decisions for ``file``, checked: one per branch, each a bool."""
    try:
        answer = tuple(bool(d) for d in operator.branches_for(file, relative))
    except Exception as exc:
        raise PluginError(f"fork operator {name!r} failed on {file.origin.url}: "
                          f"{type(exc).__name__}: {exc}", name=name) from exc
    if len(answer) != len(operator.branches):
        raise PluginError(f"fork operator {name!r} returned {len(answer)} decisions for "
                          f"{len(operator.branches)} branches", name=name)
    return answer
