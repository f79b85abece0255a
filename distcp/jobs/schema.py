"""The job-file format as a JSON Schema for editors, docs/job.schema.json (driver).

Generated from the same KeySpecs the loader checks against, so the schema cannot
list a key the loader refuses or miss one it takes. ``python -m distcp.jobschema
--write docs/job.schema.json`` rewrites it after a flag of ``copy`` changes;
tests/unit/test_job_schema.py fails while the committed file differs. The loader
stays the authority for what a schema cannot say (one branch for now, datasets
that agree, references that resolve).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from distcp.jobs.keys import KeySpec
from distcp.jobs.secrets import schema_pattern

SCHEMA_PATH = "docs/job.schema.json"
_SECRET = {"$ref": "#/$defs/secret"}


def job_schema(keys: Sequence[KeySpec]) -> dict[str, Any]:
    """The schema of a job file whose keys are ``keys``."""
    def section(name: str) -> dict[str, Any]:
        return {k.name: _property(k) for k in keys if k.section == name}

    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "pydistcp job file",
        "description": "One job for `pydistcp run JOB.toml`: [[datasets]] to read, "
                       "[[branches]] to write, [storage.\"PREFIX\"] options, and the "
                       "copy's settings as top-level keys (see docs/guide/jobs-and-fork.md).",
        "type": "object",
        "additionalProperties": False,
        "required": ["datasets", "branches"],
        "properties": {
            **section("run"),
            "datasets": _array_of("A dataset to read.", section("dataset"), "source"),
            "branches": _array_of("A branch: where and how the datasets are written "
                                  "(one per job until the fork arrives).",
                                  section("branch"), "destination"),
            "storage": {"description": "fsspec storage options per URL prefix "
                                       "(\"s3://bucket\", \"s3://\") or side (\"source\", "
                                       "\"destination\"); the longest prefix wins.",
                        "type": "object",
                        "additionalProperties": {"$ref": "#/$defs/storage_options"}},
        },
        "$defs": _definitions(),
    }


def _array_of(description: str, properties: dict[str, Any], required: str) -> dict[str, Any]:
    return {"description": description, "type": "array", "minItems": 1,
            "items": {"type": "object", "additionalProperties": False,
                      "required": [required], "properties": properties}}


def _property(key: KeySpec) -> dict[str, Any]:
    """One key's schema: its JSON type, choices, minimum, default and help."""
    if key.kind == "secret":
        return {**_SECRET, "description": key.help}
    out: dict[str, Any] = {"description": key.help} if key.help else {}
    out.update(_TYPES[key.kind])
    if key.choices:
        out["enum"] = list(key.choices)
    if key.minimum is not None:
        out["minimum"] = key.minimum
    if key.default is not None:
        out["default"] = key.default
    return out


_TYPES: dict[str, dict[str, Any]] = {
    "bool": {"type": "boolean"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "str": {"type": "string"},
    "size": {"type": ["string", "integer"]},
    "duration": {"type": ["string", "number"]},
    "list": {"type": "array", "items": {"type": "string"}},
    "table": {"type": "object", "additionalProperties": {
        "anyOf": [{"type": "string"}, _SECRET]}},
}


def _definitions() -> dict[str, Any]:
    """A secret reference, and storage options (free-form, but a key named like a
    secret takes only a reference)."""
    reference = {"type": "string", "minLength": 1}
    return {
        "secret": {"description": "A secret by reference, never inline: an environment "
                                  "variable, or a file (relative to the job file) whose "
                                  "text without its final line break is the secret.",
                   "oneOf": [
                       {"type": "object", "additionalProperties": False,
                        "required": ["env"], "properties": {"env": reference}},
                       {"type": "object", "additionalProperties": False,
                        "required": ["file"], "properties": {"file": reference}}]},
        "storage_options": {"type": "object",
                            "patternProperties": {schema_pattern(): _SECRET},
                            "additionalProperties": True},
    }


def render(keys: Sequence[KeySpec]) -> str:
    """The schema as committed: indented, keys in their generated order, final newline."""
    return json.dumps(job_schema(keys), indent=2) + "\n"
