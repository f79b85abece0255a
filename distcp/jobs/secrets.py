"""Job-file secrets, by reference only: ``{ env = "NAME" }`` or ``{ file = "path" }`` (driver).

A job file is read by people, committed, diffed and copied into tickets; a secret
written in it leaks with it. So any key whose name says it holds a secret
(secret, password, passphrase, token, credential, private, key) must be a
reference, resolved when the job loads; the value then lives only in the storage
options and converter settings, which no repr, log, summary or state shows.
Names that say where a key is, not what it is (``key_file``, ``key_id``, ``gpg_home``
...), are not secrets.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

#: Words that make a key a secret (searched case-insensitively in the key's name).
SECRET_WORDS = ("secret", "passw", "passphrase", "token", "credential", "private", "key")
#: Endings that make a key name a place or an identifier, not secret material.
NOT_SECRET_ENDINGS = ("file", "filename", "path", "dir", "home", "id", "ids")
#: The one definition of "a secret's name", for the loader and the JSON Schema.
SECRET_NAME = (rf"^(?!.*({'|'.join(NOT_SECRET_ENDINGS)})$)"
               rf".*({'|'.join(SECRET_WORDS)})")
_SECRET_NAME = re.compile(SECRET_NAME, re.IGNORECASE)
REFERENCE_FORMS = ("env", "file")


def is_secret_name(key: str) -> bool:
    """Whether a key's name says it holds a secret (``secret``, ``aws_secret_access_key``,
    ``spark.hadoop.fs.s3a.access.key``), so its value may only be a reference."""
    return bool(_SECRET_NAME.search(key))


def is_reference(value: Any) -> bool:
    """``{ env = "NAME" }`` or ``{ file = "path" }``: one key, a non-empty string."""
    return (isinstance(value, Mapping) and len(value) == 1
            and next(iter(value)) in REFERENCE_FORMS
            and isinstance(next(iter(value.values())), str)
            and bool(next(iter(value.values()))))


def resolve(reference: Mapping[str, str], folder: str) -> str:
    """The secret a reference names: the variable's value, or the file's text without
    its final line break (a relative path is under ``folder``, the job file's).
    Raises ValueError with the cause (never the value)."""
    if "env" in reference:
        name = reference["env"]
        if name not in os.environ:
            raise ValueError(f"environment variable {name} is not set")
        return os.environ[name]
    path = os.path.join(folder, os.path.expanduser(reference["file"]))
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().rstrip("\r\n")
    except OSError as exc:
        raise ValueError(f"cannot read secret file {path}: {exc.strerror or exc}") from None


def schema_pattern() -> str:
    """SECRET_NAME for a JSON Schema (ECMA-262 has no flags): each letter as [xX]."""
    return re.sub(r"[a-z]", lambda m: f"[{m.group()}{m.group().upper()}]", SECRET_NAME)
