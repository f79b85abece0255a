"""Frozen values made and pickled cheaply (driver and executor).

The values that travel per file (``distcp.model``'s FileStatus, CopyableFile and
TaskResult; a plan's Action; a staged file) are frozen, slotted dataclasses: immutable
and small. Two costs of that form are paid per file, a million times in a big run:
a frozen dataclass's ``__init__`` stores each field through ``object.__setattr__``, and
a slotted one pickles through ``dataclasses.fields()``. The decorators here take both
away and keep what the dataclass promises.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from operator import attrgetter
from typing import Any, TypeVar

T = TypeVar("T")


def pickled_as_arguments(cls: type[T]) -> type[T]:
    """Pickle ``cls`` as a call with its field values, read in one C call.

    A slotted dataclass pickles through ``__getstate__``/``__setstate__``, which ask
    ``dataclasses.fields()`` once per object: for a million files that is seconds on
    the driver (units out, results back) and in the tasks. Here a CopyableFile pickles
    in 4.1 µs instead of 7.9 and loads in 5.7 instead of 8.4 (a TaskResult: 2.2 and 3.8
    instead of 5.2 and 6.8). Every field is an ``__init__`` argument in these classes,
    in field order. A subclass's object (``planning.plan.Expansions``, a FileStatus)
    pickles as a call of its own class with all its fields, not as a ``cls`` without
    the subclass's.
    """
    values = attrgetter(*(f.name for f in fields(cls)))  # type: ignore[arg-type]

    def __reduce__(self: Any) -> tuple[Any, tuple[Any, ...]]:
        if type(self) is not cls:
            return type(self), tuple(getattr(self, f.name) for f in fields(self))
        return cls, values(self)

    cls.__reduce__ = __reduce__  # type: ignore[method-assign]
    return cls


def built_by_plain_stores(cls: type[T]) -> type[T]:
    """Give frozen, slotted ``cls`` an ``__init__`` that stores its fields as a mutable
    object's would, then makes the object ``cls``: frozen from then on.

    A frozen dataclass's own ``__init__`` stores each field through
    ``object.__setattr__`` (its ``__setattr__`` refuses), about 0.2 µs a field here: a
    TaskResult of 26 fields took 5.6 µs to make, and every file a task copies makes a
    FileStatus, a CopyableFile (unpickled from its chunk) and a TaskResult. This one
    makes the object an instance of a plain class of the same slots (so ``__class__``
    may change between them), stores each field as a plain attribute, and changes the
    class back: 2.1 µs instead of 7.7 for that TaskResult (Intel Xeon, 2026-12-02).
    Equality, hashing, ``replace``, pickling and the refusal to set a field are the
    dataclass's own; the signature and defaults are the ones it generated.
    """
    every = fields(cls)  # type: ignore[arg-type]
    odd = [f.name for f in every if not f.init or f.default_factory is not MISSING]
    if odd or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: only plain fields are stored plainly (no default "
                        f"factory, no __post_init__): {', '.join(odd) or '__post_init__'}")
    names = [f.name for f in every]
    plain = type(f"_{cls.__name__}Slots", (), {"__slots__": tuple(names)})
    scope: dict[str, Any] = {"_set": object.__setattr__, "_plain": plain, "_cls": cls}
    params = []
    for f in every:
        if f.default is MISSING:
            params.append(f.name)
        else:
            scope[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
    lines = [f"def __init__(self, {', '.join(params)}):", "    _set(self, '__class__', _plain)"]
    lines += [f"    self.{name} = {name}" for name in names]
    lines += ["    self.__class__ = _cls"]
    exec("\n".join(lines), scope)  # noqa: S102 - the source is built from field names only
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
