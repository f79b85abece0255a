"""Everything a run does, with Azure Blob Storage on one side (issue 39 point 3), against
Azurite on 127.0.0.1 and moto: the real CLI on the suite's warm engine (local[2]).

An encrypted archive on S3, and one on GCS, decrypted, un-gzipped and expanded into
Azure, then Azure -> S3 with every digest verified; a job file
forking one read into a local, an S3 and an Azure branch; ``check`` of a local tree
against its Azure copy finding a blob changed behind the tool's back; ``move`` into
Azure deleting each source only once its blob is committed; events naming the Azure
destination. The account comes from Azure's standard environment, as in test_azure.py.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.e2e.test_azure import copy
from tests.e2e.test_fork_cli import tgz
from tests.fixtures.azure_server import AzureServer, azure, azurite_server  # noqa: F401
from tests.fixtures.events_server import EventServer, event_server, validate  # noqa: F401
from tests.fixtures.gcs_server import GcsServer, fake_gcs_server, gcs  # noqa: F401
from tests.fixtures.gpgkeys import ALICE, PASSPHRASE, Keyring, gpg, keyring
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures
from tests.fixtures.stores import put_tree, visible

pytestmark = pytest.mark.e2e

MEMBERS = {"docs/a.txt": b"alpha\n" * 1000, "docs/b/c.bin": bytes(range(256)) * 300,
           "docs/empty": b""}


@pytest.fixture(scope="module")
def ring() -> Keyring:
    return keyring()


def tree(root: Path) -> dict[str, bytes]:
    files = {"a.txt": b"a" * 700, "d/b.bin": bytes(range(200)) * 40, "d/e/f.csv": b"x,y\n1,2\n"}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def expand_into_azure(azure: AzureServer, store: S3Server | GcsServer, drop: str, ring: Keyring,  # noqa: F811
                      tmp_path: Path, env: dict[str, str]) -> None:
    """A ``.tar.gz.gpg`` put on ``store`` under ``drop`` (its bucket ``src``, folder
    ``drop/``), decrypted and expanded into ``az://dst/landed``: each member arrives."""
    sealed = gpg(ring.home, "--trust-model", "always", "-r", ALICE, "--encrypt",
                 data=tgz(MEMBERS)).stdout
    put_tree(store, "src", "drop/", {"docs.tar.gz.gpg": sealed})
    (tmp_path / "pass").write_text(PASSPHRASE + "\n")
    r, summary = copy(tmp_path, drop, "az://dst/landed", "--convert",
                      "decrypt,gunzip,untar", "--gpg-home", ring.home,
                      "--gpg-passphrase-file", str(tmp_path / "pass"), env=env)
    assert r.returncode == 0, r.stderr
    # an archive expands into a folder named after it, less its suffixes
    assert visible(azure, "dst", "landed/") == {f"docs/{k}": v for k, v in MEMBERS.items()}
    assert summary["files_copied"] == len(MEMBERS) and summary["bytes_read"] == len(sealed)


def test_an_encrypted_archive_on_s3_is_expanded_into_azure(
        azure: AzureServer, s3: S3Server, ring: Keyring, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    expand_into_azure(azure, s3, "s3://src/drop", ring, tmp_path,
                      {**s3.env, **warm_engine_local2})
    assert azure.pending_uploads() == []


def test_an_encrypted_archive_on_gcs_is_expanded_into_azure_and_azure_copies_to_s3(
        azure: AzureServer, gcs: GcsServer, s3: S3Server, ring: Keyring,  # noqa: F811
        tmp_path: Path, warm_engine_local2: dict[str, str]) -> None:
    """The issue's own cases across providers: a ``.tar.gz.gpg`` landed on GCS decrypted
    and expanded into Azure, then Azure -> S3 with every file's digest verified."""
    expand_into_azure(azure, gcs, "gs://src/drop", ring, tmp_path, warm_engine_local2)
    r, summary = copy(tmp_path, "az://dst/landed", "s3://dst/from-azure", "--verify", "digest",
                      env={**s3.env, **warm_engine_local2})
    assert r.returncode == 0, r.stderr
    assert visible(s3, "dst", "from-azure/") == {f"docs/{k}": v for k, v in MEMBERS.items()}
    assert summary["files_copied"] == len(MEMBERS)
    assert azure.pending_uploads() == []


def test_one_read_forks_into_a_local_an_s3_and_an_azure_branch(
        azure: AzureServer, s3: S3Server, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    files = tree(tmp_path / "src")
    job = tmp_path / "fork.toml"
    job.write_text(textwrap.dedent(f"""\
        no_progress = true

        [[datasets]]
        source = "{tmp_path / 'src'}"

        [[branches]]
        name = "disk"
        destination = "{tmp_path / 'disk'}"

        [[branches]]
        name = "aws"
        destination = "s3://dst/fork"

        [[branches]]
        name = "azure"
        destination = "az://dst/fork"
        """))
    r = run_cli("run", str(job), "--summary-json", str(tmp_path / "s.json"),
                env={**s3.env, **warm_engine_local2})
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert set(summary["branches"]) == {"disk", "aws", "azure"}
    assert summary["bytes_read"] == sum(map(len, files.values()))  # one read, three copies
    assert {p.relative_to(tmp_path / "disk").as_posix(): p.read_bytes()
            for p in (tmp_path / "disk").rglob("*")
            if p.is_file() and ".pydistcp" not in p.parts} == files
    assert {k.removeprefix("fork/"): v for k, v in s3.objects("dst", "fork/").items()
            if "/.pydistcp/" not in k} == files
    assert visible(azure, "dst", "fork/") == files


def test_check_finds_a_blob_changed_behind_the_tools_back(
        azure: AzureServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    """Two checks on the warm engine: the second must read the blob as it is now, not
    as the engine's workers listed it for the first."""
    files = tree(tmp_path / "src")
    r, _ = copy(tmp_path, str(tmp_path / "src"), "az://dst/checked", env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    check = ("check", str(tmp_path / "src"), "az://dst/checked", "--no-progress", "--master",
             "local[2]")
    same = run_cli(*check, env=warm_engine_local2)
    assert same.returncode == 0, same.stderr
    assert same.stdout.splitlines()[-1].startswith(f"{len(files)} matching, 0 differing")
    changed = bytearray(files["d/b.bin"])
    changed[100] ^= 0xFF  # the same size: only the contents tell
    azure.client().get_blob_client("dst", "checked/d/b.bin").upload_blob(bytes(changed),
                                                                        overwrite=True)
    differ = run_cli(*check, env=warm_engine_local2)
    assert differ.returncode == 1, differ.stderr
    assert "* d/b.bin  (contents differ" in differ.stdout
    assert differ.stdout.splitlines()[-1].startswith(f"{len(files) - 1} matching, 1 differing")


def test_move_into_azure_deletes_each_source_once_its_blob_is_committed(
        azure: AzureServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    files = tree(tmp_path / "src")
    r = run_cli("move", str(tmp_path / "src"), "az://dst/moved", "--no-progress", "--master",
                "local[2]", env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert visible(azure, "dst", "moved/") == files
    assert [p for p in (tmp_path / "src").rglob("*") if p.is_file()] == []


def test_events_name_the_azure_destination(
        azure: AzureServer, event_server: EventServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    tree(tmp_path / "src")
    r, _ = copy(tmp_path, str(tmp_path / "src"), "az://dst/evented", "--events",
                event_server.url, env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    kinds = [x.event["eventType"] for x in event_server.received]
    assert kinds[0] == "START" and kinds[-1] == "COMPLETE" and len(kinds) >= 3, kinds
    for received in event_server.received:
        validate(received.event)
    outputs = [o for x in event_server.received for o in x.event.get("outputs", [])]
    # az:// is adlfs's other name for abfs://: every event names one dataset the same way
    assert outputs and all(o["namespace"] == "abfs://dst" and o["name"].startswith("evented")
                           for o in outputs), outputs


def test_the_warm_engine_sees_blobs_added_and_replaced_since_its_last_run(
        azure: AzureServer, tmp_path: Path,  # noqa: F811
        warm_engine_local2: dict[str, str]) -> None:
    """The engine's Python workers outlive a run, and adlfs caches the listings they
    made: a rerun must list and read what is there now, as a cold run would."""
    put_tree(azure, "src", "grow/", {"a.txt": b"first"})
    r, _ = copy(tmp_path, "az://src/grow", str(tmp_path / "dst"), env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    put_tree(azure, "src", "grow/", {"b.txt": b"added later", "a.txt": b"replaced, longer"})
    r, summary = copy(tmp_path, "az://src/grow", str(tmp_path / "dst"), env=warm_engine_local2)
    assert r.returncode == 0, r.stderr
    assert summary["files_copied"] == 2, summary
    assert (tmp_path / "dst" / "b.txt").read_bytes() == b"added later"
    assert (tmp_path / "dst" / "a.txt").read_bytes() == b"replaced, longer"
