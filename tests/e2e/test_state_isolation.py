"""Data never becomes the tool's own state, and no record acts outside its roots.

Issue "Trust", point 1: an archive member, a source entry or a hand-planted file under
the state directory must not be taken for one of our records; every record read back
(commit log, recovery area, journal, dataset state) is checked against the run's
destination and state root before anything acts on it.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import zipfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

import distcp
from distcp.errors import StateError
from distcp.model import TaskResult
from distcp.storage.filesystems import local_status
from tests.conftest import tree

pytestmark = pytest.mark.e2e


def _tar(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            t.addfile(info, io.BytesIO(data))


def _record(steps: list[dict[str, Any]], seq_id: str = "planted") -> bytes:
    return json.dumps({"version": 1, "job_id": "planted-job", "replays": 0, "id": seq_id,
                       "dataset_urn": "x", "file_set": "f", "steps": steps}).encode()


def _seeded(tmp_path: Path) -> tuple[Path, Path]:
    """A destination one clean copy made (so it has a state directory)."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "f.txt").write_text("hello")
    assert distcp.copy(str(src), str(dst)).ok
    return src, dst


def test_archive_members_never_land_in_the_state_directory(spark: Any, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    record = _record([{"kind": "delete", "urls": [str(victim)]}])
    _tar(src / "evil.tar.gz", {".pydistcp/commits/planted.json": record, "ok.txt": b"ok"})
    with zipfile.ZipFile(src / "evil.zip", "w") as z:
        z.writestr(".pydistcp/commits/zipped.json", record)
    _tar(src / ".pydistcp.tar.gz", {"commits/named.json": record})
    s = distcp.copy(str(src), str(dst), convert=["untar"], expand_into_parent=True,
                    include=["evil.tar.gz"])
    assert not s.ok and s.files_failed == 1
    assert "inside the state directory" in s.failures[0].error
    assert "evil.tar.gz" in s.failures[0].error
    assert not (dst / "ok.txt").exists()  # the archive failed whole
    assert not (dst / ".pydistcp" / "commits" / "planted.json").exists()
    named = distcp.copy(str(src), str(dst), convert=["untar"], include=[".pydistcp.tar.gz"])
    assert not named.ok and "inside the state directory" in named.failures[0].error
    assert not (dst / ".pydistcp" / "commits" / "named.json").exists()
    z = distcp.copy(str(src), str(dst / "z"), convert=["unzip"], expand_into_parent=True,
                    include=["*.zip"])
    assert not z.ok and "inside the state directory" in z.failures[0].error
    assert not list((dst / "z").rglob("zipped.json"))
    again = distcp.copy(str(src), str(dst), convert=["untar"], expand_into_parent=True,
                        include=["evil.tar.gz"])
    assert again.sequences_replayed == 0 and again.sequences_set_aside == 0
    assert victim.read_text() == "keep me"


def test_a_planted_commit_record_is_set_aside_never_executed(spark: Any, tmp_path: Path) -> None:
    src, dst = _seeded(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    outside = tmp_path / "outside"
    commits = dst / ".pydistcp" / "commits"
    (commits / "planted.json").write_bytes(_record([{"kind": "delete", "urls": [str(victim)]}]))
    (commits / "moved.json").write_bytes(_record(
        [{"kind": "publish", "moves": [[str(victim), str(dst / "stolen"), 7]]}], "moved"))
    (commits / "escape.json").write_bytes(_record(
        [{"kind": "mkdirs", "urls": [str(outside)]}], "../../escape"))
    s = distcp.copy(str(src), str(dst))
    assert not s.ok and s.sequences_set_aside == 3 and s.sequences_replayed == 0
    lines = sorted(f.error for f in s.failures)
    assert all("not executed, set aside in" in line for line in lines)
    assert any(repr(str(victim)) in line for line in lines)
    assert victim.read_text() == "keep me" and not (dst / "stolen").exists()
    assert not outside.exists()
    aside = sorted(p.name for p in (commits / "aside").iterdir())
    assert aside == ["escape.json", "moved.json", "planted.json"]
    assert (commits / "aside" / "planted.json").read_bytes() == _record(
        [{"kind": "delete", "urls": [str(victim)]}])  # moved as it was, not rewritten
    status = distcp.status(str(dst))
    assert len(status["set_aside"]) == 3
    assert distcp.copy(str(src), str(dst)).ok  # set aside once: later runs go on
    r = distcp.recover(str(dst))
    assert r.ok and r.sequences_set_aside == 0


def test_recover_checks_records_against_the_destination(spark: Any, tmp_path: Path) -> None:
    _, dst = _seeded(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (dst / ".pydistcp" / "commits" / "planted.json").write_bytes(
        _record([{"kind": "delete", "urls": [str(victim)]}]))
    s = distcp.recover(str(dst))
    assert not s.ok and s.sequences_set_aside == 1 and victim.exists()
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(distcp.ConfigurationError, match="give DST with --state-dir"):
        distcp.recover(state_dir=str(tmp_path / "elsewhere"))


def test_a_planted_recovery_entry_is_set_aside(spark: Any, tmp_path: Path) -> None:
    src, dst = _seeded(tmp_path)
    secret = tmp_path / "secret"
    secret.write_text("private")
    (src / "g.txt").write_text("private")  # same size as the secret
    st = local_status(str(src / "g.txt"))
    guid = hashlib.sha1(f"{st.url}\x00{st.size}\x00{st.mtime!r}\x00".encode()).hexdigest()
    folder = dst / ".pydistcp" / "recovery" / guid
    folder.mkdir(parents=True)
    result = TaskResult(guid, 0, "a", st.url, str(dst / "g.txt"), str(src), "g.txt", "ok",
                        staging=str(secret), bytes_written=7)
    (folder / "meta.json").write_text(json.dumps(
        {"guid": guid, "destination": str(dst / "g.txt"), "kept": 4e9,
         "outputs": [asdict(result)]}))
    s = distcp.copy(str(src), str(dst))
    assert not s.ok and "outside its folder" in s.failures[0].error
    assert secret.read_text() == "private"  # not moved
    assert (dst / "g.txt").read_text() == "private" and s.files_copied == 1  # read again
    assert (dst / ".pydistcp" / "recovery-aside" / guid / "meta.json").exists()
    assert distcp.copy(str(src), str(dst)).ok


def test_a_planted_journal_moves_nothing(spark: Any, tmp_path: Path) -> None:
    _, dst = _seeded(tmp_path)
    secret = tmp_path / "secret"
    secret.write_text("private")
    state = dst / ".pydistcp"
    (state / "staging" / "deadjob").mkdir(parents=True)
    (state / "progress" / "deadjob").mkdir(parents=True)
    result = TaskResult("g" * 40, 0, "a", "/x", str(dst / "x"), "/x", "x", "ok",
                        staging=str(secret), bytes_written=7)
    (state / "progress" / "deadjob" / "u0-a.j0.json").write_text(json.dumps(
        [{"planned": str(dst / "x"), "results": [asdict(result)]}]))
    s = distcp.recover(str(dst))
    assert s.ok and secret.read_text() == "private"
    assert not (state / "recovery").exists() or not list((state / "recovery").iterdir())


def test_a_dataset_state_naming_paths_outside_is_refused(spark: Any, tmp_path: Path) -> None:
    src, dst = _seeded(tmp_path)
    [doc] = (dst / ".pydistcp" / "datasets").glob("*.json")
    data = json.loads(doc.read_text())
    data["garbage"] = ["../../../victim"]
    doc.write_text(json.dumps(data))
    with pytest.raises(StateError, match="names '../../../victim', outside its manifest"):
        distcp.copy(str(src), str(dst))
    assert (tmp_path / "dst" / "f.txt").read_text() == "hello"


def test_source_entries_named_like_the_state_directory(spark: Any, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "a" / ".pydistcp").mkdir(parents=True)
    (src / "a" / ".pydistcp" / "deep.txt").write_text("deep")
    (src / ".pydistcp" / "commits").mkdir(parents=True)
    (src / ".pydistcp" / "commits" / "x.json").write_text("{}")
    (src / "plain.txt").write_text("plain")
    s = distcp.copy(str(src), str(dst))
    assert s.ok and s.files_copied == 2
    assert (dst / "a" / ".pydistcp" / "deep.txt").read_text() == "deep"  # deeper: data
    assert [e.path for e in s.entries_skipped] == [str(src / ".pydistcp")]
    assert "where the destination keeps its state" in s.entries_skipped[0].error
    assert "a/.pydistcp/deep.txt" in tree(dst)
    again = distcp.copy(str(src), str(dst), delete=True)
    assert again.ok and again.files_copied == 0 and again.files_deleted == 0
    assert (dst / ".pydistcp" / "commits").is_dir()
    listed = tmp_path / "list.txt"
    listed.write_text(".pydistcp/commits/x.json\nplain.txt\na/.pydistcp/deep.txt\n")
    f = distcp.copy(str(src), str(tmp_path / "dst2"), files_from=str(listed))
    assert f.ok and f.files_copied == 2  # the deeper one is data
    assert (tmp_path / "dst2" / "a" / ".pydistcp" / "deep.txt").read_text() == "deep"
    assert [e.path for e in f.entries_skipped] == [str(src / ".pydistcp" / "commits" / "x.json")]
