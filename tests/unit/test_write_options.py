"""Write options (--storage-class, --kms-key-id, --acl, --metadata, --tag, --requester-pays):
parsing, where they travel, what each store maps them to, and the one-line refusal of an
option a store has not, before Spark starts (no Spark here: the refusals come first)."""

from __future__ import annotations

import pickle
import textwrap
import time
from pathlib import Path

import pytest

from distcp.cli import job_keys
from distcp.configuration import CopyConfiguration
from distcp.errors import ConfigurationError
from distcp.jobs import load_job
from distcp.preflight import check_writes
from distcp.storage import storage_for
from distcp.storage import filesystems as fsutil
from distcp.storage import writes as writeopts
from distcp.storage.azure import blocks
from distcp.storage.s3 import ops as s3
from distcp.storage.writes import WriteOptions
from tests.conftest import run_cli


def config(destination: str, source: str = "/tmp/src", **options: object) -> CopyConfiguration:
    return CopyConfiguration.build([source], destination, **options)


def refusal(destination: str, source: str = "/tmp/src", **options: object) -> str:
    with pytest.raises(ConfigurationError) as info:
        check_writes(config(destination, source, **options))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_metadata_and_tags_from_a_mapping_or_key_value_strings_as_sorted_pairs() -> None:
    assert writeopts.pairs({"b": "2", "a": "1"}, "--metadata") == (("a", "1"), ("b", "2"))
    assert writeopts.pairs(["team=data", "note=a=b"], "--tag") == (
        ("note", "a=b"), ("team", "data"))
    assert writeopts.pairs("k=", "--tag") == (("k", ""),)
    assert writeopts.pairs(None, "--tag") == ()


@pytest.mark.parametrize(("value", "words"), [
    (["novalue"], "--metadata takes KEY=VALUE, got 'novalue'"),
    (["=v"], "--metadata: an empty key"),
    ({" ": "v"}, "--metadata: an empty key"),
    (["a=1", "a=2"], "--metadata a: given twice"),
    ({"a": ["x"]}, "--metadata a: the value must be a string"),
])
def test_a_bad_pair_is_one_line_naming_the_flag(value: object, words: str) -> None:
    with pytest.raises(ConfigurationError, match="^" + words.replace("?", "\\?")):
        config("s3://b/x", metadata=value)


@pytest.mark.parametrize(("options", "words"), [
    ({"storage_class": ""}, "--storage-class: '' is not a name"),
    ({"kms_key_id": " k"}, "--kms-key-id: ' k' is not a name"),
    ({"tags": {"a b": "1"}}, "--tag 'a b': a key is letters"),
    ({"metadata": {"a": "x\ny"}}, "--metadata a: a value cannot hold a line break"),
])
def test_values_no_store_could_take_are_refused(options: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigurationError, match="^" + words):
        config("s3://b/x", **options)


def test_the_options_ride_in_dsts_storage_options_and_requester_pays_in_the_sources() -> None:
    cfg = config("s3://b/x", "s3://in/y", storage_class="STANDARD_IA", metadata={"a": "1"},
                 tags=["k=v"], requester_pays=True)
    assert writeopts.of(cfg.dst_options) == cfg.writes == WriteOptions(
        "STANDARD_IA", None, None, (("a", "1"),), (("k", "v"),), True)
    assert writeopts.of(cfg.src_options) == WriteOptions(requester_pays=True)
    assert writeopts.of(config("s3://b/x").dst_options) == WriteOptions()
    assert writeopts.KEY not in config("s3://b/x").dst_options
    branch = cfg.with_(destination="s3://b/z")  # a fork's branch keeps them
    assert writeopts.of(branch.dst_options) == cfg.writes
    assert pickle.loads(pickle.dumps(cfg)).writes == cfg.writes


def test_no_filesystem_sees_them_and_the_destinations_storage_holds_them() -> None:
    options = writeopts.carrying({"anon": True}, WriteOptions(storage_class="X",
                                                               requester_pays=True))
    storage = storage_for("s3://b/x", options)
    assert storage.writes.storage_class == "X"
    assert storage.options == {"anon": True, "requester_pays": True}
    fs, _ = fsutil.filesystem("memory://x/y", writeopts.carrying({}, WriteOptions(acl="p")))
    assert writeopts.KEY not in fs.storage_options
    plain = storage_for("s3://b/x", {"anon": True})
    assert plain is not storage and not plain.writes  # the state's documents get none


def test_a_filesystem_built_from_the_runs_options_pays_too() -> None:
    """A listing task builds its filesystem from the run's options, not a Storage."""
    paid = writeopts.carrying({}, WriteOptions(requester_pays=True))
    fs, _ = fsutil.filesystem("s3://b/x", paid)
    assert fs.requester_pays
    assert storage_for("gs://b/x", paid).options == {"requester_pays": True}
    assert storage_for("/tmp/x", paid).options == {}  # a store without it: nothing to set


def test_s3_creates_objects_with_sse_kms_class_acl_metadata_and_tags() -> None:
    writes = WriteOptions("STANDARD_IA", "arn:aws:kms:k", "bucket-owner-full-control",
                          (("team", "data"),), (("a b", "c&d"), ("k", "v")))
    assert s3.object_arguments(writes) == {
        "StorageClass": "STANDARD_IA", "ServerSideEncryption": "aws:kms",
        "SSEKMSKeyId": "arn:aws:kms:k", "ACL": "bucket-owner-full-control",
        "Metadata": {"team": "data"}, "Tagging": "a+b=c%26d&k=v"}
    assert s3.object_arguments(WriteOptions(requester_pays=True)) == {}


def test_azure_commits_with_tier_tags_scope_and_its_own_metadata_over_the_users() -> None:
    writes = WriteOptions("cool", "scope1", None, (("mtime", "user"), ("team", "x")),
                          (("k", "v"),))
    out = blocks.blob_arguments(writes, {"mtime": "123"})
    assert out["metadata"] == {"mtime": "123", "team": "x"}
    assert out["standard_blob_tier"].value == "Cool"
    assert out["tags"] == {"k": "v"} and out["encryption_scope"] == "scope1"
    assert blocks.blob_arguments(None, {"mtime": "1"}) == {"metadata": {"mtime": "1"}}
    assert blocks.blob_arguments(WriteOptions(), None) == {}


@pytest.mark.parametrize(("destination", "options", "line"), [
    ("/tmp/dst", {"tags": {"k": "v"}}, "--tag: /tmp/dst has no object tags"),
    ("/tmp/dst", {"storage_class": "X"}, "--storage-class: /tmp/dst has no storage classes"),
    ("memory://m/d", {"metadata": {"a": "1"}}, "--metadata: memory://m/d has no object metadata"),
    ("gs://bkt/d", {"tags": {"k": "v"}}, "--tag: gs://bkt/d has no object tags"),
    ("az://c/d", {"acl": "private"}, "--acl: az://c/d has no canned ACLs"),
    ("az://c/d", {"storage_class": "Glacier"},
     "--storage-class: az://c/d has the access tiers Hot, Cool, Cold, Archive, not 'Glacier'"),
    ("az://c/d", {"metadata": {"MTime": "1"}}, "--metadata MTime: az://c/d keeps pydistcp's"),
    ("gs://bkt/d", {"metadata": {"goog-reserved-file-mtime": "1"}},
     "--metadata goog-reserved-file-mtime: gs://bkt/d keeps pydistcp's"),
    ("az://c/d", {"metadata": {"team-name": "x"}},
     "--metadata team-name: az://c/d takes metadata names of letters, digits and '_'"),
    ("s3://b/d", {"metadata": {"city": "Zürich"}},
     "--metadata city: s3://b/d takes metadata of printable ASCII"),
    ("az://c/d", {"requester_pays": True},
     "--requester-pays: none of /tmp/src, az://c/d has requester-pays buckets"),
])
def test_an_option_a_store_has_not_is_refused_in_one_line(
        destination: str, options: dict[str, object], line: str) -> None:
    assert refusal(destination, **options).startswith(line)


def test_each_object_store_takes_what_it_has() -> None:
    every = {"storage_class": "Cool", "kms_key_id": "k", "metadata": {"a": "1"}}
    check_writes(config("s3://b/d", **every, acl="private", tags={"k": "v"},
                        requester_pays=True))
    check_writes(config("gs://b/d", **every, acl="projectPrivate", requester_pays=True))
    check_writes(config("az://c/d", **every, tags={"k": "v"}))
    check_writes(config("/tmp/dst"))  # none given: nothing to judge


def test_requester_pays_for_a_source_bucket_copied_to_a_local_disk_is_taken() -> None:
    check_writes(config("/tmp/dst", "s3://public/data", requester_pays=True))


def test_the_job_files_branch_keys_reach_the_copy_keywords(tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_text(textwrap.dedent("""\
        [[datasets]]
        source = "/data/in"

        [[branches]]
        destination = "s3://lake/in"
        storage_class = "STANDARD_IA"
        kms_key_id = "arn:aws:kms:us-east-1:1:key/k"
        acl = "bucket-owner-full-control"
        metadata = { team = "data" }
        tags = { project = "x", tier = "cold" }
        requester_pays = true
        """), encoding="utf-8")
    _, _, options = load_job(str(path), job_keys()).copy_arguments()
    cfg = CopyConfiguration.build(["/data/in"], "s3://lake/in", **{
        k: v for k, v in options.items() if k not in ("src_options", "dst_options")})
    assert cfg.writes == WriteOptions("STANDARD_IA", "arn:aws:kms:us-east-1:1:key/k",
                                      "bucket-owner-full-control", (("team", "data"),),
                                      (("project", "x"), ("tier", "cold")), True)


def test_the_cli_refuses_before_spark_with_one_line_exit_2_and_writes_nothing(
        tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("a")
    start = time.monotonic()
    r = run_cli("copy", str(tmp_path / "src"), str(tmp_path / "dst"), "--tag", "k=v",
                "--log-dir", str(tmp_path / "logs"), "--no-progress")
    assert r.returncode == 2, r.stderr
    assert r.stderr == f"pydistcp: error: --tag: {tmp_path / 'dst'} has no object tags\n"
    assert not (tmp_path / "dst").exists() and not (tmp_path / "logs").exists()
    assert time.monotonic() - start < 60  # no JVM was started (that alone takes longer)
    bad = run_cli("copy", str(tmp_path / "src"), "s3://b/x", "--metadata", "novalue")
    assert (bad.returncode, bad.stderr) == (
        2, "pydistcp: error: --metadata takes KEY=VALUE, got 'novalue'\n")


def test_the_api_takes_the_same_names() -> None:
    import inspect

    import distcp

    names = set(inspect.signature(distcp.copy).parameters)
    assert {"storage_class", "kms_key_id", "acl", "metadata", "tags",
            "requester_pays"} <= names
