"""The events as OpenLineage's JSON documents (driver).

Written as plain dicts in the form the ``openlineage-python`` client's model classes
serialise to (``Serde.to_dict``: OpenLineage 2-0-2 run events), not made with those
classes: importing the client takes 0.2-0.3 s (its package imports every transport,
``requests`` and ``httpx`` among them), which was a third of a small run's wall time on
the warm engine, and pydistcp sends events with its own sinks. The client stays the
judge: tests/unit/test_events_model.py builds every event both ways and holds them to
the same document, and the events' schema check (tests/fixtures/events_server.py)
validates them against OpenLineage's published schema.

Run ids are UUIDs derived from what identifies the run (the job id; a file set's
commit sequence id), so an event sent again after a crash or a replay carries the
same run id as well as the same idempotency key.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from distcp import __version__
from distcp.events.naming import dataset_name

#: Who made the event (OpenLineage's ``producer``: a URI naming the software).
PRODUCER = f"https://pypi.org/project/pydistcp/{__version__}/"
#: The job namespace every pydistcp event uses.
JOB_NAMESPACE = "pydistcp"
#: Identifies the schema of the ``pydistcp_copy`` facet (docs/openlineage/pydistcp_copy.json).
FACET_SCHEMA = "urn:pydistcp:openlineage:PydistcpCopyRunFacet:1"
#: The schemas the client's model classes name (openlineage-python 1.54; the oracle test
#: says when a newer client names others).
RUN_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
ERROR_FACET_SCHEMA = ("https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json"
                      "#/$defs/ErrorMessageRunFacet")
PARENT_FACET_SCHEMA = ("https://openlineage.io/spec/facets/1-2-0/ParentRunFacet.json"
                       "#/$defs/ParentRunFacet")
_IDS = uuid.UUID("6c1f4d0e-8a53-4b1e-9d43-5f0f2a7b9c11")  # namespace of our uuid5 run ids
STATES = ("START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER")

Event = dict[str, Any]


def run_id(identity: str) -> str:
    """The run id of the run ``identity`` names (a job id, a sequence id): stable."""
    return str(uuid.uuid5(_IDS, identity))


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def iso(epoch: float | None) -> str | None:
    return None if epoch is None else dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat()


def job_name(destination: str) -> str:
    """The job's name: what it writes to (one pydistcp job per destination)."""
    namespace, name = dataset_name(destination)
    return f"copy {namespace}/{name}" if namespace != "file" else f"copy {name}"


def _datasets(urls: Sequence[str], facets: str) -> list[Event]:
    return [{"namespace": namespace, "name": name, "facets": {}, facets: {}}
            for namespace, name in map(dataset_name, urls)]


def _facet(schema: str, **fields: Any) -> Event:
    return {"_producer": PRODUCER, "_schemaURL": schema, **fields}


def _event(state: str, at: str, run: Event, job: Event, inputs: Sequence[str],
           outputs: Sequence[str]) -> Event:
    if state not in STATES:
        raise ValueError(f"not an OpenLineage run state: {state!r}")
    return {"eventTime": at, "producer": PRODUCER, "schemaURL": RUN_EVENT_SCHEMA,
            "run": run, "job": job, "eventType": state,
            "inputs": _datasets(inputs, "inputFacets"),
            "outputs": _datasets(outputs, "outputFacets")}


def run_event(state: str, job_id: str, destination: str, sources: Sequence[str],
              error: str | None = None, at: str | None = None) -> Event:
    """The run's own START, COMPLETE or FAIL (``error``: the FAIL's message; ``at``:
    when it happened, ISO 8601, else now)."""
    facets: Event = {}
    if error:
        facets["errorMessage"] = _facet(ERROR_FACET_SCHEMA, message=error,
                                        programmingLanguage="python")
    return _event(state, at or now(), {"runId": run_id(job_id), "facets": facets},
                  {"namespace": JOB_NAMESPACE, "name": job_name(destination), "facets": {}},
                  sources, [destination])


def file_set_event(*, key: str, job_id: str, run_destination: str, source: str,
                   destination: str, file_set: str, files: int, nbytes: int,
                   digest_algorithm: str, branch: str,
                   watermarks: Mapping[str, float | None], at: str | None = None) -> Event:
    """COMPLETE of one published file set, a child run of the job's run."""
    parent = _facet(PARENT_FACET_SCHEMA, run={"runId": run_id(job_id), "facets": {}},
                    job={"namespace": JOB_NAMESPACE, "name": job_name(run_destination),
                         "facets": {}})
    marks = {k: v for k, v in ((k, iso(when)) for k, when in watermarks.items()) if v}
    copy = _facet(FACET_SCHEMA, file_set=file_set, files=files, bytes=nbytes,
                  digest_algorithm=digest_algorithm, branch=branch, idempotency_key=key,
                  watermarks=marks)
    return _event("COMPLETE", at or now(),
                  {"runId": run_id(key), "facets": {"parent": parent, "pydistcp_copy": copy}},
                  {"namespace": JOB_NAMESPACE, "name": f"{job_name(destination)} file set",
                   "facets": {}},
                  [source], [destination])
