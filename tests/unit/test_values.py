"""Frozen values made and pickled cheaply (``distcp.values``) keep what a frozen
dataclass promises: the values of every stage that are made once a file."""

from __future__ import annotations

import pickle
from dataclasses import FrozenInstanceError, dataclass, field, fields, replace

import pytest

from distcp.model import CopyableFile, FileStatus
from distcp.planning.plan import Action
from distcp.storage.staged import Staged
from distcp.storage.staging import StagedFile
from distcp.values import built_by_plain_stores
from tests.unit.test_model import VALUES as MODEL_VALUES

FILE = CopyableFile(FileStatus("/s/a", 3, 1.5), "/d/a", "urn:x", "all")
VALUES = [
    *MODEL_VALUES,
    Staged.path("/d/.pydistcp/staging/u0-a0/d0/a"),
    Staged.upload("id:with:colons", "s3://b/k"),
    StagedFile(Staged.path("/stage/a"), "/d/a", 3),
    StagedFile(Staged.upload("u", "s3://b/k"), "s3://b/k", 9, ((1, "etag", 9),)),
    Action(FILE, "missing"),
    Action(FILE, "contents", FileStatus("/d/a", 3, 2.5)),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_values_made_by_plain_stores_are_frozen_values(value: object) -> None:
    """``__init__`` stores the fields plainly and then makes the object its class:
    the object is of that class, frozen, equal and hashed as the dataclass says."""
    names = [f.name for f in fields(value)]  # type: ignore[arg-type]
    made = type(value)(**{n: getattr(value, n) for n in names})
    assert type(made) is type(value) and made == value and hash(made) == hash(value)
    assert pickle.loads(pickle.dumps(made)) == value
    with pytest.raises(FrozenInstanceError):
        setattr(made, names[0], getattr(value, names[0]))
    assert replace(made) == value  # type: ignore[type-var]
    assert not hasattr(made, "__dict__")


def test_a_default_is_the_dataclass_default() -> None:
    assert StagedFile(Staged.path("/a"), "/b", 1).parts == ()
    assert Action(FILE, "missing").existing is None
    assert Staged.path("/a").upload_id == ""


def test_only_plain_fields_are_stored_plainly() -> None:
    """A default factory or a ``__post_init__`` would be skipped: refused at import."""
    with pytest.raises(TypeError, match="only plain fields"):
        @built_by_plain_stores
        @dataclass(frozen=True, slots=True)
        class WithFactory:
            items: list[int] = field(default_factory=list)
    with pytest.raises(TypeError, match="only plain fields"):
        @built_by_plain_stores
        @dataclass(frozen=True, slots=True)
        class Checked:
            n: int

            def __post_init__(self) -> None:
                pass


def test_a_subclass_of_a_value_pickled_as_arguments_keeps_its_own_fields() -> None:
    from distcp.planning.plan import Expansions

    folder = Expansions("/dst/x/", 0, 1.0, is_dir=True, guids=frozenset({"g1", "g2"}))
    back = pickle.loads(pickle.dumps(folder))
    assert type(back) is Expansions and back == folder and back.guids == {"g1", "g2"}
    plain = FileStatus("/dst/y", 3, 2.0)
    assert type(pickle.loads(pickle.dumps(plain))) is FileStatus
