"""Dataset names in events follow OpenLineage's naming spec, one storage per namespace."""

from __future__ import annotations

import pytest

from distcp.events.naming import dataset_name


@pytest.mark.parametrize(("url", "expected"), [
    ("s3://bucket/a/b", ("s3://bucket", "a/b")),
    ("gs://bucket/a", ("gs://bucket", "a")),
    ("az://container/a/b", ("abfs://container", "a/b")),  # adlfs's two names: one dataset
    ("abfs://container/a/b", ("abfs://container", "a/b")),
    # the part before @ is Azure's container, not a user: it stays in the namespace
    ("abfs://data@acct.dfs.core.windows.net/t/x", ("abfs://data@acct.dfs.core.windows.net",
                                                   "t/x")),
    ("abfss://data@acct.dfs.core.windows.net/", ("abfss://data@acct.dfs.core.windows.net",
                                                 "/")),
    ("ftp://user:secret@host:2121/in", ("ftp://host:2121", "/in")),
])
def test_each_store_has_its_namespace_and_name(url: str, expected: tuple[str, str]) -> None:
    assert dataset_name(url) == expected


def test_no_password_reaches_a_name() -> None:
    assert "secret" not in "".join(dataset_name("abfs://c:secret@acct.dfs.core.windows.net/x"))
