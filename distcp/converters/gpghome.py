"""A private, throwaway GnuPG home for one gpg run, so gpg-agent cannot cache (driver and executor).

gpg-agent caches passphrases: after one right passphrase, a wrong one succeeds
(PITFALLS.md, GPG). We do not edit the user's agent configuration; instead each
run copies only what gpg needs (public keyring, trust database, secret key
files, gpg.conf) into a fresh 0700 directory whose own agent is configured with
``default-cache-ttl 0`` and ``max-cache-ttl 0``, then kills that agent and
deletes the copy. A short parent directory keeps the agent's socket path under
the ~107-byte limit of Unix sockets. Measured cost: about 0.1-0.7 s per run
(the agent's start), paid once per encrypted file, not per byte.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from distcp.errors import ConversionError

#: What gpg reads from a home directory; everything else (sockets, random seed,
#: revocation certificates, backups) stays behind.
_FILES = ("pubring.kbx", "pubring.gpg", "trustdb.gpg", "gpg.conf")
_AGENT_CONF = "default-cache-ttl 0\nmax-cache-ttl 0\nallow-loopback-pinentry\n"


def user_home(gpg_home: str | None) -> str:
    """``--gpg-home``, else ``$GNUPGHOME``, else ``~/.gnupg`` (gpg's own order)."""
    return gpg_home or os.environ.get("GNUPGHOME") or os.path.expanduser("~/.gnupg")


def _short_tmp() -> str:
    tmp = tempfile.gettempdir()
    return tmp if len(tmp) <= 40 else "/tmp"


@contextmanager
def private_home(gpg_home: str | None, origin: str) -> Iterator[str]:
    """A private copy of the keyring with a non-caching agent; removed on exit."""
    source = user_home(gpg_home)
    if not os.path.isdir(source):
        raise ConversionError(f"cannot use GnuPG home {source} for {origin}: not a directory; "
                              "check --gpg-home", path=origin)
    home = tempfile.mkdtemp(prefix="pdg", dir=_short_tmp())
    try:
        for name in _FILES:
            if os.path.isfile(os.path.join(source, name)):
                shutil.copy2(os.path.join(source, name), os.path.join(home, name))
        keys = os.path.join(source, "private-keys-v1.d")
        if os.path.isdir(keys):
            shutil.copytree(keys, os.path.join(home, "private-keys-v1.d"))
        with open(os.path.join(home, "gpg-agent.conf"), "w") as f:
            f.write(_AGENT_CONF)
        yield home
    finally:
        stop_agent(home)
        shutil.rmtree(home, ignore_errors=True)


def stop_agent(home: str) -> None:
    """Kill the agent gpg started for ``home`` (a no-op when none runs)."""
    try:
        subprocess.run(["gpgconf", "--homedir", home, "--kill", "gpg-agent"],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        pass
