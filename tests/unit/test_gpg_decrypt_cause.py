"""Which cause a failed decryption reports, from gpg's status lines: every branch and
the precedence between them (the first matching cause is what the user reads)."""

from __future__ import annotations

import subprocess

import pytest

from distcp.converters.gpg import _decrypt_cause, status_lines

MISSING = "missing passphrase: give --gpg-passphrase-file or set PYDISTCP_GPG_PASSPHRASE"
UNKNOWN_SIGNER = ("signed by a key that is not in the keyring: gpg cannot check the "
                  "signature (import the signer's public key into --gpg-home)")
INTEGRITY = ("decryption failed or incomplete: integrity check (MDC) failed, the "
             "ciphertext is tampered or truncated")


def _cause(status: str, stderr: str = "", returncode: int = 2) -> str:
    lines = [("[GNUPG:] " + line) for line in status.split(";") if line]
    result = subprocess.CompletedProcess([], returncode, "", "\n".join([*lines, stderr]))
    return _decrypt_cause(status_lines(result.stderr), result)


@pytest.mark.parametrize("status, cause", [
    ("ERROR pkdecrypt_failed 83886091", "bad passphrase"),
    ("ERROR pkdecrypt_failed 177", MISSING),
    ("ERROR pkdecrypt_failed 85", MISSING),
    ("ERROR pkdecrypt_failed 9;ERROR pkdecrypt_failed 11", "bad passphrase"),
    ("ERROR pkdecrypt_failed 11;NO_SECKEY AAAA", "bad passphrase"),
    ("ERROR pkdecrypt_failed 9;NO_SECKEY AAAA;NO_SECKEY BBBB",
     "no secret key for AAAA BBBB in the keyring (check --gpg-home)"),
    ("NO_SECKEY AAAA;NODATA 1", "no secret key for AAAA in the keyring (check --gpg-home)"),
    ("NODATA 1;ERRSIG X;GOODMDC", "not OpenPGP encrypted data"),
    ("ERRSIG X;GOODMDC;BADSIG Y", UNKNOWN_SIGNER),
    ("NO_PUBKEY X;GOODMDC", UNKNOWN_SIGNER),
    ("NO_SECKEY AAAA;DECRYPTION_OKAY;BADSIG Y;BADMDC", "bad signature"),
    ("NODATA 1;BEGIN_DECRYPTION;BADMDC", INTEGRITY),
    ("ERRSIG X;BEGIN_DECRYPTION", INTEGRITY),
    ("BADMDC;GOODMDC", INTEGRITY),
])
def test_the_first_matching_cause_is_reported(status: str, cause: str) -> None:
    assert _cause(status) == cause


@pytest.mark.parametrize("status, stderr, returncode, cause", [
    ("BEGIN_DECRYPTION;GOODMDC", "gpg: first\ngpg: out of memory\nnot gpg", 2,
     "gpg exited 2: out of memory"),
    ("", "something else", 1, "gpg exited 1: no message"),
    ("ERROR pkdecrypt_failed 9;ERRSIG X", "", 0, "gpg exited 0: no message"),
])
def test_otherwise_gpg_s_last_message_is_reported(status: str, stderr: str, returncode: int,
                                                   cause: str) -> None:
    assert _cause(status, stderr, returncode) == cause


def test_no_stderr_at_all_is_no_message() -> None:
    result = subprocess.CompletedProcess([], 2, "", None)
    assert _decrypt_cause([], result) == "gpg exited 2: no message"
