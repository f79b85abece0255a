"""Which runs ask the store to copy (server-side), decided once on the driver.

A server-side copy needs one store on both sides: the same options (endpoint,
credentials) and no URL naming another account. Azure's ``abfs://`` URLs can name the
account themselves; two accounts with the same options are two stores (the copy would
be refused by the service, or read with the wrong key).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from distcp.configuration import CopyConfiguration
from distcp.run.branch import _server_side, task_spec
from distcp.storage.azure.blobs import account_in
from distcp.storage.spec import StorageSpec

pytest.importorskip("adlfs")

HOST = "dfs.core.windows.net"


def test_the_account_an_abfs_url_names_is_read_from_its_host() -> None:
    assert account_in(f"abfs://data@Prod.{HOST}/tables/x") == "prod"
    assert account_in("abfs://data/tables/x") == ""
    assert account_in("az://data/tables/x") == ""


@pytest.mark.parametrize(("src", "dst", "expected"), [
    (f"abfs://a@one.{HOST}/x", f"abfs://b@one.{HOST}/y", True),
    (f"abfs://a@one.{HOST}/x", f"abfs://b@two.{HOST}/y", False),
    ("az://a/x", f"abfs://b@two.{HOST}/y", False),
    ("az://a/x", "az://b/y", True),
])
def test_azure_copies_server_side_only_within_one_account(src: str, dst: str,
                                                          expected: bool) -> None:
    options = {"account_name": "one", "account_key": "a2V5"}
    cfg = CopyConfiguration((src,), dst, src_options=options, dst_options=options)
    assert _server_side(cfg, StorageSpec(dst, "azure", options)) is expected


def test_other_options_or_a_converter_never_copy_server_side() -> None:
    options = {"account_name": "one", "account_key": "a2V5"}
    spec = StorageSpec("az://b/y", "azure", options)
    other = CopyConfiguration(("az://a/x",), "az://b/y", src_options={"account_name": "two"},
                              dst_options=options)
    assert _server_side(other, spec) is False
    converted = CopyConfiguration(("az://a/x",), "az://b/y", src_options=options,
                                  dst_options=options, converters=("gunzip",))
    assert _server_side(converted, spec) is False


@pytest.mark.parametrize(("url", "ranges"), [("gs://b/y", False), ("s3://b/y", True),
                                             ("az://b/y", True)])
def test_whether_ranges_are_copied_by_the_store_is_asked_once_on_the_driver(
        url: str, ranges: bool, tmp_path: Path) -> None:
    """GCS rewrites whole objects only: a split file's ranges are sent through the
    tasks from the start, no range asks the store first (a failed call each)."""
    pytest.importorskip("gcsfs")
    options = {"az": {"account_name": "one", "account_key": "a2V5"}, "gs": {"token": "anon"},
               "s3": {}}[url[:2]]  # no credentials to look for: nothing is sent
    cfg = CopyConfiguration((url.replace("/y", "/x"),), url, src_options=options,
                            dst_options=options)
    backend = {"gs": "gcs", "s3": "object", "az": "azure"}[url[:2]]
    spec = task_spec(cfg, "job", str(tmp_path / "state"), StorageSpec(url, backend, options))
    assert spec.server_side and spec.server_side_ranges is ranges
