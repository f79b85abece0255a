"""One job-file value against its KeySpec: the type check, and the API's value (driver).

Problems come back as text (the loader adds file, line and key) and never quote the
value: a misplaced secret must not reach a terminal through an error message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from distcp.errors import ConfigurationError
from distcp.jobs.keys import KeySpec
from distcp.jobs.secrets import is_reference, resolve
from distcp.quantities import parse_duration, parse_size

_EXPECTED = {"bool": "a boolean", "int": "an integer", "float": "a number", "str": "a string",
             "size": "a size (bytes, or a string such as \"256M\")",
             "duration": "a duration (seconds, or a string such as \"24h\")",
             "list": "an array of strings", "table": "a table of strings",
             "secret": 'a secret reference: { env = "NAME" } or { file = "path" }'}


class ValueProblem(ValueError):
    """A value the key does not take; the message says what it takes."""


def type_name(value: Any) -> str:
    """The TOML type of a parsed value, for "expected X, got Y"."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "a table" if isinstance(value, Mapping) else "a date or time"


def checked(spec: KeySpec, value: Any, folder: str) -> Any:
    """``value`` as ``distcp.copy`` takes it for this key (paths resolved under the job
    file's ``folder``, references resolved); raises ValueProblem."""
    if not _has_type(spec.kind, value):
        raise ValueProblem(f"expected {_EXPECTED[spec.kind]}, got {type_name(value)}")
    if spec.choices and value not in spec.choices:
        raise ValueProblem(f"must be one of {', '.join(spec.choices)}")
    if spec.minimum is not None and value < spec.minimum:
        raise ValueProblem(f"must be at least {spec.minimum:g}")
    parse = {"size": parse_size, "duration": parse_duration}.get(spec.kind)
    if parse is not None:
        try:
            parse(value)
        except ConfigurationError as exc:
            raise ValueProblem(str(exc)) from None
    if spec.kind == "secret":
        return _resolved(value, folder)
    if spec.kind == "table":
        return {k: _resolved(v, folder) if is_reference(v) else v for k, v in value.items()}
    if spec.name == "check":
        return [_check_file(text, folder) for text in value]
    return resolve_path(value, folder) if spec.path else value


def _check_file(text: str, folder: str) -> str:
    """A check's ``NAME=@FILE`` argument is a file, relative to the job file's folder."""
    name, sep, arg = text.partition("=")
    if sep and arg.startswith("@"):
        return f"{name}=@{resolve_path(arg[1:], folder)}"
    return text


def _has_type(kind: str, value: Any) -> bool:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": number,
        "str": isinstance(value, str),
        "size": isinstance(value, str) or (number and float(value).is_integer()),
        "duration": isinstance(value, str) or number,
        "list": isinstance(value, list) and all(isinstance(v, str) for v in value),
        "table": isinstance(value, Mapping) and all(
            isinstance(v, str) or is_reference(v) for v in value.values()),
        "secret": is_reference(value),
    }[kind]


def _resolved(reference: Mapping[str, str], folder: str) -> str:
    try:
        return resolve(reference, folder)
    except ValueError as exc:
        raise ValueProblem(str(exc)) from None


def resolved_tree(value: Any, folder: str) -> Any:
    """Storage options with every reference, at any depth, replaced by its secret."""
    if is_reference(value):
        return _resolved(value, folder)
    if isinstance(value, Mapping):
        return {k: resolved_tree(v, folder) for k, v in value.items()}
    if isinstance(value, list):
        return [resolved_tree(v, folder) for v in value]
    return value


def resolve_path(value: str, folder: str) -> str:
    """A relative local path is under the job file's folder; URLs, absolute paths and
    ``-`` (stdin/stdout) stay as written."""
    if value == "-" or "://" in value:
        return value
    expanded = os.path.expanduser(value)
    return os.path.normpath(os.path.join(folder, expanded))
