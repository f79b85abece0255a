"""A plain S3 reach (``distcp.storage.s3.reach``) against real servers: the state's
requests answered as s3fs answers them, and a copy that never imports s3fs or botocore."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from distcp.errors import CredentialsError, EndpointUnreachableError, PlanningError
from distcp.storage import storage_for
from distcp.storage.base import Storage
from distcp.storage.s3.reach import LazyS3
from tests.conftest import traced_cli
from tests.fixtures.s3_server import (  # noqa: F401 - fixtures
    S3Server,
    free_port,
    moto_server,
    rclone_server,
    s3_any,
)

_fresh = itertools.count()


def _plain(options: dict[str, Any]) -> Storage:
    """A storage of its own (a setting no other has), served by the lean stand-in."""
    return storage_for("s3://dst/x", {**options, "listings_expiry_time": 1000 + next(_fresh)})


def _botocore(options: dict[str, Any]) -> Storage:
    """The same server through s3fs and botocore (``use_ssl``: left to them)."""
    return storage_for("s3://dst/x", {**options, "use_ssl": True,
                                      "listings_expiry_time": 1000 + next(_fresh)})


def _answer(storage: Storage, url: str) -> tuple[Any, ...]:
    try:
        st = storage.stat(url)
        stat: tuple[Any, ...] = (st.url, st.size, st.is_dir, st.etag, int(st.mtime))
    except FileNotFoundError:
        stat = ("missing",)
    return (storage.isdir(url), stat)


def test_the_state_requests_answer_as_s3fs_answers_them(s3_any: S3Server) -> None:  # noqa: F811
    plain = _plain(s3_any.options)
    for name, data in (("r/a/one.bin", b"12345"), ("r/a/b/two", b"x"), ("r/c d+e", b"")):
        plain.write_atomic(f"s3://dst/{name}", data)
    assert s3_any.objects(prefix="r/") == {"r/a/one.bin": b"12345", "r/a/b/two": b"x",
                                           "r/c d+e": b""}
    urls = [f"s3://dst/{p}" for p in ("r/a/one.bin", "r/a", "r/a/", "r/a/b", "r/c d+e",
                                      "r/missing", "r/a/one.bin/", "r")]
    seen = [_answer(plain, u) for u in urls]
    assert seen == [_answer(_botocore(s3_any.options), u) for u in urls]
    assert seen[0][1][:3] == ("s3://dst/r/a/one.bin", 5, False)
    assert seen[1] == (True, ("s3://dst/r/a", 0, True, None, 0))

    first, again = (plain.create_new("s3://dst/r/lock", b"me"),
                    plain.create_new("s3://dst/r/lock", b"other"))
    assert (first, again) == (True, False)
    assert s3_any.objects(prefix="r/lock") == {"r/lock": b"me"}

    upload = s3_any.client().create_multipart_upload(Bucket="dst", Key="r/pending")
    assert plain.sweep_orphans("s3://dst/r", set(), dry_run=True) == 1
    assert plain.sweep_orphans("s3://dst/r", {upload["UploadId"]}) == 0
    assert plain.sweep_orphans("s3://dst/r", set()) == 1
    assert s3_any.pending_uploads() == []

    plain.remove_file("s3://dst/r/lock")
    plain.remove_file("s3://dst/r/lock")  # gone already: no error
    plain.remove("s3://dst/r/a")
    assert s3_any.objects(prefix="r") == {"r/c d+e": b""}
    assert plain.read_bytes("s3://dst/r/c d+e", "test document") == b""

    fs = plain.fs("s3://dst/r")[0]
    assert isinstance(fs, LazyS3) and not fs.made  # every answer above was the lean path's


@pytest.mark.parametrize(("change", "error", "words"), [
    ({"secret": "wrong"}, CredentialsError, "refused the credentials"),
    ({"bucket": "nosuchbucket"}, PlanningError, "no such bucket: nosuchbucket"),
    ({"port": True}, EndpointUnreachableError, "S3 endpoint unreachable"),
])
def test_the_probe_words_each_problem_as_before(s3_any: S3Server,  # noqa: F811
                                                change: dict[str, Any], error: type,
                                                words: str) -> None:
    if "secret" in change and s3_any.kind == "moto":
        pytest.skip("moto checks no signature unless told to")
    options: dict[str, Any] = {**s3_any.options, "client_kwargs": dict(
        s3_any.options["client_kwargs"])}
    if "secret" in change:
        options["secret"] = change["secret"]
    if "port" in change:
        options["client_kwargs"]["endpoint_url"] = f"http://127.0.0.1:{free_port()}"
    url = f"s3://{change.get('bucket', 'dst')}/x"
    problems = []
    for storage in (_plain(options), _botocore(options)):
        with pytest.raises(error) as caught:
            storage.probe(url, "--dst-option")
        problems.append(str(caught.value))
    assert all(words in p for p in problems), problems
    assert problems[0] == problems[1] or error is not CredentialsError  # its detail may differ


def test_a_copy_to_and_from_s3_imports_neither_s3fs_nor_botocore(
        s3_any: S3Server, tmp_path: Path) -> None:  # noqa: F811
    src = tmp_path / "src"
    for i in range(5):
        (src / f"d{i % 2}").mkdir(parents=True, exist_ok=True)
        (src / f"d{i % 2}" / f"f{i}.bin").write_bytes(bytes([i]) * (i * 1000))
    for args in (("copy", str(src), "s3://dst/up", "--visibility", "file"),
                 ("copy", str(src), "s3://dst/set"),
                 ("copy", "s3://dst/up", str(tmp_path / "down"))):
        out = traced_cli(*args, "--no-progress", env=s3_any.env)
        assert out.returncode == 0, out.stderr[-2000:]
        imported = {line.split("|")[2].strip() for line in out.stderr.splitlines()
                    if line.startswith("import time:") and line.count("|") == 2}
        assert not imported & {"s3fs", "botocore", "aiobotocore", "aiohttp"}, args
    for i in range(5):
        assert (tmp_path / "down" / f"d{i % 2}" / f"f{i}.bin").read_bytes() == \
            bytes([i]) * (i * 1000)
    assert len(s3_any.objects(prefix="set/", skip=".pydistcp")) == 5
