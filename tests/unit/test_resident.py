"""Which commands the ``pydistcp`` command hands to the resident client (``distcp.resident``)."""

from __future__ import annotations

import io
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from distcp import resident


@pytest.mark.parametrize(("argv", "handed"), [
    (["copy", "a", "b"], True),
    (["copy", "a", "b", "--engine", "warm"], True),
    (["copy", "a", "b", "--engine", "cold"], False),
    (["copy", "a", "b", "--engine=cold"], False),
    (["copy", "--engine"], True),  # the CLI's own error, from the fork
    (["check", "a", "b"], False),
    (["engine", "start"], False),
    (["--version"], False),
    ([], False),
])
def test_only_copy_is_handed_over_and_never_when_asked_cold(
        argv: list[str], handed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYDISTCP_ENGINE", raising=False)
    monkeypatch.delenv(resident.ENV, raising=False)
    assert resident._may_hand_over(argv) is handed


@pytest.mark.parametrize(("name", "value"), [("PYDISTCP_ENGINE", "cold"),
                                             (resident.ENV, "0")])
def test_the_environment_keeps_a_copy_here(name: str, value: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYDISTCP_ENGINE", raising=False)  # the suite's own may be cold
    monkeypatch.delenv(resident.ENV, raising=False)
    monkeypatch.setenv(name, value)
    assert not resident._may_hand_over(["copy", "a", "b"])


@pytest.mark.parametrize("option", ["dev_mode", "isolated", "no_site", "ignore_environment",
                                    "optimize", "verbose", "inspect", "interactive",
                                    "_xoptions", "warnoptions"])
def test_an_interpreter_option_keeps_a_copy_here(option: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork of the resident would not run with the command's ``-X``, ``-W``, ``-O``...:
    the command runs itself."""
    monkeypatch.delenv("PYDISTCP_ENGINE", raising=False)
    monkeypatch.delenv(resident.ENV, raising=False)
    monkeypatch.setattr(sys, "_xoptions", {})
    monkeypatch.setattr(sys, "warnoptions", [])
    plain = SimpleNamespace(**{f: 0 for f in ("dev_mode", "isolated", "no_site",
                                              "ignore_environment", "optimize", "verbose",
                                              "inspect", "interactive")})
    monkeypatch.setattr(sys, "flags", plain)
    assert resident._may_hand_over(["copy", "a", "b"])
    if option == "_xoptions":
        monkeypatch.setattr(sys, "_xoptions", {"importtime": True})
    elif option == "warnoptions":
        monkeypatch.setattr(sys, "warnoptions", ["error"])
    else:
        monkeypatch.setattr(plain, option, 1)
    assert not resident._may_hand_over(["copy", "a", "b"])


def test_no_resident_means_the_command_runs_itself(tmp_path: object,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("PYDISTCP_ENGINE", raising=False)
    monkeypatch.delenv(resident.ENV, raising=False)
    assert resident.forwarded(["copy", "a", "b"]) is None
    assert resident.pid_of() is None


def test_a_ctrl_c_before_the_go_ends_the_command_and_no_run_begins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A resident of this test's own (a socket in a private folder) takes the request,
    then the command gets Ctrl-C while it waits for the run's pid: the command ends with
    130 and one line, and never sends "go", so the fork a real resident made never runs."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("PYDISTCP_ENGINE", raising=False)
    monkeypatch.delenv(resident.ENV, raising=False)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(open(os.devnull, "rb")))  # noqa: SIM115
    path = resident.socket_path()
    os.makedirs(os.path.dirname(path), mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    heard: list[bytes] = []

    def fake_resident() -> None:
        conn, _ = listener.accept()
        head, fds, _, _ = socket.recv_fds(conn, resident._HEADER.size, resident._FDS)
        for fd in fds:
            os.close(fd)
        size, body = resident._HEADER.unpack(head)[0], b""
        while len(body) < size:
            body += conn.recv(size - len(body))
        os.kill(os.getpid(), signal.SIGINT)  # the user's Ctrl-C, before any answer
        heard.append(conn.recv(1))  # b"": the command closed without "go"
        conn.close()

    server = threading.Thread(target=fake_resident)
    server.start()
    try:
        assert resident.forwarded(["copy", "a", "b"]) == 130
    finally:
        server.join(10)
        listener.close()
    assert heard == [b""]
    assert capsys.readouterr().err == ("pydistcp: error: interrupted before the run "
                                       "began; nothing was copied\n")
