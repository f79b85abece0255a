"""Name -> plugin class, lazily imported, extensible through entry points (driver and executor).

Shaped after fsspec's registry: built-ins are "module:Class" strings so that
importing pydistcp imports no plugin, third parties register through the
``pydistcp.<family>`` entry-point group, and an unknown name lists the known ones.

This module names its families' base classes only as strings, never by import (not
even for types): the bases look their plugins up here, so an import of theirs would
close a loop. Each family's registry is typed where that family looks a name up
(``cls: type[Converter] = CONVERTERS.get(name)``).
"""

from __future__ import annotations

import importlib
from typing import Any, Generic, TypeVar

from distcp.errors import PluginError

T = TypeVar("T")


class Registry(Generic[T]):
    """Plugins of one family (finders, datasets, converters, publishers, checks)."""

    def __init__(self, family: str, base: str) -> None:
        self.family = family
        self.base = base
        self._targets: dict[str, type[T] | str] = {}
        self._entry_points_loaded = False

    def register(self, name: str, target: type[T] | str, *, clobber: bool = False) -> None:
        """Register ``target`` (a class or "module:Class") under ``name``."""
        if name in self._targets and not clobber and self._targets[name] != target:
            raise PluginError(
                f"{self.family} plugin {name!r} is already registered; pass clobber=True "
                "to replace it",
                name=name,
            )
        self._targets[name] = target

    def names(self) -> list[str]:
        self._load_entry_points()
        return sorted(self._targets)

    def get(self, name: str) -> type[T]:
        """The class registered under ``name``, importing it on first use. A built-in
        name never looks at the entry points (a plugin cannot replace one, and scanning
        every installed package's metadata cost a small run ~50 ms)."""
        if name not in self._targets:
            self._load_entry_points()
        if name not in self._targets:
            known = ", ".join(self.names()) or "none"
            raise PluginError(
                f"unknown {self.family} plugin {name!r}; known: {known}. Third-party "
                f"plugins register in the entry-point group 'pydistcp.{self.family}'",
                name=name,
            )
        target = self._targets[name]
        if isinstance(target, str):
            target = _import(target, self.family, name)
            self._targets[name] = target
        return target

    def _load_entry_points(self) -> None:
        if self._entry_points_loaded:
            return
        self._entry_points_loaded = True
        # imported here: importlib.metadata (and the email package it loads) cost every
        # run's start ~14 ms, and a run of built-in plugins only never needs it
        from importlib.metadata import entry_points

        for ep in entry_points(group=f"pydistcp.{self.family}"):
            self._targets.setdefault(ep.name, ep.value)


def _import(target: str, family: str, name: str) -> type:
    module_name, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)  # type: ignore[no-any-return]
    except (ImportError, AttributeError) as exc:
        raise PluginError(
            f"{family} plugin {name!r} ({target}) cannot be imported: {exc}; "
            "is the package that provides it installed?",
            name=name,
        ) from exc


FINDERS: Registry[Any] = Registry("finders", "distcp.finders.base:DatasetsFinder")
DATASETS: Registry[Any] = Registry("datasets", "distcp.datasets.base:CopyableDataset")
CONVERTERS: Registry[Any] = Registry("converters", "distcp.converters.base:Converter")
PUBLISHERS: Registry[Any] = Registry("publishers", "distcp.publishers.base:Publisher")
CHECKS: Registry[Any] = Registry("checks", "distcp.quality.base:QualityCheck")

# Built-in tables, kept sorted.
for _name, _target in (
    ("delta", "distcp.finders.delta:DeltaTablesFinder"),
    ("glob", "distcp.finders.glob:GlobDatasetsFinder"),
    ("iceberg", "distcp.finders.iceberg:IcebergTablesFinder"),
    ("single", "distcp.finders.single:SingleRootFinder"),
    ("stream", "distcp.finders.stream:StreamDatasetsFinder"),
):
    FINDERS.register(_name, _target)
for _name, _target in (
    ("bunzip2", "distcp.converters.codecs:Bunzip2Converter"),
    ("decrypt", "distcp.converters.gpg:DecryptConverter"),
    ("encrypt", "distcp.converters.gpg:EncryptConverter"),
    ("gunzip", "distcp.converters.codecs:GunzipConverter"),
    ("gzip", "distcp.converters.codecs:GzipConverter"),
    ("untar", "distcp.converters.untar:UntarConverter"),
    ("unxz", "distcp.converters.codecs:UnxzConverter"),
    ("unzip", "distcp.converters.unzip:UnzipConverter"),
):
    CONVERTERS.register(_name, _target)
for _name, _target in (
    ("gzip", "distcp.quality.builtin:Gzip"),
    ("max-size", "distcp.quality.builtin:MaxSize"),
    ("min-size", "distcp.quality.builtin:MinSize"),
    ("not-empty", "distcp.quality.builtin:NotEmpty"),
    ("parquet", "distcp.quality.builtin:Parquet"),
    ("schema", "distcp.quality.builtin:Schema"),
):
    CHECKS.register(_name, _target)
DATASETS.register("delta", "distcp.datasets.delta:DeltaDataset")
DATASETS.register("iceberg", "distcp.datasets.iceberg:IcebergDataset")
DATASETS.register("recursive", "distcp.datasets.recursive:RecursiveCopyableDataset")
DATASETS.register("stream", "distcp.datasets.stream:StreamDataset")
PUBLISHERS.register("rename", "distcp.publishers.rename:RenamePublisher")
