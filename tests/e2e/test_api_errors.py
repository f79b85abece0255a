"""The public API raises the DistcpError a caller can act on, not a library's exception.

A real moto server refuses (wrong keys: ``moto_auth_server``), is asked without any
credentials, or is not there (a closed port on 127.0.0.1); ``distcp.copy`` (refused in
its preflight, before Spark) and ``status`` / ``recover`` / ``cleanup`` (which read
the destination's state on the driver) are called in this process.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import distcp
from tests.fixtures.s3_server import (  # noqa: F401 - fixtures
    S3Server,
    moto_auth_server,
    moto_server,
)

pytestmark = pytest.mark.e2e
WRONG = {"key": "AKIAWRONGWRONGWRONG0", "secret": "not/the/secret"}
INSPECT: dict[str, Callable[..., Any]] = {
    "status": distcp.status, "recover": distcp.recover, "cleanup": distcp.cleanup}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(autouse=True)
def fresh_s3fs(monkeypatch: pytest.MonkeyPatch) -> None:
    """No cached s3fs client from another test, and S3 timeouts a test can wait for."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    monkeypatch.setenv("PYDISTCP_S3_TIMEOUT", "10")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_copy_with_refused_keys_raises_credentials_error(
        tmp_path: Path, moto_auth_server: S3Server) -> None:  # noqa: F811
    options = {**WRONG, "endpoint_url": moto_auth_server.endpoint}
    with pytest.raises(distcp.CredentialsError) as info:
        distcp.copy("s3://src/data", str(tmp_path / "out"), src_options=options)
    assert str(info.value).startswith("s3://src/data: S3 refused the credentials or access to "
                                      "bucket src (")
    assert "secret" not in str(info.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", sorted(INSPECT))
def test_state_commands_with_refused_keys_raise_credentials_error(
        command: str, moto_auth_server: S3Server) -> None:  # noqa: F811
    options = {**WRONG, "endpoint_url": moto_auth_server.endpoint}
    with pytest.raises(distcp.CredentialsError) as info:
        INSPECT[command]("s3://dst/c", dst_options=options)
    assert str(info.value).startswith("s3://dst/c: S3 refused the credentials or access (")
    assert str(info.value).endswith("; fix them with the storage options (src_options / "
                                    "dst_options; --src-option / --dst-option on the command "
                                    "line) or the AWS_* variables")
    assert type(info.value.__cause__).__module__.startswith(("botocore", "builtins"))


@pytest.mark.parametrize("command", sorted(INSPECT))
def test_state_commands_without_credentials_raise_credentials_error(
        command: str, tmp_path: Path, moto_server: S3Server,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(distcp.CredentialsError, match=r"^s3://dst/c: no S3 credentials found "
                                                      r"\(Unable to locate credentials\); set"):
        INSPECT[command]("s3://dst/c", dst_options={"endpoint_url": moto_server.endpoint})


def test_copy_from_a_closed_port_raises_endpoint_unreachable(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(distcp.EndpointUnreachableError,
                       match=r"^s3://src/: S3 endpoint unreachable \("):
        distcp.copy("s3://src/", str(tmp_path / "out"),
                    src_options={**WRONG, "endpoint_url": endpoint})
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", sorted(INSPECT))
def test_state_commands_on_a_closed_port_raise_endpoint_unreachable(command: str) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(distcp.EndpointUnreachableError) as info:
        INSPECT[command]("s3://dst/c", dst_options={**WRONG, "endpoint_url": endpoint})
    assert str(info.value).startswith(
        f's3://dst/c: S3 endpoint unreachable (Could not connect to the endpoint URL: '
        f'"{endpoint}/')
    assert isinstance(info.value, distcp.EnvironmentProblem)
