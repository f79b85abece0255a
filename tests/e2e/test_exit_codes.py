"""The exit-code contract: 0 ok, 1 files failed, 2 usage/plan, 3 environment, 130 Ctrl-C.

Each refusal is one line ``pydistcp: error: ...`` naming the file or setting, with no
'internal error' and no traceback; the preflight refusals come before Spark starts,
so no Spark log file is created in the run's own log directory.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import PYDISTCP, cli_env, one_error_line, run_cli, tree
from tests.fixtures.processes import children, processes, state_of
from tests.fixtures.s3_server import (  # noqa: F401 - fixtures
    S3Server,
    moto_auth_server,
    moto_server,
    s3,
)

pytestmark = pytest.mark.e2e


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "a").mkdir(parents=True)
    (root / "a" / "one.txt").write_text("one")
    (root / "two.csv").write_text("two")
    return root


def refuse(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
           code: int = 2) -> str:
    """Run, expect exit ``code`` with one error line and no Spark log; return the line."""
    logs = tmp_path / "logs"
    r = run_cli(*args, "--no-progress", env={"PYDISTCP_LOG_DIR": str(logs), **(env or {})},
                timeout=120)
    assert r.returncode == code, r.stderr
    assert not logs.exists() or not list(logs.glob("spark-*.log")), "Spark was started"
    return one_error_line(r.stderr)


def test_bogus_master_names_the_setting(tmp_path: Path, src: Path) -> None:
    line = refuse(tmp_path, "copy", str(src), str(tmp_path / "out"),
                  env={"PYDISTCP_MASTER": "bogus"})
    assert line.startswith("pydistcp: error: --master / PYDISTCP_MASTER: not a Spark master: "
                           "'bogus'")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("master", ["local[nonsense]", "local[0]", "local[2,x]", "local[]"])
def test_a_local_master_spark_would_not_parse_is_refused_before_anything(
        tmp_path: Path, src: Path, master: str) -> None:
    """Not left to Spark's start: a plan this small is copied without Spark at all."""
    line = refuse(tmp_path, "copy", str(src), str(tmp_path / "out"), "--master", master)
    assert line == (f"pydistcp: error: --master / PYDISTCP_MASTER: not a local master: "
                    f"{master!r} (use local, local[N] or local[*] for N threads or one per "
                    "core, local[N,F] to allow F task failures)")
    assert not (tmp_path / "out").exists()


def test_unreachable_standalone_master_fails_in_seconds(tmp_path: Path, src: Path) -> None:
    port = closed_port()
    start = time.monotonic()
    line = refuse(tmp_path, "copy", str(src), str(tmp_path / "out"), "--master",
                  f"spark://127.0.0.1:{port}", code=3)
    assert time.monotonic() - start < 20  # was 70 s of Spark retries
    assert line == (f"pydistcp: error: Spark master spark://127.0.0.1:{port} is unreachable: "
                    f"127.0.0.1:{port}: Connection refused; start it or fix "
                    "--master / PYDISTCP_MASTER")
    assert not (tmp_path / "out").exists()


def test_unreachable_connect_server_is_exit_3(tmp_path: Path, src: Path) -> None:
    port = closed_port()
    line = refuse(tmp_path, "copy", str(src), str(tmp_path / "out"), "--master",
                  f"sc://127.0.0.1:{port}", code=3)
    assert f"Spark master sc://127.0.0.1:{port} is unreachable" in line


def test_destination_under_a_file(tmp_path: Path, src: Path) -> None:
    (tmp_path / "plain").write_text("a file")
    dst = tmp_path / "plain" / "out"
    line = refuse(tmp_path, "copy", str(src), str(dst))
    assert line == (f"pydistcp: error: cannot write to destination {dst}: {tmp_path / 'plain'} "
                    "is a file, not a directory; choose another DST or --state-dir")
    assert (tmp_path / "plain").read_text() == "a file"


def test_summary_json_in_missing_directory_refused_before_copy(tmp_path: Path,
                                                                src: Path) -> None:
    target = tmp_path / "nodir" / "s.json"
    line = refuse(tmp_path, "copy", str(src), str(tmp_path / "out"), "--summary-json",
                  str(target))
    assert line == (f"pydistcp: error: --summary-json: {target}: no such directory "
                    f"{tmp_path / 'nodir'}")
    assert not (tmp_path / "out").exists()  # nothing published before the refusal


def test_summary_json_that_is_a_directory(tmp_path: Path, src: Path) -> None:
    r = run_cli("copy", str(src), str(tmp_path / "out"), "--summary-json", str(tmp_path))
    assert r.returncode == 2, r.stderr  # click's own check of the flag
    assert f"Invalid value for '--summary-json': File '{tmp_path}' is a directory" in r.stderr


@pytest.mark.parametrize("flag", ["--split-size", "--buffer-size", "--max-expanded-bytes"])
def test_bad_size_names_its_flag(tmp_path: Path, src: Path, flag: str) -> None:
    line = refuse(tmp_path, "copy", str(src), str(tmp_path / "out"), flag, "12Q")
    assert line == (f"pydistcp: error: {flag}: not a size: '12Q' "
                    "(examples: 1048576, 64K, 256M, 2G)")


@pytest.mark.parametrize("ratio", ["-5", "0.5"])
def test_expansion_ratio_below_one_is_refused(tmp_path: Path, src: Path, ratio: str) -> None:
    r = run_cli("copy", str(src), str(tmp_path / "out"), "--max-expansion-ratio", ratio,
                env={"PYDISTCP_LOG_DIR": str(tmp_path / "logs")})
    assert r.returncode == 2, r.stderr
    assert "Invalid value for '--max-expansion-ratio'" in r.stderr
    assert ">=1" in r.stderr.replace(" ", "") and "Traceback" not in r.stderr


@pytest.mark.parametrize("case", ["wrong passphrase", "no passphrase", "empty keyring"])
def test_unusable_gpg_keyring_is_refused_before_spark(tmp_path: Path, src: Path,
                                                      case: str) -> None:
    from tests.fixtures.gpgkeys import PASSPHRASE, keyring

    ring = keyring()
    home = ring.home
    env = {"PYDISTCP_GPG_PASSPHRASE": "n0t-" + PASSPHRASE}
    if case == "no passphrase":
        env = {}
    elif case == "empty keyring":
        home = str(tmp_path / "gnupg")
        os.mkdir(home, 0o700)
    line = refuse(tmp_path, "copy", str(src), str(tmp_path / "out"), "--convert", "decrypt",
                  "--gpg-home", home, env=env)
    expected = {"wrong passphrase": f"unlocks none of the 1 secret key(s) in {home}: bad "
                                    "passphrase",
                "no passphrase": f"the secret key(s) in {home} need a passphrase: give "
                                 "--gpg-passphrase-file or PYDISTCP_GPG_PASSPHRASE",
                "empty keyring": f"--gpg-home {home}: no secret key that can decrypt"}[case]
    assert expected in line
    assert PASSPHRASE not in line
    assert not (tmp_path / "out").exists()


def test_include_matching_nothing_is_exit_2(tmp_path: Path, src: Path) -> None:
    line = refuse(tmp_path, "copy", str(src), str(tmp_path / "out"), "--include", "*.parquet",
                  "--include", "*.orc")
    assert line == ("pydistcp: error: --include *.parquet *.orc: no file matched, out of 2 "
                    "file(s) in the source; check the patterns (a pattern without '/' "
                    "matches the file name)")
    assert not (tmp_path / "out").exists()


def test_include_on_an_empty_source_is_fine(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    r = run_cli("copy", str(tmp_path / "empty"), str(tmp_path / "out"), "--include", "*.csv",
                "--no-progress", env={"PYDISTCP_LOG_DIR": str(tmp_path / "logs")})
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""


@pytest.mark.parametrize("command", ["status", "recover", "cleanup"])
def test_inspecting_a_missing_destination_is_exit_2(tmp_path: Path, command: str) -> None:
    r = run_cli(command, str(tmp_path / "typo"))
    assert r.returncode == 2, r.stderr
    assert one_error_line(r.stderr) == f"pydistcp: error: no such destination: {tmp_path / 'typo'}"


def test_missing_state_dir_is_exit_2(tmp_path: Path) -> None:
    r = run_cli("status", "--state-dir", str(tmp_path / "nostate"))
    assert r.returncode == 2, r.stderr
    assert one_error_line(r.stderr) == (
        f"pydistcp: error: no such --state-dir: {tmp_path / 'nostate'}")


def test_status_of_a_destination_without_state(tmp_path: Path) -> None:
    r = run_cli("status", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout == (f"no pydistcp state at {tmp_path / '.pydistcp'}: nothing was copied "
                        "here by pydistcp\n")


def test_missing_s3_credentials_is_exit_3(tmp_path: Path, src: Path,
                                          s3: S3Server) -> None:  # noqa: F811
    env = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
           "AWS_CONFIG_FILE": str(tmp_path / "none")}
    line = refuse(tmp_path, "copy", str(src), "s3://dst/out", env=env, code=3)
    assert line == ("pydistcp: error: s3://dst/out: no S3 credentials found; set them with "
                    "--dst-option / --dst-options-file or the AWS_* variables")
    assert s3.objects("dst") == {}


def test_refused_s3_endpoint_is_exit_3(tmp_path: Path, src: Path,
                                       s3: S3Server) -> None:  # noqa: F811
    endpoint = f"http://127.0.0.1:{closed_port()}"
    start = time.monotonic()
    line = refuse(tmp_path, "copy", "s3://src/", str(tmp_path / "out"), "--src-option",
                  f"endpoint_url={endpoint}", env={"PYDISTCP_S3_TIMEOUT": "10"}, code=3)
    assert time.monotonic() - start < 60
    assert line.startswith("pydistcp: error: s3://src/: S3 endpoint unreachable (")
    assert line.endswith("check endpoint_url in --src-option / --src-options-file or the "
                         "AWS_* variables")
    assert not (tmp_path / "out").exists()


def test_spark_that_cannot_start_is_one_line_exit_3(tmp_path: Path, src: Path) -> None:
    logs = tmp_path / "logs"
    r = run_cli("copy", str(src), str(tmp_path / "out"), "--master", "local[2]",
                "--conf", "spark.driver.memory=nonsense", "--no-progress", "--copying",
                "spark", env={"PYDISTCP_LOG_DIR": str(logs)})
    assert r.returncode == 3, r.stderr
    line = one_error_line(r.stderr)
    log = next(logs.glob("spark-*.log"))
    assert line.startswith("pydistcp: error: Spark did not start (local[2]): ")
    assert line.endswith(f"; details in {log}")
    assert "at org.apache" not in r.stderr
    assert tree(tmp_path / "out") == {}  # staging may exist; nothing published


@pytest.mark.parametrize("phase", ["spark-start", "spark-started", "copy", "copy-twice"])
def test_ctrl_c_is_one_line_and_exit_130(tmp_path: Path, phase: str) -> None:
    """``copy-twice``: a second Ctrl-C while the run ends (a user pressing it again)
    still ends it with the one line and 130, never killed by the signal itself.
    ``spark-started``: pressed once the JVM runs but before the run's own handler is in
    place (a pause there, ``DISTCP_SLOW_AT``): the JVM, which ignores SIGINT, is ended
    too, not left holding the run's stdout."""
    src, dst, logs = tmp_path / "src", tmp_path / "dst", tmp_path / "logs"
    src.mkdir()
    for i in range(6):  # Spark's start outlasts their copy; the copy phases pause (below)
        (src / f"f{i}.bin").write_bytes(os.urandom(1 << 20) * 4)
    # The spark phases need a Spark job: 288 MiB would otherwise be copied here.
    on_spark = ["--copying", "spark"] if phase.startswith("spark") else []
    # The copy phases pause after each staged file: the copy here is fast enough that a
    # run seen copying could otherwise end before the signal reaches it (seen in CI).
    slow = {"spark-started": "spark_started=90", "copy": "after_stage=30",
            "copy-twice": "after_stage=30"}.get(phase)
    proc = subprocess.Popen([*PYDISTCP, "copy", str(src), str(dst), "--no-progress",
                             "--buffer-size", "64K", *on_spark],
                            env=cli_env({"PYDISTCP_LOG_DIR": str(logs),
                                         **({"DISTCP_SLOW_AT": slow} if slow else {})}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    staging = dst / ".pydistcp" / "staging"
    deadline = time.monotonic() + 240
    # The staging folder is made just before Spark starts; a staged file means copying.
    def reached() -> bool:
        if phase == "spark-start":
            return staging.exists()
        if phase == "spark-started":  # the session is up: the run says it pauses
            return any("pausing 90 s at spark_started" in p.read_text(errors="replace")
                       for p in logs.glob("spark-*.log"))
        return any(p.is_file() for p in staging.rglob("*"))

    while time.monotonic() < deadline and not reached():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    jvm = next((p.pid for p in children(proc.pid) if p.name == "java"), None)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
    if phase == "copy-twice":
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)
    try:
        _out, err = proc.communicate(timeout=60 if phase == "spark-started" else 120)
    except subprocess.TimeoutExpired:  # seen once in CI: say who held on, then clean up
        held = _session_processes(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)
        state = "still running" if proc.poll() is None else f"exited {proc.returncode}"
        tail = "".join(p.read_text(errors="replace")[-2000:] for p in logs.glob("*"))
        pytest.fail(f"not ended after Ctrl-C: pydistcp {state}; its session: {held}; "
                    f"log tail: {tail}")
    assert proc.returncode == 130, err
    assert one_error_line(err) == ("pydistcp: error: interrupted; nothing unverified was "
                                   "published, rerun to finish")
    assert "py4j" not in err
    assert tree(dst) == {}  # nothing published
    if jvm is not None:  # ended with the run, not left behind
        assert not Path(f"/proc/{jvm}").exists() or state_of(jvm) == "Z"


def _session_processes(sid: int) -> list[str]:
    """pid, state and command line of every process of session ``sid``."""
    return [f"{p.pid} {p.state} {b' '.join(p.argv)[:200].decode(errors='replace')}"
            for p in processes() if p.session == sid]


@pytest.mark.parametrize("command", ["status", "recover", "cleanup"])
def test_state_commands_with_refused_s3_keys_are_exit_3(
        command: str, moto_auth_server: S3Server) -> None:  # noqa: F811
    r = run_cli(command, "s3://dst/c", "--dst-option", "key=AKIAWRONGWRONGWRONG0",
                "--dst-option", "secret=wrong", "--dst-option",
                f"endpoint_url={moto_auth_server.endpoint}",
                env={"PYDISTCP_S3_TIMEOUT": "10"}, timeout=120)
    assert r.returncode == 3, r.stderr
    line = one_error_line(r.stderr)
    assert line.startswith("pydistcp: error: s3://dst/c: S3 refused the credentials or access (")
    assert line.endswith("or the AWS_* variables") and "wrong" not in line
