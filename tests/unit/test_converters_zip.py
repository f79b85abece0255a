"""unzip at the task level: real zips, spooling of non-seekable input, hostile zips."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from tests.fixtures.archives import doc_tree, raw_zip, snapshot, zip_of
from tests.fixtures.convert import Run, run_convert
from tests.fixtures.gpgkeys import PASSPHRASE, encrypt, keyring


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return doc_tree(tmp_path_factory.mktemp("docs") / "tree", packages=4, skip=10)


def _src(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    return src


def _matches(run: Run, dst: Path, tree: Path, root: str = "docs/") -> None:
    outputs = run.by_destination(dst)
    for p in tree.rglob("*"):
        if p.is_file():
            r = outputs[root + p.relative_to(tree).as_posix()]
            assert Path(r.staging).read_bytes() == p.read_bytes()
            assert Path(r.staging).stat().st_mode & 0o777 == p.stat().st_mode & 0o777


def test_unzip_real_files(docs: Path, tmp_path: Path) -> None:
    zip_of(docs, _src(tmp_path) / "docs.zip")
    run = run_convert(_src(tmp_path), tmp_path / "dst", "unzip")
    assert not run.failed, run.failed
    _matches(run, tmp_path / "dst", docs)


def test_non_seekable_input_is_spooled_in_staging_and_leaves_nothing(docs: Path,
                                                                     tmp_path: Path) -> None:
    ring = keyring()
    encrypt(ring, zip_of(docs, tmp_path / "docs.zip"), _src(tmp_path) / "docs.zip.gpg")
    run = run_convert(_src(tmp_path), tmp_path / "dst", "decrypt,unzip", gpg_home=ring.home,
                      gpg_passphrase=PASSPHRASE)
    assert not run.failed, run.failed
    _matches(run, tmp_path / "dst", docs)
    assert not [p for p in run.staged() if "spool" in p.name]  # anonymous spool file


def _rejected(tmp_path: Path, entries: list[tuple[str, bytes]], text: str) -> None:
    raw_zip(_src(tmp_path) / "evil.zip", [("ok.txt", b"fine\n"), *entries])
    (tmp_path / "outside").mkdir(exist_ok=True)
    before = snapshot(tmp_path)
    run = run_convert(_src(tmp_path), tmp_path / "dst", "unzip")
    [failed] = run.failed
    assert failed.error_type == "ConversionError"
    assert text in failed.message, failed.message
    assert failed.message.startswith(f"cannot unzip {_src(tmp_path) / 'evil.zip'}: ")
    assert run.staged() == []
    assert all(p.startswith("dst") for p in snapshot(tmp_path) - before)


def test_zip_slip_dot_dot(tmp_path: Path) -> None:
    _rejected(tmp_path, [("../../outside/x", b"pwned")], "contains '..'")


def test_zip_absolute_name(tmp_path: Path) -> None:
    _rejected(tmp_path, [(str(tmp_path / "outside" / "x"), b"pwned")], "is an absolute path")


def test_zip_drive_letter(tmp_path: Path) -> None:
    _rejected(tmp_path, [("C:/../x", b"pwned")], "has a drive letter")


def test_zip_backslash_name(tmp_path: Path) -> None:
    _rejected(tmp_path, [("..\\..\\x", b"pwned")], "contains a backslash")


def test_zip_nul_in_name(tmp_path: Path) -> None:
    _rejected(tmp_path, [("safe.txt\x00../../x", b"pwned")], "contains a NUL byte")


def test_zip_duplicate_names(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="Duplicate name"):
        _rejected(tmp_path, [("ok.txt", b"second")], "duplicate member 'ok.txt'")


def test_zip_symlink_entry(tmp_path: Path) -> None:
    info = zipfile.ZipInfo("link")
    info.create_system = 3
    info.external_attr = (0o120777 << 16)
    with zipfile.ZipFile(_src(tmp_path) / "evil.zip", "w") as z:
        z.writestr(info, "/etc/passwd")
    run = run_convert(_src(tmp_path), tmp_path / "dst", "unzip")
    assert "entry 'link' is a symbolic link" in run.failed[0].message


def test_zip_with_a_bad_crc(tmp_path: Path) -> None:
    payload = b"important data " * 1000
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("data.txt", payload)
    data = bytearray(buf.getvalue())
    data[data.index(payload) + 500] ^= 0x01  # stored: only the CRC can notice
    (_src(tmp_path) / "bad.zip").write_bytes(bytes(data))
    run = run_convert(_src(tmp_path), tmp_path / "dst", "unzip")
    assert "corrupt zip: Bad CRC-32 for file 'data.txt'" in run.failed[0].message
    assert run.staged() == []


def test_corrupt_zip(docs: Path, tmp_path: Path) -> None:
    path = zip_of(docs, _src(tmp_path) / "cut.zip")
    path.write_bytes(path.read_bytes()[:-200])  # the central directory is gone
    run = run_convert(_src(tmp_path), tmp_path / "dst", "unzip")
    assert "cannot unzip" in run.failed[0].message and "corrupt zip" in run.failed[0].message


def test_zip_bomb_over_the_ratio(tmp_path: Path) -> None:
    with zipfile.ZipFile(_src(tmp_path) / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(4):
            z.writestr(f"zeros{i}", bytes(16 << 20))
    run = run_convert(_src(tmp_path), tmp_path / "dst", "unzip")
    assert "decompression limit exceeded" in run.failed[0].message
    assert run.staged() == []
