"""The events and their JSON form, built with OpenLineage's model classes (driver).

Made with the ``openlineage-python`` client's model classes, never JSON written by hand.

Run ids are UUIDs derived from what identifies the run (the job id; a file set's
commit sequence id), so an event sent again after a crash or a replay carries the
same run id as well as the same idempotency key.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import attr
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import RunFacet, error_message_run, parent_run
from openlineage.client.serde import Serde

from distcp import __version__
from distcp.events.naming import dataset_name

#: Who made the event (OpenLineage's ``producer``: a URI naming the software).
PRODUCER = f"https://pypi.org/project/pydistcp/{__version__}/"
#: The job namespace every pydistcp event uses.
JOB_NAMESPACE = "pydistcp"
#: Identifies the schema of the ``pydistcp_copy`` facet (docs/openlineage/pydistcp_copy.json).
FACET_SCHEMA = "urn:pydistcp:openlineage:PydistcpCopyRunFacet:1"
_IDS = uuid.UUID("6c1f4d0e-8a53-4b1e-9d43-5f0f2a7b9c11")  # namespace of our uuid5 run ids


@attr.define
class PydistcpCopyRunFacet(RunFacet):
    """What a published file set holds: the ``pydistcp_copy`` run facet."""

    file_set: str
    files: int
    bytes: int
    digest_algorithm: str
    branch: str
    idempotency_key: str
    #: A stream dataset's watermarks after the set (ISO 8601, UTC), else empty.
    watermarks: dict[str, str] = attr.field(factory=dict)

    @staticmethod
    def _get_schema() -> str:
        return FACET_SCHEMA


def run_id(identity: str) -> str:
    """The run id of the run ``identity`` names (a job id, a sequence id): stable."""
    return str(uuid.uuid5(_IDS, identity))


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def iso(epoch: float | None) -> str | None:
    return None if epoch is None else dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat()


def _inputs(urls: Sequence[str]) -> list[InputDataset]:
    return [InputDataset(*dataset_name(u)) for u in urls]


def _outputs(urls: Sequence[str]) -> list[OutputDataset]:
    return [OutputDataset(*dataset_name(u)) for u in urls]


def job_name(destination: str) -> str:
    """The job's name: what it writes to (one pydistcp job per destination)."""
    namespace, name = dataset_name(destination)
    return f"copy {namespace}/{name}" if namespace != "file" else f"copy {name}"


def run_event(state: str, job_id: str, destination: str, sources: Sequence[str],
              error: str | None = None, at: str | None = None) -> RunEvent:
    """The run's own START, COMPLETE or FAIL (``error``: the FAIL's message; ``at``:
    when it happened, ISO 8601, else now)."""
    facets: dict[str, RunFacet] = {}
    if error:
        facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=error, programmingLanguage="python", producer=PRODUCER)
    return RunEvent(eventType=RunState[state], eventTime=at or _now(), producer=PRODUCER,
                    run=Run(runId=run_id(job_id), facets=facets),
                    job=Job(namespace=JOB_NAMESPACE, name=job_name(destination)),
                    inputs=_inputs(sources), outputs=_outputs([destination]))


def file_set_event(*, key: str, job_id: str, run_destination: str, source: str,
                   destination: str, file_set: str, files: int, nbytes: int,
                   digest_algorithm: str, branch: str,
                   watermarks: Mapping[str, float | None]) -> RunEvent:
    """COMPLETE of one published file set, a child run of the job's run."""
    parent = parent_run.ParentRunFacet(
        run=parent_run.Run(runId=run_id(job_id)),
        job=parent_run.Job(namespace=JOB_NAMESPACE, name=job_name(run_destination)),
        producer=PRODUCER)
    marks = {k: v for k, v in ((k, iso(at)) for k, at in watermarks.items()) if v}
    copy = PydistcpCopyRunFacet(file_set=file_set, files=files, bytes=nbytes,
                                digest_algorithm=digest_algorithm, branch=branch,
                                idempotency_key=key, watermarks=marks, producer=PRODUCER)
    return RunEvent(eventType=RunState.COMPLETE, eventTime=_now(), producer=PRODUCER,
                    run=Run(runId=run_id(key), facets={"parent": parent, "pydistcp_copy": copy}),
                    job=Job(namespace=JOB_NAMESPACE, name=f"{job_name(destination)} file set"),
                    inputs=_inputs([source]), outputs=_outputs([destination]))


def to_json(event: RunEvent) -> str:
    return str(Serde.to_json(event))


def to_dict(event: RunEvent) -> dict[str, Any]:
    out: dict[str, Any] = Serde.to_dict(event)
    return out
