"""Write options end to end: the real CLI on the suite's warm engine writes to each store's
emulator with --storage-class, --kms-key-id, --acl, --metadata, --tag and
--requester-pays, and each object's properties are read back with the store's own SDK.

What each emulator keeps, as tried: moto keeps all of S3's (storage class, SSE-KMS key,
canned ACL, metadata, tags), from CreateMultipartUpload (staged files, server-side
copies) and from PutObject (``--visibility file``, empty files). fake-gcs-server keeps
the metadata a rewrite's request gives the new object, and accepts but does not keep
its storage class, ``destinationKmsKeyName`` and ``destinationPredefinedAcl`` (it shows
STANDARD, no key, its default ACL): only the metadata is checked there. Azurite keeps
the access tier, metadata and blob index tags, and accepts an encryption scope without
keeping it. Requester pays is sent (RequestPayer, userProject) and accepted by moto and
fake-gcs-server, which neither bill nor check a payer. The state directory's documents
get none of the options.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.e2e.test_azure import copy
from tests.fixtures.azure_server import AzureServer, azure, azurite_server  # noqa: F401
from tests.fixtures.gcs_server import GcsServer, fake_gcs_server, gcs  # noqa: F401 - fixtures
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e

FILES = {"a.txt": b"alpha\n", "d/b.bin": bytes(range(256)) * 40, "empty.txt": b""}
KMS = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
S3_FLAGS = ("--storage-class", "STANDARD_IA", "--kms-key-id", KMS, "--acl", "public-read",
            "--metadata", "team=data", "--metadata", "origin=lake", "--tag", "project=x",
            "--tag", "tier=cold", "--requester-pays")
ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"


def tree(root: Path) -> Path:
    for rel, data in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def assert_s3_object_has_the_options(s3srv: S3Server, key: str) -> None:
    client = s3srv.client()
    head = client.head_object(Bucket="dst", Key=key)
    assert head["StorageClass"] == "STANDARD_IA", (key, head)
    assert (head["ServerSideEncryption"], head["SSEKMSKeyId"]) == ("aws:kms", KMS), key
    assert head["Metadata"] == {"team": "data", "origin": "lake"}, key
    tags = client.get_object_tagging(Bucket="dst", Key=key)["TagSet"]
    assert {t["Key"]: t["Value"] for t in tags} == {"project": "x", "tier": "cold"}, key
    grants = client.get_object_acl(Bucket="dst", Key=key)["Grants"]
    assert any(g["Grantee"].get("URI") == ALL_USERS and g["Permission"] == "READ"
               for g in grants), (key, grants)


def test_s3_objects_staged_put_and_copied_server_side_carry_every_option(
        s3: S3Server, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    """Staged uploads (file-set), PutObject (--visibility file) and UploadPartCopy
    (S3 -> S3) each give the object every option; the state's documents get none."""
    src = tree(tmp_path / "src")
    env = {**s3.env, **warm_engine_local2}
    for dst, extra in (("s3://dst/staged", ()), ("s3://dst/put", ("--visibility", "file"))):
        r, _ = copy(tmp_path, str(src), dst, *S3_FLAGS, *extra, env=env)
        assert r.returncode == 0, r.stderr
    r, summary = copy(tmp_path, "s3://dst/staged", "s3://dst/copied", *S3_FLAGS, env=env)
    assert r.returncode == 0, r.stderr
    assert summary["bytes_server_side"] == sum(map(len, FILES.values())), summary
    held = s3.objects("dst")
    for prefix in ("staged/", "put/", "copied/"):
        assert {k.removeprefix(prefix): v for k, v in held.items()
                if k.startswith(prefix) and "/.pydistcp/" not in k} == FILES, prefix
        for rel in FILES:
            assert_s3_object_has_the_options(s3, prefix + rel)
    state = next(k for k in held if k.startswith("staged/.pydistcp/"))
    head = s3.client().head_object(Bucket="dst", Key=state)
    assert "ServerSideEncryption" not in head and not head["Metadata"], (state, head)
    assert s3.pending_uploads() == []


def test_gcs_objects_carry_the_users_metadata_beside_the_kept_mtime(
        gcs: GcsServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    src = tree(tmp_path / "src")
    r, _ = copy(tmp_path, str(src), "gs://dst/out", "--storage-class", "NEARLINE",
                "--kms-key-id", "projects/p/locations/us/keyRings/r/cryptoKeys/k",
                "--acl", "projectPrivate", "--metadata", "team=data", "--requester-pays",
                "--dst-option", "project=test", env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    for rel, data in FILES.items():
        blob = gcs.client().bucket("dst").get_blob(f"out/{rel}")
        assert blob is not None and blob.download_as_bytes() == data, rel
        meta = dict(blob.metadata or {})
        assert meta.pop("team") == "data", rel
        assert set(meta) == {"goog-reserved-file-mtime", "goog-reserved-posix-mode"}, meta


def test_azure_blobs_carry_tier_metadata_and_tags_committed_or_put_whole(
        azure: AzureServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    src = tree(tmp_path / "src")
    flags = ("--storage-class", "cool", "--kms-key-id", "scope1", "--metadata", "team=data",
             "--tag", "project=x")
    for dst, extra in (("az://dst/blocks", ()), ("az://dst/whole", ("--visibility", "file"))):
        r, _ = copy(tmp_path, str(src), dst, *flags, *extra, env=warm_engine_local2)
        assert r.returncode == 0, r.stderr
        prefix = dst.removeprefix("az://dst/")
        container = azure.client().get_container_client("dst")
        for rel, data in FILES.items():
            blob = container.get_blob_client(f"{prefix}/{rel}")
            assert blob.download_blob().readall() == data, rel
            properties = blob.get_blob_properties()
            assert properties.blob_tier == "Cool", (rel, properties.blob_tier)
            assert properties.metadata.get("team") == "data", properties.metadata
            assert blob.get_blob_tags() == {"project": "x"}, rel
    assert azure.pending_uploads() == []


def test_a_publish_finished_by_recover_or_by_another_run_gives_the_options_of_the_run_that_planned_it(
        azure: AzureServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    """Azure applies the options at the publish (the block list's commit): a commit left
    pending by a kill carries them in its log entry, so ``recover`` (which has no such
    flags) and a rerun with other flags both publish the blobs as first planned."""
    src = tree(tmp_path / "src")
    flags = ("--storage-class", "cool", "--metadata", "team=data", "--tag", "project=x")
    for dst, finish in (("az://dst/recovered", ("recover",)),
                        ("az://dst/rerun", ("copy", "--storage-class", "hot"))):
        crash, _ = copy(tmp_path, str(src), dst, *flags,
                        env={**warm_engine_local2, "DISTCP_CRASH_AT": "before_step:1"})
        assert crash.returncode == 137, crash.stderr
        entries = [b for b in azure.objects("dst", dst.removeprefix("az://dst/") + "/")
                   if "/.pydistcp/commits/" in b]
        assert entries, "the kill left no pending commit"
        if finish[0] == "recover":
            done = run_cli("recover", dst, env=warm_engine_local2)
        else:
            done, _ = copy(tmp_path, str(src), dst, *finish[1:], env=warm_engine_local2)
        assert done.returncode == 0, done.stderr
        container = azure.client().get_container_client("dst")
        for rel, data in FILES.items():
            blob = container.get_blob_client(f"{dst.removeprefix('az://dst/')}/{rel}")
            assert blob.download_blob().readall() == data, rel
            properties = blob.get_blob_properties()
            assert properties.blob_tier == "Cool", (finish, rel, properties.blob_tier)
            assert properties.metadata.get("team") == "data", (finish, properties.metadata)
            assert blob.get_blob_tags() == {"project": "x"}, (finish, rel)


def test_an_option_the_store_has_not_is_refused_before_spark_and_nothing_is_written(
        gcs: GcsServer, tmp_path: Path) -> None:  # noqa: F811
    """Cold on purpose (no warm engine): the refusal comes before any JVM starts, so the
    run's log folder is never made."""
    src = tree(tmp_path / "src")
    r, summary = copy(tmp_path, str(src), "gs://dst/out", "--tag", "k=v",
                      "--log-dir", str(tmp_path / "logs"), env={})
    assert r.returncode == 2
    assert r.stderr == "pydistcp: error: --tag: gs://dst/out has no object tags\n"
    assert gcs.objects("dst") == {} and summary == {}
    assert not (tmp_path / "logs").exists()
