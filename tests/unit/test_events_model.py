"""The events pydistcp writes as plain dicts are the documents the OpenLineage client's
model classes make (``tests/fixtures/openlineage_oracle.py``), and valid against
OpenLineage's schema: the client judges, without being imported by a run."""

from __future__ import annotations

import random

import pytest

from distcp.events import model
from tests.fixtures import openlineage_oracle as oracle
from tests.fixtures.events_server import validate

AT = "2026-11-29T00:00:00+00:00"


@pytest.mark.parametrize("state", ["START", "COMPLETE", "FAIL", "ABORT"])
@pytest.mark.parametrize("error", [None, "boom: one line", ""])
def test_run_events_are_the_clients(state: str, error: str | None) -> None:
    ours = model.run_event(state, "job-1", "s3://b/p", ["/src/a", "gs://x/y"], error, AT)
    assert ours == oracle.to_dict(oracle.run_event(state, "job-1", "s3://b/p",
                                                   ["/src/a", "gs://x/y"], error, AT))
    validate(ours)


URLS = ["/src/a b", "s3://bucket/key/x", "gs://g/p", "az://c/d/e", "file:///tmp/x", "/dst",
        "ftp://u@h:21/dir", "/ünï/cödé"]


def _text(rng: random.Random, least: int = 0) -> str:
    return "".join(rng.choice("ab-_./ é0\"'") for _ in range(rng.randint(least, 20)))


@pytest.mark.parametrize("seed", range(40))
def test_file_set_events_are_the_clients(seed: int) -> None:
    rng = random.Random(seed)
    args = dict(key=_text(rng, 1), job_id=_text(rng, 1), run_destination=rng.choice(URLS),
                source=rng.choice(URLS), destination=rng.choice(URLS),
                file_set=_text(rng), files=rng.randint(0, 10**9),
                nbytes=rng.randint(0, 10**15), digest_algorithm="sha256",
                branch=rng.choice(["main", "fork_1"]),
                watermarks={"low": rng.choice([None, rng.uniform(0, 4e9)]),
                            "actual_high": rng.choice([None, rng.uniform(0, 4e9)])}, at=AT)
    ours = model.file_set_event(**args)  # type: ignore[arg-type]
    assert ours == oracle.to_dict(oracle.file_set_event(**args))  # type: ignore[arg-type]
    validate(ours)


def test_an_unknown_state_is_refused_as_the_client_refuses_it() -> None:
    with pytest.raises(KeyError):
        oracle.run_event("DONE", "j", "/d", [])
    with pytest.raises(ValueError, match="not an OpenLineage run state: 'DONE'"):
        model.run_event("DONE", "j", "/d", [])
