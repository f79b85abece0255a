"""decrypt / encrypt with the real gpg and a throwaway keyring; every GPG pitfall a test."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from distcp.converters.base import ConverterOptions
from distcp.errors import ConversionError
from distcp.model import CopyableFile, FileStatus
from distcp.streams import FileAwareInputStream
from tests.fixtures.archives import DOC, doc_tree, flip_byte, snapshot, tar_of, truncate
from tests.fixtures.convert import convert_bytes, run_convert
from tests.fixtures.gpgkeys import ALICE, CAROL, MALLORY, PASSPHRASE, Keyring, encrypt, gpg, keyring


@pytest.fixture(scope="session")
def ring() -> Keyring:
    return keyring()


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    """A real file nobody here wrote: the largest copyright file in /usr/share/doc."""
    biggest = max((p for p in DOC.rglob("copyright") if p.is_file() and not p.is_symlink()),
                  key=lambda p: p.stat().st_size)
    target = tmp_path / "plain" / "copyright"
    target.parent.mkdir()
    shutil.copy2(biggest, target)
    return target


def _src(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    return src


def _decrypt_fails(ring: Keyring, tmp_path: Path, text: str, passphrase: str | None = PASSPHRASE,
                   **opts: object) -> str:
    before = snapshot(tmp_path)
    run = run_convert(_src(tmp_path), tmp_path / "dst", "decrypt", gpg_home=ring.home,
                      gpg_passphrase=passphrase, **opts)
    [failed] = run.failed
    assert failed.error_type == "ConversionError"
    assert text in failed.message, failed.message
    assert failed.message.startswith(f"cannot decrypt {_src(tmp_path)}/")
    assert run.staged() == []  # the plaintext gpg produced was deleted
    assert all(p.startswith("dst") for p in snapshot(tmp_path) - before)
    if passphrase:
        assert passphrase not in failed.message
    return failed.message


def test_decrypt_real_gpg_output_and_strip_the_extension(ring: Keyring, plain: Path,
                                                         tmp_path: Path) -> None:
    src = _src(tmp_path)
    encrypt(ring, plain, src / "a.txt.gpg")
    encrypt(ring, plain, src / "b.txt.asc", armor=True)
    encrypt(ring, plain, src / "c.txt.pgp")
    run = run_convert(src, tmp_path / "dst", "decrypt", gpg_home=ring.home,
                      gpg_passphrase=PASSPHRASE)
    assert not run.failed, run.failed
    assert sorted(Path(r.destination).name for r in run.results) == ["a.txt", "b.txt", "c.txt"]
    for r in run.results:
        assert Path(r.staging).read_bytes() == plain.read_bytes()


def test_decrypt_gunzip_untar_of_a_real_tree(ring: Keyring, tmp_path: Path) -> None:
    docs = doc_tree(tmp_path / "docs", packages=3)
    src = _src(tmp_path)
    encrypt(ring, tar_of(docs, tmp_path / "docs.tar.gz"), src / "docs.tar.gz.gpg")
    run = run_convert(src, tmp_path / "dst", "decrypt,gunzip,untar", gpg_home=ring.home,
                      gpg_passphrase=PASSPHRASE)
    assert not run.failed, run.failed
    outputs = run.by_destination(tmp_path / "dst")
    for p in docs.rglob("*"):
        if p.is_file():
            staged = Path(outputs["docs/" + p.relative_to(docs).as_posix()].staging)
            assert staged.read_bytes() == p.read_bytes()


def test_wrong_key_is_no_secret_key(ring: Keyring, plain: Path, tmp_path: Path) -> None:
    encrypt(ring, plain, _src(tmp_path) / "x.gpg", to=CAROL)
    big = tmp_path / "big.bin"  # large enough that gpg quits before reading it all
    big.write_bytes(os.urandom(3 << 20))
    encrypt(ring, big, _src(tmp_path) / "y.gpg", to=CAROL)
    run = run_convert(_src(tmp_path), tmp_path / "dst", "decrypt", gpg_home=ring.home,
                      gpg_passphrase=PASSPHRASE)
    assert len(run.failed) == 2
    for failed in run.failed:
        assert "no secret key for" in failed.message, failed.message
    assert run.staged() == []


def test_missing_passphrase(ring: Keyring, plain: Path, tmp_path: Path) -> None:
    encrypt(ring, plain, _src(tmp_path) / "x.gpg")
    _decrypt_fails(ring, tmp_path, "missing passphrase: give --gpg-passphrase-file",
                   passphrase=None)


def test_bad_passphrase(ring: Keyring, plain: Path, tmp_path: Path) -> None:
    encrypt(ring, plain, _src(tmp_path) / "x.gpg")
    _decrypt_fails(ring, tmp_path, "bad passphrase", passphrase="n0t-1t-xyz")


def test_wrong_passphrase_after_a_right_one_fails_despite_the_agent(
        ring: Keyring, plain: Path, tmp_path: Path) -> None:
    encrypt(ring, plain, _src(tmp_path) / "x.gpg")
    ok = run_convert(_src(tmp_path), tmp_path / "ok", "decrypt", gpg_home=ring.home,
                     gpg_passphrase=PASSPHRASE)
    assert not ok.failed
    # The user's own agent on that keyring caches too: warm it with the right one.
    gpg(ring.home, "-o", os.devnull, "--decrypt", str(_src(tmp_path) / "x.gpg"),
        passphrase=PASSPHRASE)
    _decrypt_fails(ring, tmp_path, "bad passphrase", passphrase="Tr0ub4dor-x")
    _decrypt_fails(ring, tmp_path, "missing passphrase", passphrase=None)
    assert not (Path(ring.home) / "gpg-agent.conf").exists()  # the user's config untouched


def test_tampered_ciphertext_fails_the_integrity_check(ring: Keyring, tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(4 << 20))
    encrypt(ring, big, _src(tmp_path) / "big.bin.gpg")
    flip_byte(_src(tmp_path) / "big.bin.gpg", -100)  # near the end: gpg wrote MiBs already
    msg = _decrypt_fails(ring, tmp_path, "integrity check (MDC) failed")
    assert "the partial plaintext was discarded" in msg


@pytest.mark.parametrize("chain", ["decrypt,gunzip,untar", "decrypt,untar", "decrypt,gunzip"])
@pytest.mark.parametrize("where", [0.1, 0.5, 0.9])
def test_tampered_ciphertext_is_named_as_such_wherever_the_damage(
        ring: Keyring, tmp_path: Path, chain: str, where: float) -> None:
    """A byte flipped anywhere in an encrypted archive decrypts to garbage that gzip's CRC
    or a tar header rejects before gpg reaches its integrity check at the end: the user
    reads the cause (the ciphertext), not the symptom (corrupt gzip, a bad tar header)."""
    payload = b"".join(hashlib.sha256(b"%d" % i).digest() for i in range(40_000))
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.bin").write_bytes(payload)
    archive = tar_of(tree, tmp_path / "a.tar", "w") if chain == "decrypt,untar" else (
        tar_of(tree, tmp_path / "a.tar.gz"))
    if chain == "decrypt,gunzip":
        archive = tmp_path / "a.bin.gz"
        archive.write_bytes(gzip.compress(payload))
    sealed = _src(tmp_path) / (archive.name + ".gpg")
    encrypt(ring, archive, sealed)
    flip_byte(sealed, int(sealed.stat().st_size * where))
    with pytest.raises(ConversionError) as caught:
        convert_bytes(sealed, chain, gpg_home=ring.home, gpg_passphrase=PASSPHRASE)
    message = str(caught.value)
    assert message.startswith(f"cannot decrypt {sealed}: "), message
    assert "integrity check (MDC) failed, the ciphertext is tampered" in message, message
    assert "gzip" not in message and "tar" not in message.split(": ", 1)[1], message


def test_truncated_ciphertext_fails(ring: Keyring, tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(2 << 20))
    encrypt(ring, big, _src(tmp_path) / "big.bin.gpg")
    truncate(_src(tmp_path) / "big.bin.gpg", 0.7)
    _decrypt_fails(ring, tmp_path, "decryption failed or incomplete")


def test_not_encrypted_input(ring: Keyring, plain: Path, tmp_path: Path) -> None:
    shutil.copy2(plain, _src(tmp_path) / "x.gpg")
    _decrypt_fails(ring, tmp_path, "cannot decrypt")


def test_unsigned_input_with_require_signature(ring: Keyring, plain: Path,
                                               tmp_path: Path) -> None:
    encrypt(ring, plain, _src(tmp_path) / "x.gpg")
    _decrypt_fails(ring, tmp_path, "not signed (--gpg-require-signature)",
                   gpg_require_signature=True)


def test_signed_by_an_unknown_key_with_require_signature(ring: Keyring, plain: Path,
                                                         tmp_path: Path) -> None:
    encrypt(ring, plain, _src(tmp_path) / "x.gpg", sign_with=MALLORY)
    _decrypt_fails(ring, tmp_path, "signed by a key that is not in the keyring",
                   gpg_require_signature=True)


def test_validly_signed_input_passes_require_signature(ring: Keyring, plain: Path,
                                                       tmp_path: Path) -> None:
    encrypt(ring, plain, _src(tmp_path) / "x.gpg", sign_with=ALICE)
    run = run_convert(_src(tmp_path), tmp_path / "dst", "decrypt", gpg_home=ring.home,
                      gpg_passphrase=PASSPHRASE, gpg_require_signature=True)
    assert not run.failed, run.failed


def test_encrypt_then_decrypt_round_trip_and_real_gpg_reads_it(ring: Keyring, plain: Path,
                                                              tmp_path: Path) -> None:
    [(dest, cipher)] = convert_bytes(plain, "encrypt", gpg_home=ring.home,
                                     gpg_recipients=(ALICE,))
    assert dest == "/out/copyright.gpg" and plain.read_bytes() not in cipher
    (tmp_path / "c.gpg").write_bytes(cipher)
    out = gpg(ring.home, "--decrypt", str(tmp_path / "c.gpg"), passphrase=PASSPHRASE).stdout
    assert out == plain.read_bytes()
    [(dest, back)] = convert_bytes(plain, "encrypt,decrypt", gpg_home=ring.home,
                                   gpg_recipients=(ALICE,), gpg_passphrase=PASSPHRASE)
    assert dest == "/out/copyright" and back == plain.read_bytes()


def test_encrypt_to_an_unknown_recipient(ring: Keyring, plain: Path, tmp_path: Path) -> None:
    shutil.copy2(plain, _src(tmp_path) / "x")
    run = run_convert(_src(tmp_path), tmp_path / "dst", "encrypt", gpg_home=ring.home,
                      gpg_recipients=("nobody@example.org",))
    assert "unusable recipient(s) nobody@example.org" in run.failed[0].message
    assert run.staged() == []


def test_passphrase_is_never_in_argv_or_repr(ring: Keyring, tmp_path: Path) -> None:
    """Watch every process's command line while gpg works on a slowly fed input."""
    from distcp.converters.gpg import DecryptConverter

    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(1 << 20))
    encrypt(ring, big, tmp_path / "big.gpg")
    options = ConverterOptions(gpg_home=ring.home, gpg_passphrase=PASSPHRASE)
    assert PASSPHRASE not in repr(options)
    seen: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for pid in os.listdir("/proc"):
                try:
                    seen.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"))
                except (OSError, ValueError):
                    pass
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        f = CopyableFile(FileStatus(str(big), 0, 0.0), "/out/big", "u", "s")
        with open(tmp_path / "big.gpg", "rb") as raw:
            outputs = DecryptConverter(options).convert(FileAwareInputStream.of(f, raw))
            out = next(outputs)
            assert out.stream.read() == big.read_bytes()
            outputs.close()
    finally:
        stop.set()
        watcher.join()
    assert any("--decrypt" in s for s in seen)  # the watcher did see gpg running
    assert not any(PASSPHRASE.replace(" ", "\x00") in s or PASSPHRASE in s for s in seen)


def test_signed_by_a_known_but_untrusted_key_with_require_signature(
        ring: Keyring, plain: Path, tmp_path: Path) -> None:
    import tempfile

    home = tempfile.mkdtemp(prefix="pu", dir="/tmp")  # short: the agent's socket lives here
    try:
        shutil.copytree(ring.home, home, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("S.*"))
        gpg(home, "--import", data=gpg(ring.other, "--export", MALLORY).stdout)
        encrypt(ring, plain, _src(tmp_path) / "x.gpg", sign_with=MALLORY)
        run = run_convert(_src(tmp_path), tmp_path / "dst", "decrypt", gpg_home=home,
                          gpg_passphrase=PASSPHRASE, gpg_require_signature=True)
        assert "signed by a key the keyring does not trust" in run.failed[0].message
        assert run.staged() == []
        plain_run = run_convert(_src(tmp_path), tmp_path / "dst2", "decrypt", gpg_home=home,
                                gpg_passphrase=PASSPHRASE)
        assert not plain_run.failed  # without the policy, a valid signature is enough
    finally:
        subprocess.run(["gpgconf", "--homedir", home, "--kill", "gpg-agent"])
        shutil.rmtree(home, ignore_errors=True)
