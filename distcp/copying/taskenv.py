"""The environment a task runs with: the client's, wherever the task runs (driver and executor).

Tasks read a few variables (AWS credentials, region and files for s3fs and botocore,
Azure's account for adlfs and Azure's SDK, Google's credentials and emulator for
gcsfs and Google's SDK, the proxy and CA settings of their HTTP
clients, ``HOME`` for ``~/.aws`` and ``~/.gnupg``, the S3 bounds, fault-injection
points). On a cluster or a warm engine
the Python workers have their own environment and working directory, not the
client's, so the job carries these values (``TaskSpec.env``), paths made absolute as
the client sees them, and each task applies them for its duration: a run on the warm
engine reads exactly what the same run would read cold, and nothing the engine was
started with. ``tests/unit/test_taskenv.py`` holds every variable read by code that
runs in tasks to this list.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from distcp.storage.spec import forget_environment_clients

#: Environment variables tasks read: carried by the job, never inherited from the server.
TASK_ENV_PREFIXES = ("AWS_", "AZURE_STORAGE_", "GOOGLE_", "GCE_METADATA_", "GCSFS_",
                     "STORAGE_EMULATOR_HOST", "NO_GCE_CHECK")
#: ``HTTP(S)_PROXY`` and the CA files: botocore, aiohttp and ``ssl`` read them in tasks.
_HTTP_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy",
             "https_proxy", "all_proxy", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR",
             "REQUESTS_CA_BUNDLE")
TASK_ENV_NAMES = ("PYDISTCP_S3_TIMEOUT", "PYDISTCP_S3_LEAN_GET", "DISTCP_CRASH_AT",
                  "DISTCP_FAIL_AT", "DISTCP_SLOW_AT", "GNUPGHOME", "HOME", *_HTTP_ENV)
#: Carried variables that name a file or folder: made absolute in the client, since
#: tasks run in another working directory (a relative ``AWS_SHARED_CREDENTIALS_FILE``
#: found nothing on the warm engine).
TASK_ENV_PATHS = ("GNUPGHOME", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
                  "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CA_BUNDLE", "GOOGLE_APPLICATION_CREDENTIALS",
                  "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")
#: Secrets the client resolves itself (into the job's options or its own requests):
#: a warm engine's server is started without them, so they never sit in its
#: environment for as long as it lives.
SERVER_DROPS = ("PYDISTCP_GPG_PASSPHRASE", "PYDISTCP_EVENTS_AUTH")


#: Carried only to a worker on which that folder exists (the client's machine: a local
#: or warm engine); an executor of a cluster without it keeps its own.
_HOST_OWN = ("HOME",)


def carried(name: str) -> bool:
    """Whether tasks read ``name`` (so the job carries it)."""
    return name in TASK_ENV_NAMES or name.startswith(TASK_ENV_PREFIXES)


def task_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables tasks read, as this process has them (applied around each task)."""
    env = os.environ if environ is None else environ
    out = {k: v for k, v in env.items() if carried(k)}
    for name in TASK_ENV_PATHS:  # as the caller sees them: tasks run in another folder
        if out.get(name):
            out[name] = os.path.abspath(os.path.expanduser(out[name]))
    return out


@contextmanager
def applied_environment(env: Mapping[str, str] | None) -> Iterator[None]:
    """Run a task with the client's task variables: set those it has, unset the others
    (a reused worker of a warm server must not keep one run's credentials for the
    next), and put the worker's own values back afterwards. None: leave it as it is."""
    if env is None:
        yield
        return
    names = {k for k in os.environ if carried(k) and k not in _HOST_OWN} | set(env)
    if not os.path.isdir(env.get("HOME", "")):
        names.discard("HOME")  # a cluster node without the client's home keeps its own
    saved = {k: os.environ.get(k) for k in names}
    if any(saved.get(k) != env.get(k) for k in names if not k.startswith("DISTCP_")):
        forget_environment_clients()  # they hold credentials and settings read from the old one
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
