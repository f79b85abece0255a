"""The environment a task runs with: the client's, wherever the task runs (driver and executor).

Tasks read a few variables (AWS credentials and region for s3fs, Azure's account for
adlfs and Azure's SDK, the S3 bound,
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
TASK_ENV_PREFIXES = ("AWS_", "AZURE_STORAGE_")
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
    if any(saved.get(k) != env.get(k) for k in names if k.startswith(TASK_ENV_PREFIXES)):
        _forget_clients()  # they hold credentials read from the old environment
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


def _forget_clients() -> None:
    """Drop the S3 and Azure filesystems this process cached (fsspec keys its cache by
    options, not by the environment they were read from). Where s3fs or adlfs was never
    imported there are none, and importing one only to say so cost a fresh worker 0.29 s
    before its first local copy (a warm engine's workers have no AWS variables of their
    own, so any the client has differs from theirs)."""
    for module, name in (("s3fs", "S3FileSystem"), ("adlfs", "AzureBlobFileSystem")):
        cached = getattr(sys.modules.get(module), name, None)
        if cached is not None:
            cached.clear_instance_cache()
