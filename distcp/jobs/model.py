"""A loaded job: datasets, branches, run settings and storage options, as values (driver).

A job of one branch runs exactly as ``pydistcp copy`` does: ``copy_arguments`` gives
``distcp.copy`` its sources, destination and keywords, and ``distcp.copy`` builds the
CopyConfiguration (one model, one set of defaults: a key the file leaves out is a
keyword not passed). A job of several branches is a fork (``distcp.run.forkjob``): each
branch's configuration is built the same way, from ``copy_arguments(branch)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from distcp.options import COMPARE_FLAGS

#: A branch's routing keys (the fork's rules operator), not copy settings.
ROUTE_KEYS = ("route_glob", "route_min_size", "route_max_size", "route_dataset")
#: Storage tables that apply to one side rather than to a filesystem.
SIDES = ("source", "destination")
#: The keys that choose how DST is compared: a flag for one of them replaces the file's.
_COMPARE_KEYS = ("overwrite", *COMPARE_FLAGS)


@dataclass(frozen=True)
class Dataset:
    """What one ``[[datasets]]`` table reads: its source and the finder's options."""

    source: str
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Branch:
    """Where one ``[[branches]]`` table writes, and how (converters, attributes).
    ``options`` may hold a resolved passphrase: kept out of repr."""

    name: str
    destination: str
    options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    publisher: str = "rename"


@dataclass(frozen=True)
class StorageRule:
    """``[storage."PREFIX"]``: fsspec options for every URL under PREFIX (or, for
    ``source``/``destination``, every URL of that side). Secrets resolved: no repr."""

    prefix: str
    options: Mapping[str, Any] = field(repr=False)

    def applies_to(self, url: str, side: str) -> bool:
        if self.prefix in SIDES:
            return self.prefix == side
        base = self.prefix.rstrip("/")
        return url == base or url.startswith(base + "/") or (
            self.prefix.endswith("://") and url.startswith(self.prefix))


@dataclass(frozen=True)
class Job:
    """One job file, validated and with its references resolved (``settings`` may hold a
    Spark setting's secret: kept out of repr, as the storage options are)."""

    path: str
    datasets: tuple[Dataset, ...]
    branches: tuple[Branch, ...]
    settings: Mapping[str, Any] = field(default_factory=dict, repr=False)
    storage: tuple[StorageRule, ...] = field(default=(), repr=False)

    def with_overrides(self, overrides: Mapping[str, Any]) -> Job:
        """The job with command-line settings winning over the file's; a comparison
        flag replaces the file's comparison, and ``conf`` merges key by key."""
        settings = dict(self.settings)
        if any(overrides.get(k) for k in _COMPARE_KEYS):
            for key in _COMPARE_KEYS:
                settings.pop(key, None)
        for key, value in overrides.items():
            if key == "conf":
                value = {**settings.get("conf", {}), **value}
            settings[key] = value
        return replace(self, settings=settings)

    def storage_options(self, url: str, side: str) -> dict[str, Any]:
        """The options for ``url``: the side's table, then every matching prefix, the
        longest last (a bucket's options win over its scheme's)."""
        rules = sorted((r for r in self.storage if r.applies_to(url, side)),
                       key=lambda r: (r.prefix not in SIDES, len(r.prefix)))
        merged: dict[str, Any] = {}
        for rule in rules:
            merged.update(rule.options)
        return merged

    def copy_arguments(self, branch: int = 0) -> tuple[list[str], str, dict[str, Any]]:
        """(sources, destination, keywords) of ``distcp.copy`` for one branch."""
        chosen = self.branches[branch]
        sources = [d.source for d in self.datasets]
        options: dict[str, Any] = {**self.settings, **self.datasets[0].options,
                                   **{k: v for k, v in chosen.options.items()
                                      if k not in ROUTE_KEYS}}
        if "no_progress" in options:
            options["progress"] = not options.pop("no_progress")
        options["src_options"] = self.storage_options(sources[0], "source")
        options["dst_options"] = self.storage_options(chosen.destination, "destination")
        return sources, chosen.destination, options
