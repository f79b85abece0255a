"""``decrypt`` and ``encrypt``: OpenPGP through python-gnupg and ``gpg`` (driver and executor).

Rules (PITFALLS.md, GPG; RELIABILITY.md rows 19-22):

- the passphrase goes to gpg on its stdin (``--pinentry-mode loopback
  --passphrase-fd 0``, as python-gnupg sends it), never in argv, a log or a repr;
- gpg runs against a private copy of the keyring whose agent caches nothing
  (``gpghome``), so a wrong passphrase after a right one fails;
- gpg writes plaintext before it knows whether the integrity check (MDC)
  passes. Output is streamed only into the task's private staging area, and a
  run is accepted only when gpg exits 0 *and* reports both ``DECRYPTION_OKAY``
  and ``GOODMDC``; otherwise the reader raises at EOF and the task deletes
  everything staged from this file;
- ``--gpg-require-signature`` accepts only a good signature (``GOODSIG`` +
  ``VALIDSIG``) by a key the keyring trusts fully or ultimately; gpg itself
  decrypts unsigned data without complaint.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from typing import Any

from distcp.converters.base import Converter
from distcp.converters.gpghome import private_home
from distcp.converters.gpgpipe import GpgPipe
from distcp.converters.gpgprobe import probe_decrypt
from distcp.converters.names import GPG_SUFFIXES, replace_suffix
from distcp.errors import ConfigurationError, ConversionError
from distcp.storage.filesystems import display
from distcp.streams import FileAwareInputStream

#: libgpg-error codes (the low 16 bits of ``ERROR ... <code>``) we explain.
_BAD_PASSPHRASE = 11
_NO_PASSPHRASE = {85, 177}  # "No pinentry", "No passphrase given"


def status_lines(stderr: str) -> list[tuple[str, str]]:
    """``[GNUPG:] KEYWORD args`` lines of gpg's status output, in order."""
    out = []
    for line in (stderr or "").splitlines():
        if line.startswith("[GNUPG:] "):
            keyword, _, rest = line[9:].partition(" ")
            out.append((keyword, rest))
    return out


def _gpg(home: str) -> Any:
    import gnupg  # imported here: only tasks that convert pay for it

    return gnupg.GPG(gnupghome=home)


class _GpgConverter(Converter):
    """Shared plumbing: private home, the pipe, cleanup when the task is done.

    Never in a forked copying process: the preflight ran python-gnupg (its reader
    threads, a gpg child) in the command's process, and a child forked after it was
    killed by signal 11 or 6 starting gnupg's threads, in about one run of eight
    (2026-11-30), as a child forked after Azure's client had run was."""

    verb = ""
    forks = False

    def error(self, origin: str, why: str) -> ConversionError:
        return ConversionError(f"cannot {self.verb} {display(origin)}: {why}", path=origin)

    def run(self, stream: FileAwareInputStream, call: Any, check: Any,
            destination: str) -> Iterator[FileAwareInputStream]:
        origin = stream.file.origin.url
        with ExitStack() as stack:
            home = stack.enter_context(private_home(self.options.gpg_home, display(origin)))

            def failed(exc: BaseException) -> ConversionError:
                return self.error(origin, f"gpg could not run: {type(exc).__name__}: {exc}")

            pipe = GpgPipe(_gpg(home), call, stream.stream, lambda r: check(origin, r), failed)
            stack.callback(pipe.close)
            yield replace(stream, stream=pipe, destination=destination)


class DecryptConverter(_GpgConverter):
    """``decrypt``: strips ``.gpg``/``.pgp``/``.asc``; needs the secret key in --gpg-home."""

    name = "decrypt"
    verb = "decrypt"

    def rename(self, destination: str) -> str:
        return replace_suffix(destination, {s: "" for s in GPG_SUFFIXES})

    def check_options(self) -> None:
        if self.options.gpg_passphrase and "\n" in self.options.gpg_passphrase:
            raise ConfigurationError("the GPG passphrase must be one line")

    def preflight(self) -> None:
        probe_decrypt(self.options.gpg_home, self.options.gpg_passphrase)

    def convert(self, stream: FileAwareInputStream) -> Iterator[FileAwareInputStream]:
        passphrase = self.options.gpg_passphrase

        def call(gpg: Any, source: Any) -> Any:
            # Without a passphrase, never fall back to a pinentry or an agent's cache.
            extra = ["--pinentry-mode", "error"] if passphrase is None else None
            return gpg.decrypt_file(source, passphrase=passphrase, extra_args=extra)

        yield from self.run(stream, call, self._check, self.rename(stream.destination))

    def _check(self, origin: str, result: Any) -> None:
        status = status_lines(result.stderr)
        keys = {k for k, _ in status}
        ok = result.returncode == 0 and "DECRYPTION_OKAY" in keys and "GOODMDC" in keys
        if not ok:
            raise self.error(origin, _decrypt_cause(status, result) +
                             "; the partial plaintext was discarded")
        if self.options.gpg_require_signature:
            why = _signature_problem(status)
            if why:
                raise self.error(origin, f"{why} (--gpg-require-signature); the plaintext "
                                         "was discarded")


Status = list[tuple[str, str]]
_MISSING_PASSPHRASE = ("missing passphrase: give --gpg-passphrase-file or set "
                       "PYDISTCP_GPG_PASSPHRASE")


def _decrypt_cause(status: Status, result: Any) -> str:
    """Why a decryption failed, in the user's terms: the first cause gpg's status lines
    show, checked from the most to the least specific; else gpg's own last message."""
    keys = {k for k, _ in status}
    for cause in _DECRYPT_CAUSES:
        why = cause(status, keys)
        if why:
            return why
    return _gpg_exit_message(result)


def _passphrase_cause(status: Status, keys: set[str]) -> str | None:
    """A secret key that would not unlock: gpg says why only as an error code."""
    for keyword, rest in status:
        if keyword == "ERROR" and rest.startswith("pkdecrypt_failed"):
            code = int(rest.split()[-1]) & 0xFFFF
            if code == _BAD_PASSPHRASE:
                return "bad passphrase"
            if code in _NO_PASSPHRASE:
                return _MISSING_PASSPHRASE
    return None


def _secret_key_cause(status: Status, keys: set[str]) -> str | None:
    """Encrypted to keys the keyring lacks: name them, the user must find the right one."""
    if "NO_SECKEY" in keys and "DECRYPTION_OKAY" not in keys:
        ids = " ".join(rest for k, rest in status if k == "NO_SECKEY")
        return f"no secret key for {ids} in the keyring (check --gpg-home)"
    return None


def _not_encrypted_cause(status: Status, keys: set[str]) -> str | None:
    if "NODATA" in keys and "BEGIN_DECRYPTION" not in keys:
        return "not OpenPGP encrypted data"
    return None


def _signature_cause(status: Status, keys: set[str]) -> str | None:
    """The plaintext was intact (GOODMDC) but its signature could not be checked or is bad."""
    if keys & {"ERRSIG", "NO_PUBKEY"} and "GOODMDC" in keys:
        return ("signed by a key that is not in the keyring: gpg cannot check the signature "
                "(import the signer's public key into --gpg-home)")
    if "BADSIG" in keys:
        return "bad signature"
    return None


def _integrity_cause(status: Status, keys: set[str]) -> str | None:
    """Decryption began but never proved intact: tampered or truncated ciphertext."""
    if "BADMDC" in keys or ("BEGIN_DECRYPTION" in keys and "GOODMDC" not in keys):
        return ("decryption failed or incomplete: integrity check (MDC) failed, the "
                "ciphertext is tampered or truncated")
    return None


#: In order: the first that matches is the cause reported.
_DECRYPT_CAUSES = (_passphrase_cause, _secret_key_cause, _not_encrypted_cause,
                   _signature_cause, _integrity_cause)


def _gpg_exit_message(result: Any) -> str:
    """gpg's exit code and its last ``gpg:`` line, for failures no status line explains."""
    last = [line for line in (result.stderr or "").splitlines() if line.startswith("gpg: ")]
    return f"gpg exited {result.returncode}: {last[-1][5:] if last else 'no message'}"


def _signature_problem(status: list[tuple[str, str]]) -> str:
    keys = {k for k, _ in status}
    if "BADSIG" in keys:
        return "bad signature"
    if "ERRSIG" in keys or "NO_PUBKEY" in keys:
        return "signed by a key that is not in the keyring"
    if "GOODSIG" not in keys or "VALIDSIG" not in keys:
        return "not signed"
    if not keys & {"TRUST_FULLY", "TRUST_ULTIMATE"}:
        return "signed by a key the keyring does not trust"
    return ""


class EncryptConverter(_GpgConverter):
    """``encrypt``: to every --gpg-recipient (binary OpenPGP), appending ``.gpg``."""

    name = "encrypt"
    verb = "encrypt"

    def rename(self, destination: str) -> str:
        return destination + ".gpg"

    def check_options(self) -> None:
        if not self.options.gpg_recipients:
            raise ConfigurationError("--convert encrypt needs at least one --gpg-recipient")

    def convert(self, stream: FileAwareInputStream) -> Iterator[FileAwareInputStream]:
        recipients = list(self.options.gpg_recipients)

        def call(gpg: Any, source: Any) -> Any:
            return gpg.encrypt_file(source, recipients, armor=False)

        yield from self.run(stream, call, self._check, self.rename(stream.destination))

    def _check(self, origin: str, result: Any) -> None:
        status = status_lines(result.stderr)
        keys = {k for k, _ in status}
        if result.returncode == 0 and "END_ENCRYPTION" in keys:
            return
        bad = [rest.split(" ", 1)[-1] for k, rest in status if k == "INV_RECP"]
        if bad:
            raise self.error(origin, f"unusable recipient(s) {', '.join(bad)}: unknown, "
                                     "expired or untrusted key in --gpg-home")
        last = [line for line in (result.stderr or "").splitlines() if line.startswith("gpg: ")]
        raise self.error(origin, f"gpg exited {result.returncode}: "
                                 f"{last[-1][5:] if last else 'no message'}")
