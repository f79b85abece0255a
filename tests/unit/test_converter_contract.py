"""One contract, run on every registered converter (fsspec's abstract suites' shape).

Each converter gets a fixture: how to make a real input from real bytes, what the
planned destination becomes, and how a reference implementation reads the output
(the ``gzip``/``bz2``/``lzma``/``tarfile``/``zipfile`` modules, the real ``gpg``).
A converter registered without a fixture fails ``test_every_converter_has_a_fixture``
by name. The contract: bytes out match the reference; names are mapped as planned;
a truncated or corrupted input either fails with a ConversionError naming the file
(decoders) or is converted faithfully as the bytes it is (encoders); an empty
input file and an empty payload behave as the fixture states.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from distcp.converters.base import ConverterOptions, build_chain, rename_through
from distcp.errors import ConversionError
from distcp.registry import CONVERTERS
from tests.fixtures.archives import DOC, flip_byte, truncate
from tests.fixtures.convert import convert_bytes
from tests.fixtures.gpgkeys import ALICE, PASSPHRASE, encrypt, gpg, keyring

Outputs = list[tuple[str, bytes]]
#: A small tree for the archive converters: a directory, a binary and a text file.
#: The binary is incompressible, so a byte flipped in the middle of an archive lands in
#: member data, where only a checksum can catch it.
TREE = {"notes.txt": b"first line\nsecond line\n", "sub/": b"",
        "sub/data.bin": b"".join(hashlib.sha256(b"%d" % i).digest() for i in range(400))}


def payload() -> bytes:
    """Real bytes nobody here wrote: the largest copyright file in /usr/share/doc."""
    biggest = max((p for p in DOC.rglob("copyright") if p.is_file() and not p.is_symlink()),
                  key=lambda p: p.stat().st_size)
    return biggest.read_bytes()


def _tar(tree: dict[str, bytes], out: Path) -> None:
    with tarfile.open(out, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, data in tree.items():
            info = tarfile.TarInfo(name.rstrip("/"))
            info.mtime = 1_600_000_000
            if name.endswith("/"):
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))


def _zip(tree: dict[str, bytes], out: Path) -> None:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in tree.items():
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 2, 3, 4, 6)), data,
                       compress_type=zipfile.ZIP_DEFLATED)


def _untar_reference(path: Path, root: str) -> Outputs:
    out: Outputs = [(root, b"")]
    with tarfile.open(path) as tar:
        for m in tar.getmembers():
            if m.isdir():
                out.append((f"{root}{m.name}/", b""))
            else:
                out.append((root + m.name, tar.extractfile(m).read()))  # type: ignore[union-attr]
    return out


def _unzip_reference(path: Path, root: str) -> Outputs:
    with zipfile.ZipFile(path) as z:
        return [(root, b"")] + [(root + i.filename, b"" if i.is_dir() else z.read(i))
                                for i in z.infolist()]


def _gpg_decrypt(data: bytes) -> bytes:
    return gpg(keyring().home, "--decrypt", passphrase=PASSPHRASE, data=data).stdout


def _encrypt_to_alice(plain: bytes, out: Path) -> None:
    src = out.with_name(out.name + ".plain")
    src.write_bytes(plain)
    encrypt(keyring(), src, out)
    src.unlink()


@dataclass(frozen=True)
class Fixture:
    """How to test one converter: input ``source`` -> planned ``output``."""

    source: str
    output: str
    #: Write the converter's input at the path, from the payload (bytes or a TREE).
    make: Callable[[Any, Path], object]
    #: What a reference implementation makes of the input file: [(destination, bytes)].
    expected: Callable[[Path, str], Outputs]
    #: Applied to each output before comparing (encoders: decode with the reference).
    readback: Callable[[bytes], bytes] = lambda b: b
    options: Callable[[], dict[str, Any]] = dict
    tree: bool = False
    #: Decoders detect damage; encoders convert whatever bytes they are given.
    detects_damage: bool = True
    #: An input file of 0 bytes: None = refused with a ConversionError naming the file,
    #: else the outputs it gives (as bytes read back).
    empty_file: Outputs | None = field(default=None)


def _one(path: Path, root: str, decode: Callable[[bytes], bytes]) -> Outputs:
    return [(root, decode(path.read_bytes()))]


def _gpg_options() -> dict[str, Any]:
    return {"gpg_home": keyring().home, "gpg_passphrase": PASSPHRASE,
            "gpg_recipients": (ALICE,)}


FIXTURES: dict[str, Fixture] = {
    "gunzip": Fixture("data.csv.gz", "/out/data.csv",
                      lambda p, path: path.write_bytes(gzip.compress(p)),
                      lambda path, root: _one(path, root, gzip.decompress)),
    "bunzip2": Fixture("data.csv.bz2", "/out/data.csv",
                       lambda p, path: path.write_bytes(bz2.compress(p)),
                       lambda path, root: _one(path, root, bz2.decompress)),
    "unxz": Fixture("data.csv.xz", "/out/data.csv",
                    lambda p, path: path.write_bytes(lzma.compress(p)),
                    lambda path, root: _one(path, root, lzma.decompress)),
    "gzip": Fixture("data.csv", "/out/data.csv.gz",
                    lambda p, path: path.write_bytes(p),
                    lambda path, root: _one(path, root, lambda b: b),
                    readback=gzip.decompress, detects_damage=False,
                    empty_file=[("/out/data.csv.gz", b"")]),
    "decrypt": Fixture("data.csv.gpg", "/out/data.csv", _encrypt_to_alice,
                       lambda path, root: _one(path, root, _gpg_decrypt),
                       options=_gpg_options),
    "encrypt": Fixture("data.csv", "/out/data.csv.gpg",
                       lambda p, path: path.write_bytes(p),
                       lambda path, root: _one(path, root, lambda b: b),
                       readback=_gpg_decrypt, options=_gpg_options, detects_damage=False,
                       empty_file=[("/out/data.csv.gpg", b"")]),
    "untar": Fixture("bundle.tar.gz", "/out/bundle/", _tar, _untar_reference, tree=True),
    "unzip": Fixture("bundle.zip", "/out/bundle/", _zip, _unzip_reference, tree=True),
}
NAMES = sorted(FIXTURES)


def test_every_converter_has_a_fixture() -> None:
    missing = sorted(set(CONVERTERS.names()) - set(FIXTURES))
    assert not missing, f"converters without a contract fixture: {missing}"


@pytest.fixture(scope="module")
def plain() -> bytes:
    return payload()


def _input(name: str, tmp_path: Path, plain: bytes) -> Path:
    fx = FIXTURES[name]
    path = tmp_path / fx.source
    fx.make(TREE if fx.tree else plain, path)
    return path


def _run(name: str, path: Path) -> Outputs:
    fx = FIXTURES[name]
    return [(dest, fx.readback(data)) for dest, data in
            convert_bytes(path, name, **fx.options())]


def _refused(name: str, path: Path) -> ConversionError:
    with pytest.raises(ConversionError) as caught:
        _run(name, path)
    err = caught.value
    assert str(path) in str(err), f"the error does not name the input: {err}"
    assert err.attrs.get("path") == str(path)
    assert "\n" not in str(err)
    return err


@pytest.mark.parametrize("name", NAMES)
def test_bytes_out_match_the_reference(name: str, tmp_path: Path, plain: bytes) -> None:
    path = _input(name, tmp_path, plain)
    fx = FIXTURES[name]
    got = _run(name, path)
    assert got == fx.expected(path, fx.output)
    if not fx.tree:
        assert got[0][1] == plain  # and the reference saw the payload itself


@pytest.mark.parametrize("name", NAMES)
def test_names_are_mapped_as_planned(name: str, tmp_path: Path, plain: bytes) -> None:
    fx = FIXTURES[name]
    chain = build_chain([name], ConverterOptions(**fx.options()))
    assert rename_through(chain, f"/out/{fx.source}") == fx.output
    dests = [d for d, _ in _run(name, _input(name, tmp_path, plain))]
    if chain[0].one_to_many:
        assert dests[0] == fx.output
        assert sorted(dests[1:]) == sorted(fx.output + n for n in TREE)
    else:
        assert dests == [fx.output]


@pytest.mark.parametrize("name", NAMES)
def test_a_truncated_input_is_refused_naming_the_file_or_converted_as_is(
        name: str, tmp_path: Path, plain: bytes) -> None:
    path = _input(name, tmp_path, plain)
    truncate(path, 0.5)
    if FIXTURES[name].detects_damage:
        _refused(name, path)
    else:
        assert _run(name, path) == [(FIXTURES[name].output, path.read_bytes())]


@pytest.mark.parametrize("name", NAMES)
def test_a_corrupted_input_is_refused_naming_the_file_or_converted_as_is(
        name: str, tmp_path: Path, plain: bytes) -> None:
    path = _input(name, tmp_path, plain)
    flip_byte(path, path.stat().st_size // 2)
    if FIXTURES[name].detects_damage:
        _refused(name, path)
    else:
        assert _run(name, path) == [(FIXTURES[name].output, path.read_bytes())]


@pytest.mark.parametrize("name", NAMES)
def test_an_empty_input_file(name: str, tmp_path: Path) -> None:
    path = tmp_path / FIXTURES[name].source
    path.write_bytes(b"")
    want = FIXTURES[name].empty_file
    if want is None:
        _refused(name, path)
    else:
        assert _run(name, path) == want


@pytest.mark.parametrize("name", NAMES)
def test_an_empty_payload_gives_empty_outputs(name: str, tmp_path: Path) -> None:
    fx = FIXTURES[name]
    path = tmp_path / fx.source
    fx.make({} if fx.tree else b"", path)
    if fx.detects_damage:
        assert path.stat().st_size > 0  # a real, non-empty encoding of nothing
    got = _run(name, path)
    assert got == ([(fx.output, b"")])


@pytest.mark.parametrize("name", ["gunzip", "bunzip2", "unxz"])
def test_an_empty_compressed_file_is_called_truncated(name: str, tmp_path: Path) -> None:
    path = tmp_path / FIXTURES[name].source
    path.write_bytes(b"")
    err = _refused(name, path)
    assert str(err).startswith(f"cannot {name} {path}: truncated input")


def test_gzip_output_is_accepted_by_the_real_gzip(tmp_path: Path, plain: bytes) -> None:
    if shutil.which("gzip") is None:
        pytest.skip("no gzip(1) on this machine")
    [(_, packed)] = convert_bytes(_input("gzip", tmp_path, plain), "gzip")
    out = subprocess.run(["gzip", "-dc"], input=packed, capture_output=True, check=True)
    assert out.stdout == plain
