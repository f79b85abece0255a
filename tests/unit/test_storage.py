"""The storage seam without servers: values that travel, choices made once, local disk."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from typing import Any
from pathlib import Path

import pytest
from pyspark import cloudpickle

from distcp.copying.taskspec import TaskSpec
from distcp.storage import Staged, StagedKind, StorageSpec, parse_staged, spec_for, storage_for
from distcp.storage.spec import backend_class
from distcp.storage.staged import is_path


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps])
def test_specs_and_staged_values_survive_the_trip_to_executors(
        dumps: Callable[[object], bytes]) -> None:
    spec = StorageSpec("s3://b/k", "object", {"secret": "S3CRET"})
    task = TaskSpec(job_id="j", staging_root="/s", progress_root="/p", dst=spec)
    for value in (spec, Staged.upload("u1", "s3://b/k/x"), Staged.path("/st/a"), task):
        again = pickle.loads(dumps(value))
        assert again == value
    back = pickle.loads(dumps(task))
    assert back.dst.options == {"secret": "S3CRET"} and back.dst.capabilities.multipart
    assert "S3CRET" not in repr(spec) and "S3CRET" not in repr(task)


def test_each_url_gets_the_backend_of_its_kind() -> None:
    assert spec_for("/data/out").backend == "local"
    assert spec_for("file:///data/out").backend == "local"
    assert spec_for("s3://bucket/out", {"anon": True}).backend == "object"
    assert spec_for("memory://out").backend == "fsspec"
    # no filesystem built (none could be, without an Azure account in the environment)
    assert spec_for("az://container/out").backend == "azure"
    assert spec_for("abfs://container@account.dfs.core.windows.net/out").backend == "azure"


def test_capabilities_answer_the_engines_questions() -> None:
    local = backend_class("local").capabilities
    objects = backend_class("object").capabilities
    other = backend_class("fsspec").capabilities
    assert local.offset_writes and local.local_paths and local.symlinks and local.mtimes
    assert objects.multipart and objects.server_side_copy and not objects.directories
    assert other.joins_parts and not local.joins_parts and not objects.joins_parts
    assert other.directories and not other.local_paths and not other.multipart
    azure = backend_class("azure").capabilities
    assert azure.multipart and azure.server_side_copy and azure.conditional_reads
    assert azure.exclusive_create
    assert not azure.directories and not azure.joins_parts
    with pytest.raises(LookupError, match="unknown storage backend 'nfs'; known: azure, fsspec"):
        backend_class("nfs")


def test_one_storage_per_backend_and_options_in_a_process() -> None:
    assert storage_for("/a") is storage_for("/b") is spec_for("/c").open()
    assert storage_for("/a", {"x": 1}) is storage_for("/a")  # local disks take no options
    assert storage_for("memory://a", {"x": 1}) is storage_for("memory://b", {"x": 1})
    assert storage_for("memory://a", {"x": 1}) is not storage_for("memory://a", {"x": 2})


def test_options_changed_in_place_get_their_own_storage() -> None:
    # the key of a dict seen before is remembered; a change inside it must still count
    options: dict = {"client_kwargs": {"endpoint_url": "http://127.0.0.1:1"}}
    first = storage_for("s3://b/k", options)
    assert storage_for("s3://b/other", options) is first
    options["client_kwargs"]["endpoint_url"] = "http://127.0.0.1:2"
    second = storage_for("s3://b/k", options)
    assert second is not first and second.options == options
    assert storage_for("s3://b/k", {"client_kwargs": {"endpoint_url": "http://127.0.0.1:1"}}
                       ) is first


def test_files_under_one_root_share_its_filesystem_resolved_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from distcp.storage import filesystems as fsutil

    resolved: list[str] = []
    real = fsutil.filesystem

    def counted(url: str, options: Any = None) -> Any:
        resolved.append(url)
        return real(url, options)

    monkeypatch.setattr(fsutil, "filesystem", counted)
    options = {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}}
    roots = fsutil.Filesystems()
    got = [roots.resolve(url, options) for url in
           ("s3://b/x/1", "s3://b/x/2/", "s3://c/y", "s3://b/z?versionId=v1")]
    assert [path for _, path in got] == [real(u, options)[1] for u in
                                         ("s3://b/x/1", "s3://b/x/2/", "s3://c/y",
                                          "s3://b/z?versionId=v1")]
    assert [path for _, path in got[:3]] == ["b/x/1", "b/x/2", "c/y"]
    assert got[0][0] is got[1][0] is got[2][0]
    # one resolution per root; a query is resolved each time (it may ask for versions)
    assert resolved == ["s3://b/x/1", "s3://c/y", "s3://b/z?versionId=v1"]
    # a copy elsewhere (an executor) resolves its own; a client fsspec dropped (new
    # credentials, a forked process) is dropped here too
    assert pickle.loads(pickle.dumps(roots))._roots == {}
    type(got[0][0]).clear_instance_cache()
    assert roots.resolve("s3://b/x/3", options)[0] is not got[0][0]
    assert resolved[-1] == "s3://b/x/3"
    # a blocking filesystem is fsspec's per thread: never kept by root
    roots.resolve("memory://m/a", {})
    roots.resolve("memory://m/b", {})
    assert resolved[-2:] == ["memory://m/a", "memory://m/b"]
    # a chain, and a server moved into the options (FTP connects when built): never
    # kept by root
    for url in ("simplecache::memory://m/a", "simplecache::memory://m/b"):
        roots.resolve(url, {})
    assert resolved[-2:] == ["simplecache::memory://m/a", "simplecache::memory://m/b"]
    assert fsutil._root("ftp://user@127.0.0.1:9/a") is None
    assert fsutil._root("gs://b/a") == "gs://b" and fsutil._root("/a/b") is None


def test_a_staged_value_and_its_logged_text_are_one() -> None:
    upload = Staged.upload("id:with:colons", "s3://b/k")
    assert upload.text == "s3-upload:id:with:colons:s3://b/k"
    assert parse_staged(upload.text) == upload
    assert (upload.needs_complete, upload.needs_rename, upload.in_store) == (True, False, True)
    empty = parse_staged("s3-empty:s3://b/e")
    assert empty.kind is StagedKind.EMPTY and empty.needs_complete and not empty.upload_id
    done = parse_staged("s3-published:s3://b/p")
    assert done.is_published and not done.needs_complete and done.final == "s3://b/p"
    path = parse_staged("/st/u0-a/0-0")
    assert path.needs_rename and path.final == "" and not path.in_store
    for text in (upload.text, "s3-empty:s3://b/e", "s3-published:s3://b/p", "/st/u0-a/0-0",
                 "s3://b/.pydistcp/staging/u0/k", "file:///st/s3-upload:x"):
        assert is_path(text) is parse_staged(text).needs_rename, text


def test_local_storage_publishes_with_a_rename_and_keeps_links_as_links(tmp_path: Path) -> None:
    storage = storage_for(str(tmp_path))
    staged, parts = storage.stage(b"abc", str(tmp_path / "out/a"), str(tmp_path / "st/a"))
    assert parts == () and (tmp_path / "st/a").read_bytes() == b"abc"
    storage.makedirs(str(tmp_path / "out"))
    storage.publish(staged, str(tmp_path / "out/a"))
    assert (tmp_path / "out/a").read_bytes() == b"abc" and not (tmp_path / "st/a").exists()
    assert storage.is_published(staged, f"file://{tmp_path}/out/a", 3)
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir/keep").write_bytes(b"k")
    os.symlink(tmp_path / "dir", tmp_path / "link")
    storage.remove(str(tmp_path / "link"))  # the link, never what it points to
    assert not os.path.lexists(tmp_path / "link") and (tmp_path / "dir/keep").exists()
    storage.set_attributes(str(tmp_path / "out/a"), 0o640, 1_600_000_000_123_456_789)
    st = os.stat(tmp_path / "out/a")
    assert (st.st_mode & 0o777, st.st_mtime_ns) == (0o640, 1_600_000_000_123_456_789)


def test_local_create_new_is_exclusive(tmp_path: Path) -> None:
    storage = storage_for(str(tmp_path))
    assert storage.capabilities.exclusive_create
    assert storage.create_new(str(tmp_path / "new/lock"), b"first")
    assert not storage.create_new(str(tmp_path / "new/lock"), b"second")
    assert (tmp_path / "new/lock").read_bytes() == b"first"


def test_local_walk_glob_and_listing_give_paths_as_the_disk_spells_them(
        tmp_path: Path) -> None:
    """The listing side of the seam on a local disk: paths are their own URLs, a link
    found by a one-level listing is itself (not a folder), and a walk follows it."""
    for rel in ("t/a", "t/d/b", "t/.pydistcp/x"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    os.symlink(tmp_path / "t" / "d", tmp_path / "t" / "link")
    storage = storage_for(str(tmp_path / "t"))
    tree = storage.tree(f"file://{tmp_path}/t/")
    assert (tree.path, tree.url, tree.kind) == (f"{tmp_path}/t", f"{tmp_path}/t", "tree")
    assert tree.url_of(f"{tmp_path}/t/a") == f"{tmp_path}/t/a"
    skipped: list[Any] = []
    walked = {p: st.is_dir for p, st in storage.walk(str(tmp_path / "t"), "follow", skipped)}
    assert walked == {f"{tmp_path}/t/{rel}": is_dir for rel, is_dir in (
        ("a", False), ("d", True), ("d/b", False), ("link", True), ("link/b", False))}
    assert len(skipped) == 1 and skipped[0].path.endswith("/.pydistcp")
    level = [(p, st.is_dir) for p, st in storage.listing(str(tmp_path / "t"))]
    assert level == [(f"{tmp_path}/t/{n}", d) for n, d in (
        (".pydistcp", True), ("a", False), ("d", True), ("link", False))]
    assert [p for p, st in storage.glob(f"{tmp_path}/t/*") if st.is_dir] == [
        f"{tmp_path}/t/.pydistcp", f"{tmp_path}/t/d"]  # a link found by a wildcard: no folder
    with pytest.raises(FileNotFoundError):
        storage.listing(str(tmp_path / "none"))


def test_a_local_tree_holds_what_lies_below_it_even_through_a_link(tmp_path: Path) -> None:
    (tmp_path / "src" / "sub").mkdir(parents=True)
    os.symlink(tmp_path / "src", tmp_path / "alias")
    storage = storage_for(str(tmp_path))
    src = storage.tree(str(tmp_path / "src"))
    assert src.holds(storage.tree(str(tmp_path / "alias" / "sub")))
    assert src.holds(src, str(tmp_path / "src"))
    assert not src.holds(storage.tree(str(tmp_path / "srcx")))
