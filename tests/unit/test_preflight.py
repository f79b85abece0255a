"""Preflight checks that need no server: master forms, local probes, --summary-json."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from distcp.errors import (
    ConfigurationError,
    DestinationNotWritableError,
    EnvironmentProblem,
    PlanningError,
    SparkUnavailableError,
)
from distcp.preflight import check_local_destination, check_master, check_output_file


@pytest.mark.parametrize("master", ["local", "local[*]", "local[2,3]", "yarn",
                                    "k8s://https://h:6443", "local-cluster[2,1,1024]"])
def test_known_masters_pass_without_a_network(master: str) -> None:
    check_master(master)


@pytest.mark.parametrize("master", ["bogus", "", "spark:/h:7077", "LOCAL[2]"])
def test_unknown_masters_name_the_setting(master: str) -> None:
    with pytest.raises(ConfigurationError, match=r"^--master / PYDISTCP_MASTER: not a Spark"):
        check_master(master)


def test_bad_port_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="bad port in 'spark://h:77x'"):
        check_master("spark://h:77x")


def test_closed_port_is_an_environment_problem() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SparkUnavailableError, match="Connection refused") as info:
        check_master(f"spark://127.0.0.1:{port}")
    assert isinstance(info.value, EnvironmentProblem)


def test_listening_master_passes() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        check_master(f"sc://127.0.0.1:{s.getsockname()[1]}")


def test_destination_probe_leaves_nothing(tmp_path: Path) -> None:
    check_local_destination(f"file://{tmp_path}/new/deeper/.pydistcp", str(tmp_path / "new"))
    assert list(tmp_path.iterdir()) == []


def test_destination_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(PlanningError, match=r"f is a file, not a directory"):
        check_local_destination(f"file://{tmp_path}/f/out/.pydistcp", str(tmp_path / "f/out"))


def test_summary_json_stdout_and_missing_directory(tmp_path: Path) -> None:
    check_output_file("-")
    check_output_file(None)
    check_output_file(str(tmp_path / "s.json"))
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ConfigurationError, match="no such directory"):
        check_output_file(str(tmp_path / "no" / "s.json"))


def test_environment_problems_share_one_base() -> None:
    assert issubclass(DestinationNotWritableError, EnvironmentProblem)
    assert issubclass(SparkUnavailableError, EnvironmentProblem)


@pytest.mark.parametrize("port", [55403, 40304, 4030])
def test_a_port_holding_403_or_404_is_still_an_unreachable_endpoint(port: int) -> None:
    """The classification reads codes as whole words: CI once drew port 55403, and the
    refused connection was reported as refused credentials."""
    from distcp.errors import EndpointUnreachableError
    from distcp.storage.s3.probe import probe_problem as _s3_problem

    exc = OSError(f"Could not connect to the endpoint URL: \"http://127.0.0.1:{port}/src\": "
                  f"Cannot connect to host [Connect call failed ('127.0.0.1', {port})]")
    problem = _s3_problem(exc, "s3://src/", "src", "--src-option")
    assert isinstance(problem, EndpointUnreachableError), problem


def test_a_403_answer_is_still_refused_credentials() -> None:
    from distcp.errors import CredentialsError
    from distcp.storage.s3.probe import probe_problem as _s3_problem

    problem = _s3_problem(OSError("Forbidden: 403"), "s3://src/", "src", "--src-option")
    assert isinstance(problem, CredentialsError), problem
