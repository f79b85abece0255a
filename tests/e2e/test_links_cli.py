"""Source trees as found in the wild, through the real CLI and local Spark: links by
policy (skipped, followed, or copied as links), dangling links, loops, FIFOs and sockets
are copied or named, never dropped; links and hard links inside tars by policy."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_cli, tree
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures
from tests.fixtures.trees import wild_tree

pytestmark = pytest.mark.e2e


def _copy(tmp_path: Path, src: Path, *flags: str,
          env: dict[str, str]) -> tuple[int, dict, str]:
    """A run on the suite's warm engine (``env``): what it copies, not a JVM's start."""
    report = tmp_path / "summary.json"
    r = run_cli("copy", "--no-progress", "--summary-json", str(report), *flags,
                str(src), str(tmp_path / "dst"), env=env)
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, json.loads(report.read_text()), r.stdout + r.stderr


def test_default_skips_links_and_special_files_with_a_report(
        tmp_path: Path, warm_engine: dict[str, str]) -> None:
    src = wild_tree(tmp_path)
    rc, summary, out = _copy(tmp_path, src, env=warm_engine)
    assert rc == 0, out
    got = tree(tmp_path / "dst")
    assert {k: v[0] for k, v in got.items()} == {"a": b"inside", "d": None, "d/b": b"bee"}
    assert {e["path"]: e["error"] for e in summary["entries_skipped"]} == {
        f"{src}/lin": "symbolic link to a (--links skip)",
        f"{src}/lout": "symbolic link to ../outside (--links skip)",
        f"{src}/dang": "symbolic link to nowhere (--links skip)",
        f"{src}/d/loop": "symbolic link to .. (--links skip)",
        f"{src}/fifo": "special file (fifo)",
        f"{src}/sock": "special file (socket)",
    }
    assert summary["failures"] == [] and summary["files_copied"] == 2
    assert "not copied (links, special files, not ready): 6" in out
    assert f"  {src}/fifo: special file (fifo)" in out


def test_follow_copies_targets_and_names_dangling_links_and_loops(
        tmp_path: Path, warm_engine: dict[str, str]) -> None:
    src = wild_tree(tmp_path)
    rc, summary, out = _copy(tmp_path, src, "--links", "follow", env=warm_engine)
    assert rc == 1, out
    got = {k: v[0] for k, v in tree(tmp_path / "dst").items()}
    assert got == {"a": b"inside", "d": None, "d/b": b"bee", "lin": b"inside",
                   "lout": b"secret outside"}
    assert not (tmp_path / "dst" / "lin").is_symlink()
    assert sorted(f["error"] for f in summary["failures"]) == [
        f"{src}/d/loop: symbolic link loop (points to a directory above it)",
        f"{src}/dang: dangling symbolic link to nowhere",
    ]
    assert summary["files_failed"] == 2 and summary["files_copied"] == 4
    assert f"pydistcp: FAILED {src}/dang: dangling symbolic link to nowhere" in out
    assert {e["error"] for e in summary["entries_skipped"]} == {
        "special file (fifo)", "special file (socket)"}


def _links(root: Path) -> dict[str, str]:
    """relative path -> target text of every symbolic link below ``root`` (not followed)."""
    return {p.relative_to(root).as_posix(): os.readlink(p) for p in sorted(root.rglob("*"))
            if p.is_symlink() and ".pydistcp" not in p.parts}


def test_links_copy_copies_each_link_as_a_link_and_a_rerun_skips_them(
        tmp_path: Path, warm_engine: dict[str, str]) -> None:
    src = wild_tree(tmp_path)
    (src / "abs").symlink_to(tmp_path / "outside")
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "precious").write_bytes(b"keep me")
    os.utime(src / "lin", ns=(1_500_000_000_123_456_789,) * 2, follow_symlinks=False)
    dst = tmp_path / "dst"
    wanted = {"abs": str(tmp_path / "outside"), "d/loop": "..", "dang": "nowhere",
              "lin": "a", "lout": "../outside"}

    r = run_cli("copy", "--dry-run", "--links", "copy", str(src), str(dst))
    assert r.returncode == 0, r.stderr
    assert f"copy   {dst}/lin  (new symbolic link to a)" in r.stdout
    assert f"copy   {dst}/dang  (new symbolic link to nowhere)" in r.stdout
    assert "of which symbolic links would copy as links: 5" in r.stdout
    assert not dst.exists()

    rc, summary, out = _copy(tmp_path, src, "--links", "copy", env=warm_engine)
    assert rc == 0, out
    assert _links(dst) == wanted  # relative stays relative, dangling stays dangling
    assert (dst / "a").read_bytes() == b"inside" and not (dst / "a").is_symlink()
    assert (dst / "d").is_dir() and not (dst / "d").is_symlink()
    assert (dst / "lin").lstat().st_mtime_ns == 1_500_000_000_123_456_789
    assert summary["files_copied"] == 7 and summary["links_copied"] == 5
    assert summary["failures"] == []
    assert {e["error"] for e in summary["entries_skipped"]} == {
        "special file (fifo)", "special file (socket)"}
    assert "of which symbolic links copied as links: 5" in out
    assert (tmp_path / "outside").read_bytes() == b"secret outside"
    inodes = {rel: (dst / rel).lstat().st_ino for rel in wanted}

    rc, summary, out = _copy(tmp_path, src, "--links", "copy", env=warm_engine)
    assert rc == 0, out
    assert summary["files_copied"] == 0 and summary["files_skipped"] == 7
    assert {rel: (dst / rel).lstat().st_ino for rel in wanted} == inodes  # not re-created

    (src / "lin").unlink()
    (src / "lin").symlink_to("d/b")
    (dst / "stale").symlink_to(tmp_path / "keep")  # the source has no such entry
    r = run_cli("copy", "--dry-run", "--delete", "--links", "copy", str(src), str(dst))
    assert f"copy   {dst}/lin  (symbolic link target differs (a -> d/b))" in r.stdout, r.stdout
    assert f"skip   {dst}/dang  (same symbolic link to nowhere)" in r.stdout
    rc, summary, out = _copy(tmp_path, src, "--delete", "--links", "copy", env=warm_engine)
    assert rc == 0, out
    assert _links(dst) == {**wanted, "lin": "d/b"}
    assert summary["files_copied"] == 1 and summary["files_deleted"] == 1
    assert (tmp_path / "keep" / "precious").read_bytes() == b"keep me"  # the link went, only


def test_links_copy_to_s3_is_refused_before_any_request(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a").write_bytes(b"a")
    # Credentials present and nothing listening on port 9: any request would end as
    # exit 3 (endpoint unreachable), as the control run below shows.
    env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
    r = run_cli("copy", "--links", "copy", "--dst-option", "endpoint_url=http://127.0.0.1:9",
                str(tmp_path / "src"), "s3://bucket/x", env=env, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "pydistcp: error: --links copy: destination s3://bucket/x cannot hold symbolic links "
        "(only a local disk can); use --links skip or --links follow")
    r = run_cli("copy", "--dry-run", "--links", "follow", "--dst-option",
                "endpoint_url=http://127.0.0.1:9", str(tmp_path / "src"), "s3://bucket/x",
                env=env, timeout=120)
    assert r.returncode == 3 and "S3 endpoint unreachable" in r.stderr, r.stderr


def test_destination_inside_source_through_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a").write_bytes(b"a")
    (tmp_path / "alias").symlink_to("src")
    r = run_cli("copy", str(tmp_path / "src"), str(tmp_path / "alias" / "copy"))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == (
        f"pydistcp: error: destination {tmp_path}/alias/copy is inside source "
        f"{tmp_path}/src; choose a destination outside the source")
    assert sorted(p.name for p in (tmp_path / "src").iterdir()) == ["a"]
    r = run_cli("copy", str(tmp_path / "alias"), str(tmp_path / "src"))
    assert r.returncode == 2 and "is inside source" in r.stderr


def test_archive_links_skip_names_each_link_in_the_summary(
        tmp_path: Path, warm_engine: dict[str, str]) -> None:
    import io
    import tarfile

    src = tmp_path / "src"
    src.mkdir()
    with tarfile.open(src / "rel.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("bin/tool")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"tool"))
        link = tarfile.TarInfo("bin/alias")
        link.type, link.linkname = tarfile.SYMTYPE, "tool"
        tar.addfile(link)
        for name, target in (("bin/tool2", "bin/tool"), ("bin/ghost", "bin/missing")):
            hard = tarfile.TarInfo(name)
            hard.type, hard.linkname = tarfile.LNKTYPE, target
            tar.addfile(hard)
    rc, summary, out = _copy(tmp_path, src, "--convert", "gunzip,untar", env=warm_engine)
    assert rc == 1 and "entry 'bin/alias' is a symbolic link to 'tool'" in out
    rc, summary, out = _copy(tmp_path, src, "--convert", "gunzip,untar", "--archive-links", "skip",
                             env=warm_engine)
    assert rc == 0, out
    assert {k: v[0] for k, v in tree(tmp_path / "dst").items()} == {
        "rel": None, "rel/bin": None, "rel/bin/tool": b"tool", "rel/bin/tool2": b"tool"}
    assert not (tmp_path / "dst" / "rel" / "bin" / "tool2").is_symlink()
    note = (f"{src}/rel.tar.gz: not expanded (--archive-links skip): "
            "symbolic link 'bin/alias' -> 'tool'; hard link 'bin/ghost' -> 'bin/missing' "
            "(no earlier regular file of that name in the archive)")
    assert summary["notes"] == [note] and note in out


def test_s3_keys_that_cannot_be_file_names_are_named_and_the_rest_arrives(
        s3: S3Server, tmp_path: Path, warm_engine: dict[str, str]) -> None:  # noqa: F811
    c = s3.client()
    objects = {"t/a": b"A", "t/a/b": b"B", "t/d/": b"bytes in slash", "t/e/f": b"F",
               "t/ok": b"ok"}
    for key, body in objects.items():
        c.put_object(Bucket="src", Key=key, Body=body)
    report = tmp_path / "summary.json"
    r = run_cli("copy", "--no-progress", "--summary-json", str(report),
                *s3.cli_options("--src-option"), "s3://src/t", str(tmp_path / "dst"),
                env={**s3.env, **warm_engine})
    assert r.returncode == 1, r.stderr
    assert {k: v[0] for k, v in tree(tmp_path / "dst").items()} == {
        "a": None, "a/b": b"B", "d": None, "e": None, "e/f": b"F", "ok": b"ok"}
    assert sorted(f["error"] for f in json.loads(report.read_text())["failures"]) == [
        ("s3://src/t/a: object key is also the prefix of other keys (a file and a directory "
         "of one name)"),
        "s3://src/t/d/: object key ends with '/' and holds 14 bytes: no file can have that name",
    ]


@pytest.mark.parametrize("point", ["mid_publish:2", "after_stage:2"])
def test_links_copy_killed_mid_run_then_rerun_leaves_exact_links(
        point: str, tmp_path: Path, warm_engine: dict[str, str]) -> None:
    """Killed while publishing (driver) or after staging (executor), cold: the rerun
    (warm) finishes with every link exact, and a third run has nothing left to do."""
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "a").write_bytes(b"inside")
    for name, target in (("dang", "nowhere"), ("lin", "a"), ("d/up", "../a")):
        (src / name).symlink_to(target)
    dst = tmp_path / "dst"
    killed = run_cli("copy", "--no-progress", "--links", "copy", "--master", "local[2]",
                     str(src), str(dst), env={"DISTCP_CRASH_AT": point})
    assert killed.returncode != 0, killed.stderr
    rc, summary, out = _copy(tmp_path, src, "--links", "copy", env=warm_engine)
    assert rc == 0, out
    assert _links(dst) == {"d/up": "../a", "dang": "nowhere", "lin": "a"}
    assert (dst / "a").read_bytes() == b"inside"
    rc, summary, out = _copy(tmp_path, src, "--links", "copy", env=warm_engine)
    assert rc == 0 and summary["files_copied"] == 0 and summary["files_skipped"] == 4, out


@pytest.mark.parametrize("links", ["skip", "follow"])
def test_wild_tree_to_s3_by_policy(tmp_path: Path, s3: S3Server,  # noqa: F811
                                   links: str, warm_engine: dict[str, str]) -> None:
    """The same wild tree to the S3 server: every entry is an object or named."""
    src = wild_tree(tmp_path)
    report = tmp_path / "summary.json"
    r = run_cli("copy", "--no-progress", "--links", links, "--summary-json", str(report),
                str(src), "s3://dst/wild", env={**s3.env, **warm_engine})
    assert "Traceback" not in r.stderr, r.stderr
    summary = json.loads(report.read_text())
    objects = {k: v for k, v in s3.objects("dst", "wild/").items()
               if not k.startswith("wild/.pydistcp/")}
    named = {e["path"] for e in summary["entries_skipped"]} | {
        f["path"] for f in summary["failures"]}
    if links == "skip":
        assert r.returncode == 0, r.stderr
        assert objects == {"wild/a": b"inside", "wild/d/b": b"bee"}
        assert named == {f"{src}/{n}" for n in ("lin", "lout", "dang", "d/loop", "fifo", "sock")}
    else:
        assert r.returncode == 1, r.stderr
        assert objects == {"wild/a": b"inside", "wild/d/b": b"bee", "wild/lin": b"inside",
                           "wild/lout": b"secret outside"}
        assert named == {f"{src}/{n}" for n in ("dang", "d/loop", "fifo", "sock")}
    assert s3.pending_uploads() == []
