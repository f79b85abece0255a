"""``distcp.state.bounds``: which paths a run may act on, judged as text."""

from __future__ import annotations

import pytest

from distcp.commit.steps import CommitSequence, CommitStep
from distcp.commit.catalog_steps import add_partitions_sql
from distcp.state.bounds import (
    DESTINATION,
    NAME,
    SOURCE,
    STATE,
    Bounds,
    canonical,
    inside,
    landing_in,
    protected_roots,
    source_roots,
)


@pytest.mark.parametrize(("url", "root", "expected"), [
    ("/d/a", "/d", True),
    ("/d", "/d", True),
    ("/d/", "/d", True),
    ("/dx/a", "/d", False),
    ("/d/../etc/passwd", "/d", False),
    ("/d/./a", "/d", True),
    ("/d//a", "/d", True),
    ("file:///d/a", "/d", True),
    ("s3://b/p/k", "s3://b/p", True),
    ("s3://b/pk", "s3://b/p", False),
    ("s3://b/p/../q", "s3://b/p", False),
    ("gs://b/p/k", "s3://b/p", False),
])
def test_inside(url: str, root: str, expected: bool) -> None:
    assert inside(url, root) is expected


def test_canonical_refuses_parent_components() -> None:
    assert canonical("/a/../b") is None
    assert canonical("s3://b/..") is None
    assert canonical("file:///a//b/") == "/a/b"


def test_protected_roots_are_the_state_root_and_the_default_one() -> None:
    assert protected_roots("/d", "/d/.pydistcp") == ("/d/.pydistcp",)
    assert protected_roots("/d", "/s") == ("/s", "/d/.pydistcp")
    assert protected_roots("s3://b/p/", "s3://b/p/.pydistcp") == ("s3://b/p/.pydistcp",)


def test_landing_in_catches_every_spelling() -> None:
    roots = protected_roots("/d", "/d/.pydistcp")
    for dest in ("/d/.pydistcp", "/d/.pydistcp/commits/x.json", "/d/./.pydistcp/x",
                 "/d//.pydistcp/x", "file:///d/.pydistcp/x"):
        assert landing_in(dest, roots) == "/d/.pydistcp", dest
    for dest in ("/d/a/.pydistcp/x", "/d/.pydistcpx", "/d/x/.pydistcp"):
        assert landing_in(dest, roots) is None, dest


def test_bounds_by_role() -> None:
    b = Bounds("/d", "/d/.pydistcp", ("/s",))
    assert b.allows(DESTINATION, "/d/x") and not b.allows(DESTINATION, "/d/.pydistcp/x")
    assert b.allows(STATE, "/d/.pydistcp/staging/j/1") and not b.allows(STATE, "/d/x")
    assert b.allows(SOURCE, "/s/a") and not b.allows(SOURCE, "/d/x")
    assert b.allows(NAME, "job-1") and not b.allows(NAME, "../x") and not b.allows(NAME, "..")
    assert not b.allows("unknown", "/d/x")
    assert Bounds("/d", "/d/.pydistcp", None).allows(SOURCE, "/s/a")  # recover: the step checks


def test_source_roots_stop_at_the_first_wildcard() -> None:
    assert source_roots(["/s/a", "/w/*/tables/*", "s3://b/p?/x"]) == ("/s/a", "/w", "s3://b")


def test_every_step_kind_says_what_it_acts_on() -> None:
    """A step kind without ``targets`` would be set aside on every replay."""
    import distcp.commit.log  # noqa: F401 - registers every kind

    for kind, cls in CommitStep._kinds.items():
        assert cls.targets is not CommitStep.targets, kind


def test_a_sequence_names_its_id_first() -> None:
    seq = CommitSequence.from_dict({"id": "j-1", "dataset_urn": "u", "file_set": "f",
                                    "steps": [{"kind": "mkdirs", "urls": ["/d/a"]}]})
    assert list(seq.targets({})) == [(NAME, "j-1"), (DESTINATION, "/d/a")]


def test_partition_columns_from_the_data_stay_identifiers() -> None:
    [sql] = add_partitions_sql("db.t`x", [((("a`) DROP TABLE t; --", "v'1"),), "/d/p")])
    assert "`a``) DROP TABLE t; --` = 'v\\'1'" in sql
    assert sql.startswith("ALTER TABLE `db`.`t``x` ADD")
