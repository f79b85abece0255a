"""``reach.plain_reach``: botocore's own resolution, read without botocore, or None."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from distcp.storage.s3 import lean
from distcp.storage.s3.reach import LazyS3, plain_reach

ENDPOINT = "http://127.0.0.1:9"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No AWS variable of this machine's, and a home without ``.aws``."""
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    return monkeypatch


def _both(options: dict[str, Any]) -> tuple[lean.LeanGetter, lean.LeanGetter]:
    """The lean getter botocore's client gives, and the one of the plain reach."""
    import s3fs

    from distcp.storage.s3 import ops

    real = s3fs.S3FileSystem(skip_instance_cache=True, **ops.bounded_options(options))
    found = plain_reach(options)
    assert found is not None
    return lean.LeanGetter(real), lean.LeanGetter(LazyS3(found, lambda: real))


def _seen(getter: lean.LeanGetter) -> tuple[Any, ...]:
    creds = getter.credentials()
    return (getter.endpoint.geturl(), getter.region, getter.virtual_host, creds.access_key,
            creds.secret_key, creds.token or None)


@pytest.mark.parametrize(("env", "options"), [
    ({"AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "envsecret",
      "AWS_ENDPOINT_URL": ENDPOINT, "AWS_DEFAULT_REGION": "eu-west-3"}, {}),
    ({"AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "envsecret",
      "AWS_SESSION_TOKEN": "tok", "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
      "AWS_ENDPOINT_URL_S3": ENDPOINT}, {}),
    ({"AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "envsecret"},
     {"key": "AKIAOPT", "secret": "optsecret", "endpoint_url": ENDPOINT}),
    ({"AWS_ENDPOINT_URL": "http://127.0.0.1:1"},
     {"key": "AKIAOPT", "secret": "optsecret",
      "client_kwargs": {"endpoint_url": "https://s3.eu-west-3.amazonaws.com",
                        "region_name": "eu-west-3"}}),
    ({}, {"key": "AKIAOPT", "secret": "optsecret", "token": "t2",
          "client_kwargs": {"endpoint_url": ENDPOINT},
          "config_kwargs": {"s3": {"addressing_style": "virtual"}}}),
])
def test_a_plain_reach_is_what_botocore_resolves(clean_env: pytest.MonkeyPatch,
                                                  env: dict[str, str],
                                                  options: dict[str, Any]) -> None:
    for name, value in env.items():
        clean_env.setenv(name, value)
    botocore_way, plain_way = _both(options)
    assert _seen(plain_way) == _seen(botocore_way)


@pytest.mark.parametrize(("env", "options"), [
    ({"AWS_PROFILE": "other"}, {}),
    ({"AWS_CONFIG_FILE": "/nowhere"}, {}),
    ({"AWS_USE_FIPS_ENDPOINT": "true"}, {}),
    ({}, {"profile": "other"}),
    ({}, {"anon": True}),
    ({}, {"requester_pays": True}),
    ({}, {"version_aware": True}),
    ({}, {"s3_additional_kwargs": {"SSECustomerKey": "x"}}),
    ({}, {"config_kwargs": {"signature_version": "s3"}}),
    ({}, {"client_kwargs": {"aws_session_token": "t"}}),
    ({"AWS_ENDPOINT_URL": ""}, {}),  # no endpoint: AWS itself, botocore's own rules
    ({"AWS_ACCESS_KEY_ID": ""}, {}),  # no credentials: botocore's chain finds them
])
def test_anything_botocore_might_read_otherwise_is_left_to_it(
        clean_env: pytest.MonkeyPatch, env: dict[str, str], options: dict[str, Any]) -> None:
    base = {"AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "envsecret",
            "AWS_ENDPOINT_URL": ENDPOINT}
    assert plain_reach({}, base) is not None
    merged = {k: v for k, v in {**base, **env}.items() if v}
    assert plain_reach(options, merged) is None


def test_a_shared_config_file_is_left_to_botocore(clean_env: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    env = {"AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "envsecret",
           "AWS_ENDPOINT_URL": ENDPOINT, "HOME": str(tmp_path)}
    assert plain_reach({}, env) is not None
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "config").write_text("[default]\nregion = eu-west-3\n")
    assert plain_reach({}, env) is None


def test_the_stand_in_splits_paths_as_s3fs_and_makes_nothing_for_it() -> None:
    import s3fs

    made: list[int] = []
    real = s3fs.S3FileSystem(skip_instance_cache=True, key="k", secret="s")
    found = plain_reach({"key": "k", "secret": "s", "endpoint_url": ENDPOINT}, {})
    assert found is not None
    lazy = LazyS3(found, lambda: made.append(1) or real)
    for path in ("s3://b", "s3://b/", "b/k", "s3a://b/k/", "s3://b/d/e f/", "b/k/"):
        assert lazy.split_path(path) == real.split_path(path), path
        assert lazy._strip_protocol(path) == real._strip_protocol(path), path
        assert lazy.unstrip_protocol(lazy._strip_protocol(path)) == \
            real.unstrip_protocol(real._strip_protocol(path))
    lazy.invalidate_cache("b/k")
    assert made == [] and lazy.dircache == {}
    assert lazy.loop is real.loop and made  # anything else is the real filesystem's
    assert lazy.dircache is real.dircache  # whose listings are then forgotten with it


def test_a_forked_child_keeps_none_of_the_parents_connections() -> None:
    """A run's planning child (``distcp.planning.beside``) lists with the storage its
    parent made: its requests must not go out on the parent's kept sockets."""
    found = plain_reach({"key": "k", "secret": "s", "endpoint_url": ENDPOINT}, {})
    assert found is not None
    getter = lean.LeanGetter(LazyS3(found, lambda: None))
    parents = getter.wire("127.0.0.1:9")
    assert getter.wire("127.0.0.1:9") is parents
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one byte, whether its wire is a new one
        os.write(w, b"1" if getter.wire("127.0.0.1:9") is not parents else b"0")
        os._exit(0)
    os.close(w)
    assert os.read(r, 1) == b"1"
    os.waitpid(pid, 0)
    assert getter.wire("127.0.0.1:9") is parents  # the parent's own stay its own


def test_a_storage_reads_its_reach_again_when_the_environment_changes(
        clean_env: pytest.MonkeyPatch) -> None:
    from distcp.copying.taskenv import applied_environment
    from distcp.storage import storage_for

    clean_env.setenv("AWS_ACCESS_KEY_ID", "AKIAONE")
    clean_env.setenv("AWS_SECRET_ACCESS_KEY", "one")
    clean_env.setenv("AWS_ENDPOINT_URL", ENDPOINT)
    storage = storage_for("s3://b/k", {"listings_expiry_time": 7.5})
    first = storage.fs("s3://b/k")[0]
    assert isinstance(first, LazyS3) and first.reach.credentials.access_key == "AKIAONE"
    assert storage.fs("s3://b/other")[0] is first
    clean_env.setenv("AWS_ACCESS_KEY_ID", "AKIATWO")  # a variable it reads: seen at once
    second = storage.fs("s3://b/k")[0]
    assert isinstance(second, LazyS3) and second.reach.credentials.access_key == "AKIATWO"
    with applied_environment({**os.environ, "AWS_PROFILE": "other"}):  # a task's
        assert not isinstance(storage.fs("s3://b/k")[0], LazyS3)  # botocore's to read
    assert storage.fs("s3://b/k")[0] is second
