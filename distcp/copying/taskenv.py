"""The environment a task runs with: the client's, wherever the task runs (driver and executor).

Tasks read a few variables (AWS credentials and region for s3fs, the S3 bound,
fault-injection points). On a cluster or a warm engine the Python workers have
their own environment, not the client's, so the job carries these values
(``TaskSpec.env``) and each task applies them for its duration.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

#: Environment variables tasks read: carried by the job, never inherited from the server.
TASK_ENV_PREFIXES = ("AWS_",)
TASK_ENV_NAMES = ("PYDISTCP_S3_TIMEOUT", "DISTCP_CRASH_AT", "DISTCP_FAIL_AT", "DISTCP_SLOW_AT",
                  "GNUPGHOME")


def task_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables tasks read, as this process has them (applied around each task)."""
    env = os.environ if environ is None else environ
    carried = {k: v for k, v in env.items()
               if k in TASK_ENV_NAMES or k.startswith(TASK_ENV_PREFIXES)}
    if carried.get("GNUPGHOME"):  # as the caller sees it: tasks run in another folder
        carried["GNUPGHOME"] = os.path.abspath(os.path.expanduser(carried["GNUPGHOME"]))
    return carried


@contextmanager
def applied_environment(env: Mapping[str, str] | None) -> Iterator[None]:
    """Run a task with the client's task variables: set those it has, unset the others
    (a reused worker of a warm server must not keep one run's credentials for the
    next), and put the worker's own values back afterwards. None: leave it as it is."""
    if env is None:
        yield
        return
    names = {k for k in os.environ if k in TASK_ENV_NAMES or k.startswith(TASK_ENV_PREFIXES)}
    names |= set(env)
    saved = {k: os.environ.get(k) for k in names}
    if any(saved.get(k) != env.get(k) for k in names if k.startswith("AWS_")):
        _forget_s3_clients()  # they hold credentials read from the old environment
    for name in names:
        if name in env:
            os.environ[name] = env[name]
        else:
            os.environ.pop(name, None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _forget_s3_clients() -> None:
    """Drop the S3 clients this process cached. Where s3fs was never imported there are
    none, and importing it only to say so cost a fresh worker 0.29 s before its first
    local copy (a warm engine's workers have no AWS variables of their own, so any the
    client has differs from theirs)."""
    cached = getattr(sys.modules.get("s3fs"), "S3FileSystem", None)
    if cached is not None:
        cached.clear_instance_cache()
