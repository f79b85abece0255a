"""A task's environment: the client's AWS variables applied around it, and S3 clients
built from other credentials dropped, without importing s3fs where it was never used."""

from __future__ import annotations

import subprocess
import sys
import textwrap


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
        s3fs.S3FileSystem(key="k", secret="s", client_kwargs={"endpoint_url": "http://127.0.0.1:9"})
        before = len(s3fs.S3FileSystem._cache)
        with applied_environment({"AWS_ACCESS_KEY_ID": "AKIANEW"}):
            during = len(s3fs.S3FileSystem._cache)
        print(before, during, os.environ["AWS_ACCESS_KEY_ID"])
    """)
    assert out == "1 0 AKIAOLD"


def test_same_credentials_keep_cached_clients() -> None:
    out = _run("""
        import os
        for name in [n for n in os.environ if n.startswith("AWS_")]:
            del os.environ[name]
        os.environ["AWS_ACCESS_KEY_ID"] = "AKIASAME"
        import s3fs
        from distcp.copying.taskenv import applied_environment
        s3fs.S3FileSystem(key="k", secret="s", client_kwargs={"endpoint_url": "http://127.0.0.1:9"})
        with applied_environment({"AWS_ACCESS_KEY_ID": "AKIASAME"}):
            print(len(s3fs.S3FileSystem._cache))
    """)
    assert out == "1"
