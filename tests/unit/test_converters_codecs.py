"""gunzip / gzip / bunzip2 / unxz on real files: renames, round trips, bad input."""

from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest

from distcp.converters.base import ConverterOptions, build_chain, rename_through
from distcp.errors import ConfigurationError
from distcp.registry import CONVERTERS
from tests.fixtures.archives import DOC, flip_byte, snapshot, truncate
from tests.fixtures.convert import convert_bytes, run_convert


def doc_gz_files(n: int = 5) -> list[Path]:
    """Real gzip files nobody here wrote: Debian changelogs."""
    files = sorted(p for p in DOC.rglob("changelog*.gz") if p.is_file() and not p.is_symlink())
    return sorted(files, key=lambda p: -p.stat().st_size)[:n]


@pytest.fixture
def src(tmp_path: Path) -> Path:
    d = tmp_path / "src"
    d.mkdir()
    return d


def test_builtin_names_are_registered_and_sorted() -> None:
    names = CONVERTERS.names()
    for name in ("bunzip2", "decrypt", "encrypt", "gunzip", "gzip", "untar", "unxz", "unzip"):
        assert name in names
    assert CONVERTERS.get("gunzip").one_to_many is False
    assert CONVERTERS.get("untar").one_to_many is True


@pytest.mark.parametrize("names,before,after", [
    ("gunzip", "d/x.csv.gz", "d/x.csv"),
    ("gunzip", "d/x.tgz", "d/x.tar"),
    ("gunzip", "d/x.GZ", "d/x"),
    ("bunzip2", "d/x.tbz2", "d/x.tar"),
    ("bunzip2", "d/x.bz2", "d/x"),
    ("unxz", "d/x.txz", "d/x.tar"),
    ("gzip", "d/x", "d/x.gz"),
    ("decrypt", "d/x.tar.gz.gpg", "d/x.tar.gz"),
    ("decrypt", "d/x.pgp", "d/x"),
    ("decrypt", "d/x.asc", "d/x"),
    ("decrypt,gunzip,untar", "d/logs.tar.gz.gpg", "d/logs/"),
    ("gunzip,untar", "d/logs.tgz", "d/logs/"),
    ("unzip", "d/a.b.zip", "d/a.b/"),
])
def test_destination_renames(names: str, before: str, after: str) -> None:
    chain = build_chain(names.split(","), ConverterOptions(gpg_recipients=("x",)))
    assert rename_through(chain, before) == after


def test_expand_into_parent_renames_to_the_directory() -> None:
    chain = build_chain(["untar"], ConverterOptions(expand_into_parent=True))
    assert rename_through(chain, "/dst/d/logs.tar") == "/dst/d/"


def test_gunzip_matches_gzip_d_on_real_changelogs(src: Path, tmp_path: Path) -> None:
    for f in doc_gz_files():
        shutil.copy2(f, src / f"{f.parent.name}-{f.name}")
    run = run_convert(src, tmp_path / "dst", "gunzip")
    assert not run.failed, run.failed
    for r in run.results:
        expected = subprocess.run(["gzip", "-dc", r.origin], capture_output=True,
                                  check=True).stdout
        assert Path(r.staging).read_bytes() == expected
        assert r.destination.endswith(Path(r.origin).name.removesuffix(".gz"))
    assert {r.file_set for r in run.results} == {f"file:{Path(r.origin).name}"
                                                 for r in run.results}


def test_gzip_then_gunzip_round_trip_and_gzip_output_is_real_gzip(tmp_path: Path) -> None:
    original = next(p for p in sorted(DOC.rglob("copyright")) if p.stat().st_size > 5000)
    plain = tmp_path / "copyright"
    shutil.copy2(original, plain)
    [(dest, packed)] = convert_bytes(plain, "gzip")
    assert dest == "/out/copyright.gz"
    assert gzip.decompress(packed) == original.read_bytes()
    (tmp_path / "c.gz").write_bytes(packed)
    assert subprocess.run(["gzip", "-t", str(tmp_path / "c.gz")]).returncode == 0
    [(_, back)] = convert_bytes(plain, "gzip,gunzip")
    assert back == original.read_bytes()


def test_concatenated_members_are_one_stream(tmp_path: Path) -> None:
    path = tmp_path / "multi.gz"
    path.write_bytes(gzip.compress(b"first\n") + gzip.compress(b"second\n"))
    assert convert_bytes(path, "gunzip") == [("/out/multi", b"first\nsecond\n")]


def test_bunzip2_and_unxz_of_real_files(tmp_path: Path) -> None:
    data = doc_gz_files(1)[0].read_bytes()
    (tmp_path / "a.bz2").write_bytes(bz2.compress(data))
    (tmp_path / "a.xz").write_bytes(lzma.compress(data))
    assert convert_bytes(tmp_path / "a.bz2", "bunzip2") == [("/out/a", data)]
    assert convert_bytes(tmp_path / "a.xz", "unxz") == [("/out/a", data)]


def _gz_of_doc(src: Path) -> Path:
    f = doc_gz_files(1)[0]
    target = src / "big.gz"
    target.write_bytes(gzip.compress(gzip.decompress(f.read_bytes()) * 4, compresslevel=1))
    return target


def _fails(run_src: Path, tmp_path: Path, text: str, names: str = "gunzip", **opts: object) -> str:
    before = snapshot(tmp_path)
    run = run_convert(run_src, tmp_path / "dst", names, **opts)
    [failed] = run.failed
    assert text in failed.message, failed.message
    assert failed.error_type == "ConversionError"
    assert str(run_src) in failed.message  # names the file
    assert "\n" not in failed.message
    assert run.staged() == []  # nothing of it staged, so nothing can be published
    after = snapshot(tmp_path) - before
    assert all(p.startswith("dst") for p in after), after  # nothing written outside DST
    return failed.message


def test_corrupt_gzip_byte_flipped_mid_stream(src: Path, tmp_path: Path) -> None:
    flip_byte(_gz_of_doc(src), 2000)
    msg = _fails(src, tmp_path, "cannot gunzip")
    assert "corrupt" in msg or "CRC" in msg


def test_gzip_with_bad_crc_trailer_only(src: Path, tmp_path: Path) -> None:
    flip_byte(_gz_of_doc(src), -6)  # inside the CRC-32 of the trailer
    _fails(src, tmp_path, "CRC check failed")


def test_truncated_gzip(src: Path, tmp_path: Path) -> None:
    truncate(_gz_of_doc(src), 0.5)
    _fails(src, tmp_path, "truncated input")


def test_gzip_with_trailing_garbage(src: Path, tmp_path: Path) -> None:
    path = _gz_of_doc(src)
    path.write_bytes(path.read_bytes() + b"garbage!")
    _fails(src, tmp_path, "trailing garbage")


def test_gzip_bomb_over_the_ratio(src: Path, tmp_path: Path) -> None:
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    with open(src / "bomb.gz", "wb") as f:
        for _ in range(64):
            f.write(z.compress(chunk))
        f.write(z.flush())
    assert (src / "bomb.gz").stat().st_size < 100_000  # 64 MiB of zeros
    msg = _fails(src, tmp_path, "decompression limit exceeded")
    assert "--max-expansion-ratio 100" in msg


def test_max_expanded_bytes_caps_a_stream(src: Path, tmp_path: Path) -> None:
    _gz_of_doc(src)
    _fails(src, tmp_path, "more than --max-expanded-bytes 1000", max_expanded_bytes=1000)


def test_unknown_converter_and_unusable_options_are_configuration_errors(tmp_path: Path) -> None:
    from distcp.configuration import CopyConfiguration

    with pytest.raises(ConfigurationError, match="unknown converters plugin 'zstd'"):
        CopyConfiguration.build([str(tmp_path)], "/x", converters=["zstd"])
    with pytest.raises(ConfigurationError, match="needs at least one --gpg-recipient"):
        CopyConfiguration.build([str(tmp_path)], "/x", converters=["encrypt"])
    with pytest.raises(ConfigurationError, match="--max-expansion-ratio must be positive"):
        CopyConfiguration.build([str(tmp_path)], "/x", converters=["gunzip"],
                                max_expansion_ratio=0)
