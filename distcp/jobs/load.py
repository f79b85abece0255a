"""Read and validate a job file: each problem one line naming file, line and key (driver).

Order: TOML syntax, inline secrets anywhere (before anything could echo one), then
each table's keys (unknown keys are errors, with the closest known key), values,
required keys, and last the branches together (names, routing).
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

from distcp.configuration import CREDENTIALS_IN_URL
from distcp.errors import ConfigurationError
from distcp.jobs.keys import NOT_IN_FILE, KeySpec
from distcp.jobs.lines import Path, key_lines, line_of
from distcp.jobs.model import ROUTE_KEYS, Branch, Dataset, Job, StorageRule
from distcp.jobs.secrets import is_reference, is_secret_name
from distcp.jobs.values import ValueProblem, checked, resolve_path, resolved_tree

TABLES = {"datasets": "dataset", "branches": "branch"}
_SECTION_HOME = {"run": "the top level (before any table)", "dataset": "[[datasets]]",
                 "branch": "[[branches]]"}


class Where:
    """The job file being read: its name and folder, and the line of each key."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.folder = os.path.dirname(os.path.abspath(path))
        self.lines = key_lines(text)

    def error(self, at: Path, problem: str) -> ConfigurationError:
        line = line_of(self.lines, at)
        key = dotted(at)
        place = f"{self.path}:{line}" if line else self.path
        return ConfigurationError(f"{place}: {key + ': ' if key else ''}{problem}",
                                  file=self.path, line=line, key=key)


def dotted(at: Path) -> str:
    """("branches", 1, "destination") -> "branches[1].destination"."""
    out = ""
    for part in at:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def load_job(path: str, keys: Sequence[KeySpec]) -> Job:
    """The job ``path`` describes, for the keys ``keys`` (from ``pydistcp copy``)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigurationError(f"cannot read job file {path}: {exc.strerror or exc}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"at line (\d+)", str(exc))
        place = f"{path}:{line.group(1)}" if line else path
        raise ConfigurationError(f"{place}: not valid TOML: {exc}", file=path) from None
    where = Where(path, text)
    refuse_inline_secrets(doc, (), where)
    by_section = {s: {k.name: k for k in keys if k.section == s} for s in _SECTION_HOME}
    settings = _table(doc, (), by_section, "run", where, extra=("storage", *TABLES))
    datasets = tuple(_dataset(t, at, by_section, where)
                     for at, t in _array(doc, "datasets", where))
    branches = tuple(_branch(t, at, by_section, where)
                     for at, t in _array(doc, "branches", where))
    job = Job(path, datasets, branches, settings, _storage(doc.get("storage", {}), where))
    _check_datasets_agree(job, doc, where)
    _check_branches(job, where)
    return job


def refuse_inline_secrets(value: Any, at: Path, where: Where) -> None:
    """A secret-named key whose value is not a reference, or a URL with credentials,
    anywhere in the document (a storage table's name is a URL, not a key)."""
    if isinstance(value, str) and CREDENTIALS_IN_URL.match(value):
        raise where.error(at, "a URL with credentials in it is an inline secret, refused; "
                              "give them in [storage] by reference")
    items = (value.items() if isinstance(value, Mapping) else
             enumerate(value) if isinstance(value, list) else ())
    for key, child in items:
        named = isinstance(key, str) and at != ("storage",)
        if named and is_secret_name(str(key)) and not is_reference(child):
            raise where.error(at + (key,), 'an inline secret is refused; write '
                              f'{key} = {{ env = "NAME" }} or {{ file = "path" }}')
        refuse_inline_secrets(child, at + (key,), where)


def _table(table: Mapping[str, Any], at: Path, by_section: dict[str, dict[str, KeySpec]],
           section: str, where: Where, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """The table's keys of ``section``, checked and converted; unknown keys refused."""
    known = by_section[section]
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key in extra:
            continue
        if key not in known:
            raise where.error(at + (key,), _unknown(key, section, by_section, extra))
        try:
            out[key] = checked(known[key], value, where.folder)
        except ValueProblem as exc:
            raise where.error(at + (key,), str(exc)) from None
    return out


def _unknown(key: str, section: str, by_section: dict[str, dict[str, KeySpec]],
             extra: tuple[str, ...]) -> str:
    """"unknown key", and the closest known key of this table, or where the key goes."""
    home = next((s for s, known in by_section.items() if key in known), None)
    if home is not None:
        return f"not a key of {_SECTION_HOME[section]}; it belongs in {_SECTION_HOME[home]}"
    if key in NOT_IN_FILE:
        return f"not a job-file key; use {NOT_IN_FILE[key]}"
    close = difflib.get_close_matches(key, [*by_section[section], *extra], n=1, cutoff=0.6)
    return "unknown key" + (f"; did you mean {close[0]!r}?" if close else "")


def _array(doc: Mapping[str, Any], name: str, where: Where) -> list[tuple[Path, Any]]:
    """(path, table) of each ``[[name]]`` table; at least one is needed."""
    tables = doc.get(name)
    if tables is None:
        raise where.error((), f"no [[{name}]] table: a job needs at least one")
    if not isinstance(tables, list) or not all(isinstance(t, Mapping) for t in tables):
        raise where.error((name,), f"must be [[{name}]] tables, not {_shape(tables)}")
    return [((name, i), t) for i, t in enumerate(tables)]


def _shape(value: Any) -> str:
    return "a [table]" if isinstance(value, Mapping) else "a plain value"


def _dataset(table: Mapping[str, Any], at: Path, by_section: dict[str, dict[str, KeySpec]],
             where: Where) -> Dataset:
    values = _table(table, at, by_section, "dataset", where)
    if "source" not in values:
        raise where.error(at, "source is missing: the dataset reads nothing")
    finder = values.get("finder")
    if finder == "glob" and "dataset_glob" not in values:
        raise where.error(at + ("finder",), "the glob finder needs dataset_glob")
    if finder == "single" and "dataset_glob" in values:
        raise where.error(at + ("dataset_glob",), "the single finder takes no dataset_glob")
    return Dataset(values.pop("source"), values)


def _branch(table: Mapping[str, Any], at: Path, by_section: dict[str, dict[str, KeySpec]],
            where: Where) -> Branch:
    values = _table(table, at, by_section, "branch", where)
    if "destination" not in values:
        raise where.error(at, "destination is missing: the branch writes nowhere")
    name = values.pop("name", f"fork_{at[-1]}")
    if not name or not all(c.isalnum() or c in "._-" for c in name) or name[0] in ".-":
        raise where.error(at + ("name",), "use letters, digits, '.', '_' and '-' (it names "
                                          "the branch's folders and records)")
    destination = values.pop("destination")
    publisher = values.pop("publisher", "rename")
    return Branch(name, destination, values, publisher=publisher)


def _storage(tables: Any, where: Where) -> tuple[StorageRule, ...]:
    """``[storage."PREFIX"]`` tables, references resolved; a relative local prefix is
    under the job file's folder, like any path the file names."""
    if not isinstance(tables, Mapping):
        raise where.error(("storage",), 'must be tables: [storage."s3://bucket"]')
    rules = []
    for prefix, options in tables.items():
        at: Path = ("storage", prefix)
        if not isinstance(options, Mapping):
            raise where.error(at, f"expected a table of storage options, got {_shape(options)}")
        resolved = {}
        for key, value in options.items():
            try:
                resolved[key] = resolved_tree(value, where.folder)
            except ValueProblem as exc:
                raise where.error(at + (key,), str(exc)) from None
        side = prefix in ("source", "destination")
        rules.append(StorageRule(prefix if side else resolve_path(prefix, where.folder),
                                 resolved))
    return tuple(rules)


def _check_datasets_agree(job: Job, doc: Mapping[str, Any], where: Where) -> None:
    """Several datasets run as one copy of several SRCs, which share one set of finder
    and storage options: refuse a dataset that differs (one job per set, for now)."""
    first = job.datasets[0]
    for index, dataset in enumerate(job.datasets[1:], 1):
        at: Path = ("datasets", index)
        for key in sorted(set(first.options) | set(dataset.options)):
            if first.options.get(key) != dataset.options.get(key):
                raise where.error(at + (key,) if key in doc["datasets"][index] else at,
                                  f"differs from datasets[0]'s {key}: the datasets of one "
                                  "job share their finder options (use one job per set)")
        if (job.storage_options(dataset.source, "source")
                != job.storage_options(first.source, "source")):
            raise where.error(at + ("source",), "its storage options differ from "
                              "datasets[0]'s: the sources of one job share them (use one "
                              "job per filesystem)")


def _check_branches(job: Job, where: Where) -> None:
    """Names are unique; routing rules choose between branches, so they need two."""
    names = [b.name for b in job.branches]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise where.error(("branches", index, "name"), f"branch name {name!r} is taken")
    if len(job.branches) == 1:
        route = next((k for k in ROUTE_KEYS if k in job.branches[0].options), None)
        if route is not None:
            raise where.error(("branches", 0, route), "routing chooses between branches: a "
                                                      "job of one branch takes every file")
