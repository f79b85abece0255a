"""docs/job.schema.json is current, valid, and agrees with the loader on the guide's job.

The schema is generated from the same key definitions as the loader; these tests
fail while the committed file differs, and check that the example of the job files
guide (docs/guide/jobs-and-fork.md) is a job both the schema and the loader accept (and
that its documented error is the real one).
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest

from distcp.cli import job_keys
from distcp.errors import ConfigurationError
from distcp.jobs import load_job
from distcp.jobs.schema import render

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "docs" / "job.schema.json"
GUIDE = (ROOT / "docs" / "guide" / "jobs-and-fork.md").read_text(encoding="utf-8")


def guide_job() -> str:
    """The first TOML block of the guide's "Job files" section."""
    section = GUIDE[GUIDE.index("## Job files"):]
    match = re.search(r"```toml\n(.*?)```", section, re.DOTALL)
    assert match, "the guide's Job files section has no toml example"
    return match.group(1)


def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_committed_schema_is_current() -> None:
    assert SCHEMA.read_text(encoding="utf-8") == render(job_keys()), (
        "docs/job.schema.json is stale: run `python -m distcp.jobschema --write "
        "docs/job.schema.json`")


def test_guide_example_validates_and_loads(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    text = guide_job()
    validator().validate(tomllib.loads(text))
    monkeypatch.setenv("DROPS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("DROPS_SECRET", "example-secret")
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "passphrase").write_text("example-pass\n")
    (tmp_path / "partner.toml").write_text(text)
    sources, destination, options = load_job(str(tmp_path / "partner.toml"),
                                             job_keys()).copy_arguments()
    assert (sources, destination) == (["s3://drops/partner"], "/lake/partner")
    assert options["gpg_home"] == str(tmp_path / "keys" / "gnupg")
    assert options["gpg_passphrase"] == "example-pass"
    assert options["src_options"]["secret"] == "example-secret"


def test_guide_shows_the_real_error_of_a_misspelt_key(tmp_path: Path) -> None:
    (tmp_path / "partner.toml").write_text(guide_job().replace("convert =", "convrt ="))
    with pytest.raises(ConfigurationError) as info:
        load_job(str(tmp_path / "partner.toml"), job_keys())
    documented = re.search(r"`pydistcp: error: (partner\.toml:.*?)`", GUIDE, re.DOTALL)
    assert documented, "the guide's Job files section shows no error line"
    shown = " ".join(documented.group(1).split())
    assert str(info.value) == shown.replace("partner.toml", str(tmp_path / "partner.toml"))


@pytest.mark.parametrize(("change", "where"), [
    ({"comit_policy": "full"}, "comit_policy"),
    ({"parallelism": "four"}, "parallelism"),
    ({"storage": {"s3://b": {"secret": "inline"}}}, "secret"),
    ({"branches": [{"name": "x"}]}, "destination"),
    ({"datasets": [{"source": "a", "sourse": "b"}]}, "sourse"),
])
def test_schema_refuses_what_the_loader_refuses(change: dict, where: str) -> None:
    job = {**tomllib.loads(guide_job()), **change}
    errors = list(validator().iter_errors(job))
    assert errors and any(where in str(e.message) or where in e.json_path for e in errors)
