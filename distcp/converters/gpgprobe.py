"""``decrypt``'s preflight: whether the keyring opens with this passphrase (driver).

A wrong passphrase used to surface after Spark's start (13 s and more), once per file.
Here, in a private non-caching copy of the keyring (``gpghome``), a few bytes are
encrypted to each secret key that can decrypt and decrypted again with the run's
passphrase: exactly what the tasks will do, in well under a second. Only what the
probe proves is refused: no key that can decrypt, the passphrase unlocks none of them,
or none is usable without a passphrase. Any other outcome (an odd keyring, a smartcard
key) lets the run go on, and the tasks report per file, as before.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from distcp.converters.gpghome import private_home, user_home
from distcp.errors import ConfigurationError, EnvironmentProblem

_BAD_PASSPHRASE = 11
_NO_PASSPHRASE = {85, 177}
_PASSPHRASE_SETTING = "--gpg-passphrase-file or PYDISTCP_GPG_PASSPHRASE"
_TIMEOUT = 30


class GpgMissingError(EnvironmentProblem):
    """``gpg`` is not installed where the tasks run (exit 3, like a missing Java)."""


def probe_decrypt(gpg_home: str | None, passphrase: str | None) -> None:
    """Raise a one-line error when no secret key of the keyring can decrypt with
    ``passphrase``; return quietly when one can or when the probe cannot tell."""
    if shutil.which("gpg") is None:
        raise GpgMissingError("--convert decrypt needs gpg, which is not installed (not on "
                              "PATH); install GnuPG 2")
    home = user_home(gpg_home)
    if not os.path.isdir(home):
        raise ConfigurationError(f"--gpg-home {home}: no such directory (the keyring to "
                                 "decrypt with)")
    with private_home(gpg_home, home) as private:
        keys = _decryption_keys(private)
        if not keys:
            raise ConfigurationError(f"--gpg-home {home}: no secret key that can decrypt "
                                     "(gpg --list-secret-keys shows none); check --gpg-home")
        codes = [_try(private, key, passphrase) for key in keys]
    if 0 in codes or any(c is None for c in codes):
        return
    if all(c == _BAD_PASSPHRASE for c in codes):
        raise ConfigurationError(f"the GPG passphrase ({_PASSPHRASE_SETTING}) unlocks none of "
                                 f"the {len(keys)} secret key(s) in {home}: bad passphrase")
    if passphrase is None and all(c in _NO_PASSPHRASE for c in codes):
        raise ConfigurationError(f"the secret key(s) in {home} need a passphrase: give "
                                 f"{_PASSPHRASE_SETTING}")


def _gpg(home: str, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["gpg", "--homedir", home, "--batch", "--no-tty", "--status-fd", "2",
                           *args], input=stdin, capture_output=True, timeout=_TIMEOUT,
                          check=False)


def _decryption_keys(home: str) -> list[str]:
    """Fingerprints of secret (sub)keys with the encrypt capability."""
    listing = _gpg(home, "--with-colons", "--list-secret-keys").stdout.decode(
        errors="replace").splitlines()
    keys, capable = [], False
    for line in listing:
        fields = line.split(":")
        if fields[0] in ("sec", "ssb"):
            capable = len(fields) > 11 and "e" in fields[11] and fields[1] not in ("r", "e")
        elif fields[0] == "fpr" and capable:
            keys.append(fields[9])
            capable = False
    return keys


def _try(home: str, key: str, passphrase: str | None) -> int | None:
    """0 when ``key`` decrypts with ``passphrase``; gpg's error code when it cannot;
    None when the probe itself could not run (nothing to conclude)."""
    try:
        sealed = _gpg(home, "--trust-model", "always", "--encrypt", "--recipient", key + "!",
                      stdin=b"pydistcp probe")
        if sealed.returncode != 0:
            return None
        if passphrase is None:
            opened = _gpg(home, "--pinentry-mode", "error", "--decrypt", stdin=sealed.stdout)
        else:  # the passphrase on fd 0 and the data from a file: never in argv
            path = os.path.join(home, "probe.gpg")
            with open(path, "wb") as f:
                f.write(sealed.stdout)
            opened = _gpg(home, "--pinentry-mode", "loopback", "--passphrase-fd", "0",
                          "--decrypt", path, stdin=(passphrase + "\n").encode())
    except (OSError, subprocess.TimeoutExpired):
        return None
    status = opened.stderr.decode(errors="replace")
    if opened.returncode == 0 and "DECRYPTION_OKAY" in status:
        return 0
    for line in status.splitlines():
        parts = line.split()
        if line.startswith("[GNUPG:] ERROR pkdecrypt_failed") or (
                line.startswith("[GNUPG:] FAILURE") and len(parts) >= 4):
            try:
                return int(parts[-1]) & 0xFFFF
            except ValueError:
                return None
    return None
