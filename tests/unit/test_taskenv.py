"""A task's environment: the client's AWS variables applied around it, and S3 clients
built from other credentials dropped, without importing s3fs where it was never used;
every variable code in tasks reads is one the job carries, with paths as the caller
sees them, and none the warm engine was started with leaks into a caller's run."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from distcp.copying.taskenv import applied_environment, carried, task_environment

ROOT = Path(__file__).resolve().parents[2] / "distcp"


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_local_task_with_other_aws_variables_does_not_import_s3fs() -> None:
    # a warm engine's worker has no AWS variable; the client has one: they differ
    out = _run("""
        import os, sys
        os.environ.pop("AWS_REGION", None)
        from distcp.copying.taskenv import applied_environment
        with applied_environment({"AWS_REGION": "eu-west-3"}):
            inside = os.environ.get("AWS_REGION")
        print(inside, os.environ.get("AWS_REGION"), "s3fs" in sys.modules)
    """)
    assert out == "eu-west-3 None False"


def test_cached_s3_clients_are_dropped_when_credentials_change() -> None:
    out = _run("""
        import os, sys
        os.environ["AWS_ACCESS_KEY_ID"] = "AKIAOLD"
        import s3fs
        from distcp.copying.taskenv import applied_environment
        from distcp.storage import storage_for
        # use_ssl: a setting the lean stand-in leaves to s3fs (``reach.plain_reach``)
        options = {"key": "k", "secret": "s", "use_ssl": True,
                   "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}}
        old = storage_for("s3://b/k", options).fs("s3://b/k")[0]
        before = len(s3fs.S3FileSystem._cache)
        with applied_environment({"AWS_ACCESS_KEY_ID": "AKIANEW"}):
            during = len(s3fs.S3FileSystem._cache)
            new = storage_for("s3://b/k", options).fs("s3://b/k")[0]
        print(before, during, os.environ["AWS_ACCESS_KEY_ID"], new is old)
    """)
    # a storage keeps no client by its root that fsspec dropped
    assert out == "1 0 AKIAOLD False"


def test_same_credentials_keep_cached_clients() -> None:
    out = _run("""
        import os
        for name in [n for n in os.environ if n.startswith("AWS_")]:
            del os.environ[name]
        os.environ["AWS_ACCESS_KEY_ID"] = "AKIASAME"
        import s3fs
        from distcp.copying.taskenv import applied_environment
        s3fs.S3FileSystem(key="k", secret="s", client_kwargs={"endpoint_url": "http://127.0.0.1:9"})
        from distcp.copying.taskenv import task_environment
        with applied_environment(task_environment()):  # what a job carries
            print(len(s3fs.S3FileSystem._cache))
    """)
    assert out == "1"


def test_relative_paths_are_made_absolute_as_the_caller_sees_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tasks on the warm engine run in the server's folder: a relative credentials file
    found nothing there."""
    monkeypatch.chdir(tmp_path)
    caller = {"AWS_SHARED_CREDENTIALS_FILE": "aws/credentials", "AWS_CONFIG_FILE": "aws/config",
              "AWS_WEB_IDENTITY_TOKEN_FILE": "token", "AWS_CA_BUNDLE": "ca.pem",
              "SSL_CERT_FILE": "ca.pem", "GNUPGHOME": "gpg", "AWS_REGION": "eu-west-3",
              "HOME": str(tmp_path / "home"), "HTTPS_PROXY": "http://proxy:3128",
              "PYDISTCP_S3_LEAN_GET": "0", "PYDISTCP_GPG_PASSPHRASE": "not carried",
              "UNRELATED": "x"}
    env = task_environment(caller)
    assert env == {**{k: str(tmp_path / v) for k, v in caller.items() if k in (
        "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CA_BUNDLE", "SSL_CERT_FILE", "GNUPGHOME")},
        "AWS_REGION": "eu-west-3", "HOME": str(tmp_path / "home"),
        "HTTPS_PROXY": "http://proxy:3128", "PYDISTCP_S3_LEAN_GET": "0"}


def test_a_variable_the_engine_has_but_the_caller_not_is_unset_in_the_task(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm engine's worker keeps the environment it was started with; a task sees the
    caller's, exactly: what the caller has not set is not set."""
    for name, value in (("HTTPS_PROXY", "http://engine-proxy:1"), ("PYDISTCP_S3_LEAN_GET", "0"),
                        ("AWS_PROFILE", "engine"), ("HOME", "/engine/home")):
        monkeypatch.setenv(name, value)
    (tmp_path / "caller").mkdir()
    caller = {"HOME": str(tmp_path / "caller"), "AWS_REGION": "eu-west-3"}
    with applied_environment(task_environment(caller)):
        inside = {k: os.environ.get(k) for k in
                  ("HTTPS_PROXY", "PYDISTCP_S3_LEAN_GET", "AWS_PROFILE", "HOME", "AWS_REGION")}
    assert inside == {"HTTPS_PROXY": None, "PYDISTCP_S3_LEAN_GET": None, "AWS_PROFILE": None,
                      "HOME": str(tmp_path / "caller"), "AWS_REGION": "eu-west-3"}
    assert os.environ["HTTPS_PROXY"] == "http://engine-proxy:1"  # the worker's, put back


#: Variables read by code that runs in tasks and yet not carried, with the reason.
NOT_CARRIED = {
    # resolved by the client into the job's converter options (configuration.py)
    "PYDISTCP_GPG_PASSPHRASE",
    # the engine's own setting, read by its worker daemon when it starts (spark/daemon.py)
    "PYDISTCP_DAEMON_PRELOAD",
    # a measurement read once as each process imports it: a cold run's workers inherit
    # it; a warm engine's workers leave no marks (distcp/timeline.py says so)
    "PYDISTCP_TIMELINE",
}


def test_every_variable_read_in_tasks_is_carried_by_the_job() -> None:
    """Code whose module says it runs on executors reads only carried variables: on a
    warm engine any other would be the engine's, not the caller's."""
    read: dict[str, str] = {}
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text())
        first = (ast.get_docstring(tree) or "").splitlines()[:1]
        if not first or "executor)" not in first[0]:
            continue
        for name in _environment_reads(tree):
            read.setdefault(name, str(path.relative_to(ROOT)))
    assert read, "the scan found no read at all"
    missing = {n: where for n, where in read.items() if not carried(n) and n not in NOT_CARRIED}
    assert missing == {}


def _environment_reads(tree: ast.Module) -> set[str]:
    """Names read through ``os.environ``/``os.getenv`` with a literal, a module constant,
    or a loop over a module tuple of names."""
    consts: dict[str, tuple[str, ...]] = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            values = _strings(node.value)
            for t in targets:
                if isinstance(t, ast.Name) and values:
                    consts[t.id] = values
    loops: dict[str, tuple[str, ...]] = {}
    for node in ast.walk(tree):
        if (isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name)
                and isinstance(node.iter, ast.Name) and node.iter.id in consts):
            loops[node.target.id] = consts[node.iter.id]
    out: set[str] = set()
    for node in ast.walk(tree):
        arg = _environment_key(node)
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            out.add(arg.value)
        elif isinstance(arg, ast.Name):
            out.update(consts.get(arg.id) or loops.get(arg.id) or ())
    return out


def _strings(value: ast.expr) -> tuple[str, ...]:
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return (value.value,)
    if isinstance(value, ast.Tuple) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts):
        return tuple(e.value for e in value.elts)  # type: ignore[attr-defined]
    return ()


def _environ(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _environment_key(node: ast.AST) -> ast.expr | None:
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Attribute) and (
                (func.attr in ("get", "pop", "setdefault") and _environ(func.value))
                or func.attr == "getenv"):
            return node.args[0]
    if isinstance(node, ast.Subscript) and _environ(node.value):
        return node.slice
    if isinstance(node, ast.Compare) and any(_environ(c) for c in node.comparators):
        return node.left
    return None


def test_a_home_this_machine_lacks_leaves_the_workers_own(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster's executor runs elsewhere: the client's ``HOME`` may not exist there."""
    monkeypatch.setenv("HOME", str(tmp_path))
    with applied_environment({"HOME": "/no/such/home"}):
        assert os.environ["HOME"] == str(tmp_path)
    with applied_environment({}):
        assert os.environ["HOME"] == str(tmp_path)
