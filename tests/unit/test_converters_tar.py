"""untar at the task level: real archives of /usr/share/doc, and every hostile entry."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from tests.fixtures.archives import (
    doc_tree,
    flip_byte,
    hostile_tar,
    snapshot,
    tar_member,
    tar_of,
    truncate,
)
from tests.fixtures.convert import Run, run_convert


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return doc_tree(tmp_path_factory.mktemp("docs") / "tree", packages=5)


def _expanded_matches(run: Run, dst: Path, root: str, tree: Path) -> None:
    outputs = run.by_destination(dst)
    for p in tree.rglob("*"):
        rel = p.relative_to(tree).as_posix()
        if p.is_dir():
            assert outputs[f"{root}{rel}/"].mode == p.stat().st_mode & 0o777
            got = outputs[f"{root}{rel}/"].mtime
            ns = got if isinstance(got, int) else int((got or 0) * 1e9)
            assert ns // 10**6 == p.stat().st_mtime_ns // 10**6  # ms: exact in pax, not ustar
            continue
        r = outputs[root + rel]
        staged = Path(r.staging)
        assert staged.read_bytes() == p.read_bytes(), rel
        assert staged.stat().st_mode & 0o777 == p.stat().st_mode & 0o777
        assert int(staged.stat().st_mtime) == int(p.stat().st_mtime)


@pytest.mark.parametrize("mode,suffix", [("w:gz", ".tar.gz"), ("w", ".tar"),
                                         ("w:bz2", ".tar.bz2"), ("w:xz", ".txz")])
def test_untar_expands_real_files_under_the_archive_name(
        docs: Path, tmp_path: Path, mode: str, suffix: str) -> None:
    src = tmp_path / "src"
    src.mkdir()
    tar_of(docs, src / f"docs{suffix}", mode)
    run = run_convert(src, tmp_path / "dst", "untar")
    assert not run.failed, run.failed
    _expanded_matches(run, tmp_path / "dst", "docs/", docs)
    assert run.files[0].destination.endswith("/dst/docs/")
    assert {r.file_set for r in run.results} == {f"file:docs{suffix}"}


def test_gunzip_then_untar_and_expand_into_parent(docs: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    tar_of(docs, src / "sub" / "docs.tgz")
    run = run_convert(src, tmp_path / "dst", "gunzip,untar", expand_into_parent=True)
    assert not run.failed, run.failed
    _expanded_matches(run, tmp_path / "dst", "sub/", docs)


def _rejected(tmp_path: Path, member: tarfile.TarInfo, text: str, data: bytes = b"",
              names: str = "untar") -> str:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    hostile_tar(src / "evil.tar.gz", member, data)
    (tmp_path / "outside").mkdir(exist_ok=True)
    before = snapshot(tmp_path)
    run = run_convert(src, tmp_path / "dst", names)
    [failed] = run.failed
    assert failed.error_type == "ConversionError"
    assert text in failed.message, failed.message
    assert f"cannot untar {src / 'evil.tar.gz'}: " in failed.message
    assert run.staged() == []  # the good member staged before it was discarded too
    new = snapshot(tmp_path) - before
    assert all(p.startswith("dst") for p in new), new  # nothing written outside DST
    assert not (tmp_path / "outside" / "x").exists()
    return failed.message


def test_tar_entry_with_dot_dot_is_rejected(tmp_path: Path) -> None:
    _rejected(tmp_path, tar_member("../outside/x"), "entry '../outside/x' contains '..'",
              b"pwned")


def test_tar_entry_with_absolute_path_is_rejected(tmp_path: Path) -> None:
    _rejected(tmp_path, tar_member(str(tmp_path / "outside" / "x")), "is an absolute path",
              b"pwned")


def test_tar_symlink_to_etc_is_rejected(tmp_path: Path) -> None:
    _rejected(tmp_path, tar_member("passwd", tarfile.SYMTYPE, "/etc/passwd"),
              "entry 'passwd' is a symbolic link to '/etc/passwd'")


def test_tar_symlink_dir_then_file_through_it_is_rejected_at_the_link(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "outside").mkdir()
    with tarfile.open(src / "evil.tar", "w") as tar:
        tar.addfile(tar_member("escape", tarfile.SYMTYPE, str(tmp_path / "outside")))
        info = tar_member("escape/x")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"pwned"))
    run = run_convert(src, tmp_path / "dst", "untar")
    assert "entry 'escape' is a symbolic link" in run.failed[0].message
    assert not (tmp_path / "outside" / "x").exists()
    assert run.staged() == []


def test_tar_hardlink_outside_is_rejected(tmp_path: Path) -> None:
    _rejected(tmp_path, tar_member("host", tarfile.LNKTYPE, "/etc/hostname"),
              "entry 'host' is a hard link to '/etc/hostname'")


def test_tar_device_node_is_rejected(tmp_path: Path) -> None:
    _rejected(tmp_path, tar_member("null", tarfile.CHRTYPE), "entry 'null' is a device file")


def test_tar_fifo_is_rejected(tmp_path: Path) -> None:
    _rejected(tmp_path, tar_member("pipe", tarfile.FIFOTYPE), "entry 'pipe' is a FIFO")


def test_tar_setuid_file_is_rejected(tmp_path: Path) -> None:
    _rejected(tmp_path, tar_member("su", mode=0o4755), "entry 'su' has the setuid/setgid bit",
              b"#!/bin/sh\n")


def test_tar_duplicate_member_is_rejected(tmp_path: Path) -> None:
    _rejected(tmp_path, tar_member("ok.txt"), "duplicate member 'ok.txt'", b"second")


def test_truncated_tar_is_rejected(docs: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    truncate(tar_of(docs, src / "half.tar", "w"), 0.5)
    run = run_convert(src, tmp_path / "dst", "untar")
    assert "truncated" in run.failed[0].message, run.failed[0].message
    assert run.staged() == []


def test_tar_cut_at_a_member_boundary_is_rejected(tmp_path: Path) -> None:
    """tarfile itself accepts a tar that stops between members; we want its end block."""
    src = tmp_path / "src"
    src.mkdir()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tar_member("a.txt")
        info.size = 512
        tar.addfile(info, io.BytesIO(b"a" * 512))
    (src / "cut.tar").write_bytes(buf.getvalue()[:1024])  # header + data, no end block
    assert [m.name for m in tarfile.open(src / "cut.tar")] == ["a.txt"]  # the pitfall
    run = run_convert(src, tmp_path / "dst", "untar")
    assert "truncated tar: it ends without the end-of-archive block" in run.failed[0].message
    assert run.staged() == []


def test_tgz_corrupted_inside_a_stored_block_fails_on_the_gzip_crc(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    payload = os.urandom(200_000)
    with tarfile.open(src / "stored.tgz", "w:gz", compresslevel=0) as tar:
        info = tar_member("data.bin")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    flip_byte(src / "stored.tgz", 100_000)  # inside the stored data: zlib cannot notice
    with tarfile.open(src / "stored.tgz") as tar:  # the pitfall: tarfile reads wrong bytes
        assert tar.extractfile("data.bin").read() != payload  # type: ignore[union-attr]
    run = run_convert(src, tmp_path / "dst", "untar")
    [failed] = run.failed
    assert "CRC check failed" in failed.message, failed.message
    assert run.staged() == []


def test_tar_bomb_over_the_ratio(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    with tarfile.open(src / "bomb.tar.gz", "w:gz") as tar:
        info = tar_member("zeros")
        info.size = 48 << 20
        tar.addfile(info, io.BytesIO(bytes(48 << 20)))
    run = run_convert(src, tmp_path / "dst", "untar")
    assert "decompression limit exceeded" in run.failed[0].message
    assert run.staged() == []


def test_good_archive_beside_a_bad_one_is_its_own_file_set(docs: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    tar_of(docs, src / "good.tar.gz")
    hostile_tar(src / "evil.tar.gz", tar_member("../x"), b"x")
    run = run_convert(src, tmp_path / "dst", "untar")
    assert [Path(r.origin).name for r in run.failed] == ["evil.tar.gz"]
    good = run.ok_for("good.tar.gz")
    assert good and {r.file_set for r in good} == {"file:good.tar.gz"}
    assert len(run.staged()) == sum(1 for p in docs.rglob("*") if p.is_file())


def test_converters_after_untar_apply_to_each_entry(docs: Path, tmp_path: Path) -> None:
    """``untar,gunzip``: every gzip'd changelog inside is un-gzipped and renamed."""
    import gzip

    src = tmp_path / "src"
    src.mkdir()
    only_gz = tmp_path / "gz"
    for p in docs.rglob("*.gz"):
        target = only_gz / p.relative_to(docs)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(p.read_bytes())
    tar_of(only_gz, src / "logs.tar")
    run = run_convert(src, tmp_path / "dst", "untar,gunzip")
    assert not run.failed, run.failed
    outputs = run.by_destination(tmp_path / "dst")
    for p in only_gz.rglob("*.gz"):
        rel = p.relative_to(only_gz).as_posix().removesuffix(".gz")
        assert Path(outputs["logs/" + rel].staging).read_bytes() == gzip.decompress(p.read_bytes())


def test_tar_block_device_is_rejected(tmp_path: Path) -> None:
    _rejected(tmp_path, tar_member("sda", tarfile.BLKTYPE), "entry 'sda' is a device file")


def test_world_writable_entries_lose_the_bit(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    with tarfile.open(src / "w.tar", "w") as tar:
        info = tar_member("open.txt", mode=0o666)
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))
        tar.addfile(tar_member("d", tarfile.DIRTYPE, mode=0o777))
    run = run_convert(src, tmp_path / "dst", "untar")
    outputs = run.by_destination(tmp_path / "dst")
    assert Path(outputs["w/open.txt"].staging).stat().st_mode & 0o777 == 0o664
    assert outputs["w/d/"].mode == 0o775


def test_archive_links_skip_expands_the_rest_and_names_each_link(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "outside").mkdir()
    with tarfile.open(src / "real.tar", "w") as tar:
        info = tar_member("a.txt")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"hello"))
        tar.addfile(tar_member("passwd", tarfile.SYMTYPE, "/etc/passwd"))
        tar.addfile(tar_member("again.txt", tarfile.LNKTYPE, "a.txt"))
        tar.addfile(tar_member("escape", tarfile.SYMTYPE, str(tmp_path / "outside")))
        info = tar_member("escape/x")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"x!\n"))
    run = run_convert(src, tmp_path / "dst", "untar", archive_links="skip")
    assert run.failed == []
    got = run.by_destination(tmp_path / "dst")
    assert sorted(got) == ["real/", "real/a.txt", "real/again.txt", "real/escape/x"]
    assert got["real/"].message == (
        "not expanded (--archive-links skip): symbolic link 'passwd' -> '/etc/passwd'; "
        f"symbolic link 'escape' -> '{tmp_path / 'outside'}'")
    assert not (tmp_path / "outside" / "x").exists()
    assert sorted(Path(r.staging).read_bytes() for r in got.values() if r.staging) == [
        b"hello", b"hello", b"x!\n"]


def _tar_with_links(path: Path, members: list[tuple[str, bytes | str]],
                    fmt: int = tarfile.GNU_FORMAT) -> Path:
    """A tar of regular members (bytes) and hard links (str: the member they name)."""
    with tarfile.open(path, "w", format=fmt) as tar:
        for name, body in members:
            if isinstance(body, str):
                tar.addfile(tar_member(name, tarfile.LNKTYPE, body, mode=0o640))
                continue
            info = tar_member(name)
            info.size, info.mtime = len(body), 1_600_000_000
            tar.addfile(info, io.BytesIO(body))
    return path


def test_hard_link_to_an_earlier_member_is_expanded_as_a_copy_of_its_bytes(
        tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    body = os.urandom(200_000)
    _tar_with_links(src / "t.tar", [("d/a.bin", body), ("d/b.bin", "d/a.bin"),
                                    ("c.bin", "./d/b.bin"), ("e.bin", b"other")])
    run = run_convert(src, tmp_path / "dst", "untar", archive_links="skip")
    assert run.failed == []
    got = run.by_destination(tmp_path / "dst")
    assert got["t/"].message == ""  # nothing left out: the summary names nothing
    for name in ("t/d/a.bin", "t/d/b.bin", "t/c.bin"):  # a link to a link too
        assert Path(got[name].staging).read_bytes() == body, name
    assert Path(got["t/d/b.bin"].staging).stat().st_mode & 0o777 == 0o640
    assert got["t/d/b.bin"].bytes_written == len(body)
    assert got["t/d/b.bin"].checksum == got["t/d/a.bin"].checksum
    assert Path(got["t/e.bin"].staging).read_bytes() == b"other"


def test_hard_links_that_cannot_be_expanded_are_skipped_and_named(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    mib = 1 << 20
    fill = [(f"fill{i:02}", bytes([i]) * mib) for i in range(16)]  # pushes "old" out
    _tar_with_links(src / "t.tar", [
        ("big", b"B" * (mib + 1)), ("old", b"o" * mib), *fill, ("new", b"n" * 900),
        ("to-big", "big"), ("to-old", "old"), ("to-new", "new"), ("to-fill", "fill15"),
        ("to-none", "missing"), ("to-etc", "../etc/passwd")])
    run = run_convert(src, tmp_path / "dst", "untar", archive_links="skip")
    assert run.failed == []
    got = run.by_destination(tmp_path / "dst")
    assert sorted(n for n in got if n.startswith("t/to-")) == ["t/to-fill", "t/to-new"]
    assert Path(got["t/to-new"].staging).read_bytes() == b"n" * 900
    assert Path(got["t/to-fill"].staging).read_bytes() == bytes([15]) * mib
    assert got["t/"].message == (
        "not expanded (--archive-links skip): "
        "hard link 'to-big' -> 'big' (its target is larger than 1.0 MiB); "
        "hard link 'to-old' -> 'old' (its target was no longer held (at most 16.0 MiB of "
        "earlier members are kept)); "
        "hard link 'to-none' -> 'missing' (no earlier regular file of that name in the "
        "archive); "
        "hard link 'to-etc' -> '../etc/passwd' (no earlier regular file of that name in the "
        "archive)")
    assert not (tmp_path / "etc").exists()


def test_hard_link_is_still_refused_by_default(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    _tar_with_links(src / "t.tar", [("a", b"aaa"), ("b", "a")])
    run = run_convert(src, tmp_path / "dst", "untar")
    [failed] = run.failed
    assert "entry 'b' is a hard link to 'a'; only regular files and directories" in \
        failed.message
    assert run.staged() == []


def test_hard_links_cannot_inflate_past_the_expansion_ratio(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    body = os.urandom(1 << 20)  # incompressible: the archive itself is ~1 MiB
    links = [(f"l{i}", "a") for i in range(8)]
    _tar_with_links(src / "t.tar", [("a", body), *links])
    run = run_convert(src, tmp_path / "dst", "untar", archive_links="skip",
                      max_expansion_ratio=4.0)
    [failed] = run.failed
    assert failed.error_type == "ConversionError"
    assert "--max-expansion-ratio" in failed.message, failed.message
    assert run.staged() == []
