"""An S3 endpoint reached without s3fs or botocore, where the settings leave no doubt (driver and executor).

A run that touches S3 spent 0.35-0.45 s before its first request on the client: importing
s3fs (aiobotocore, aiohttp, botocore: 0.23-0.29 s here) and creating its botocore client
(the S3 service model loaded: 0.11-0.14 s), then ~3 ms of CPU for each of the ~25 state
requests a run sends through it. s5cmd's whole upload of 2,000 small files takes
1.2-1.6 s on this machine; those seconds were a quarter of pydistcp's.

The lean wire (``distcp.storage.s3.lean``) needs only the endpoint, the region, the
addressing style and the credentials. ``plain_reach`` reads them from the storage
options and the environment, but only where botocore could not read them otherwise:
credentials given (options or ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``), an
endpoint given (options or ``AWS_ENDPOINT_URL[_S3]``), no shared config file, no profile,
no other ``AWS_*`` variable and no option it does not know. Anything else is None: s3fs
and botocore resolve it, as before. ``LazyS3`` stands in for the s3fs filesystem of such a
reach: the lean requests need nothing more, and the first use of anything else makes
the s3fs filesystem then, so behaviour never depends on which path ran.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

#: The variables botocore reads that ``plain_reach`` reads the same way; any other
#: ``AWS_*`` variable (a profile, a config file, FIPS or dual-stack endpoints, a retry
#: mode...) leaves the resolution to botocore.
KNOWN_ENV = frozenset({
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
    "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION",
    "AWS_EC2_METADATA_DISABLED", "AWS_CA_BUNDLE"})
#: Storage options that change nothing on the wire (or that ``plain_reach`` reads).
_KNOWN_OPTIONS = frozenset({"key", "secret", "token", "endpoint_url", "client_kwargs",
                            "config_kwargs", "default_block_size", "skip_instance_cache",
                            "use_listings_cache", "listings_expiry_time", "max_paths"})
_KNOWN_CLIENT = frozenset({"endpoint_url", "region_name", "verify"})
#: botocore settings that bound a request, which the lean wire bounds its own way.
_KNOWN_CONFIG = frozenset({"connect_timeout", "read_timeout", "retries",
                           "max_pool_connections", "s3"})


class Credentials(NamedTuple):
    """What ``lean.sign`` reads of botocore's frozen credentials."""

    access_key: str
    secret_key: str
    token: str | None


@dataclass(frozen=True)
class Reach:
    """Where and as whom S3 is reached: a value, so equal settings share one getter."""

    endpoint: str
    region: str
    addressing: str
    verify: bool | str
    credentials: Credentials = field(repr=False)


_KNOWN_ORDER = tuple(sorted(KNOWN_ENV))
#: The same names as ``os.environ`` keeps them (POSIX: bytes): read without decoding
_KNOWN_KEYS = (b"HOME", *(os.fsencode(name) for name in _KNOWN_ORDER))
_generation = [0]


def forget() -> None:
    """Other variables applied (a task's, ``spec.forget_environment_clients``): every
    storage reads its reach again."""
    _generation[0] += 1


def fingerprint() -> tuple[object, ...]:
    """What a remembered reach depends on, cheaply (asked a few times a file: 0.4 µs
    where ``os.environ`` keeps its raw values, 7 µs through its mapping): the variables
    it reads, how many there are (one more: maybe a profile) and the applications of
    other variables since."""
    raw = getattr(os.environ, "_data", None)
    if isinstance(raw, dict) and os.name == "posix":  # a variable set or unset: its length
        return (_generation[0], len(raw), *map(raw.get, _KNOWN_KEYS))
    env = os.environ
    return (_generation[0], len(env), env.get("HOME"),
            *(env.get(name) for name in _KNOWN_ORDER))


def plain_reach(options: Mapping[str, Any], environ: Mapping[str, str] | None = None
                ) -> Reach | None:
    """The reach botocore would resolve from ``options`` and ``environ`` (the process's
    by default), or None where it might resolve another one or needs its own chain."""
    env = os.environ if environ is None else environ
    if any(name.startswith("AWS_") and name not in KNOWN_ENV for name in env):
        return None
    if set(options) - _KNOWN_OPTIONS or _shared_config(env):
        return None
    client = dict(options.get("client_kwargs") or {})
    config = dict(options.get("config_kwargs") or {})
    if set(client) - _KNOWN_CLIENT or set(config) - _KNOWN_CONFIG:
        return None
    s3 = dict(config.get("s3") or {})
    if set(s3) - {"addressing_style"}:
        return None
    credentials = _credentials(options, env)
    endpoint = client.get("endpoint_url") or options.get("endpoint_url") or \
        env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if credentials is None or not isinstance(endpoint, str) or \
            not endpoint.startswith(("http://", "https://")):
        return None
    region = client.get("region_name") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
    verify = client.get("verify", env.get("AWS_CA_BUNDLE") or True)
    if not isinstance(region, str) or not isinstance(verify, (bool, str)):
        return None
    return Reach(endpoint, region, str(s3.get("addressing_style") or "auto"), verify,
                 credentials)


def _credentials(options: Mapping[str, Any], env: Mapping[str, str]) -> Credentials | None:
    """botocore's first two providers: the ones given to the client, then the
    environment's; a partial pair is botocore's to report."""
    if options.get("key") or options.get("secret") or options.get("token"):
        key, secret, token = options.get("key"), options.get("secret"), options.get("token")
    else:
        key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
        token = env.get("AWS_SESSION_TOKEN") or env.get("AWS_SECURITY_TOKEN")
    if not (isinstance(key, str) and key and isinstance(secret, str) and secret):
        return None
    return Credentials(key, secret, token if isinstance(token, str) and token else None)


def _shared_config(env: Mapping[str, str]) -> bool:
    """Whether botocore would read a shared config file (a region, an endpoint, an
    addressing style may be set there)."""
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.exists(os.path.join(home, ".aws", "config"))


class LazyS3:
    """The s3fs filesystem of a plain reach, made only when something needs it.

    Answers what the lean path reads of a filesystem (how it splits a path, that it is
    a plain one) itself; any other attribute is the real filesystem's, which ``make``
    gives (the storage's resolved filesystem: cached where fsspec caches it)."""

    protocol = ("s3", "s3a")
    root_marker = ""
    anon = False
    requester_pays = False
    version_aware = False

    def __init__(self, reach: Reach, make: Callable[[], Any]) -> None:
        self.reach = reach
        self._make = make
        self.made = False
        self.s3_additional_kwargs: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        self.made = True
        return getattr(self._make(), name)

    def __reduce__(self) -> tuple[Any, ...]:
        raise TypeError("a LazyS3 stays in its process")  # credentials inside

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        for protocol in cls.protocol:
            if path.startswith(protocol + "://"):
                path = path[len(protocol) + 3:]
        return path.rstrip("/")

    def split_path(self, path: str) -> tuple[str, str, str | None]:
        """s3fs's split for a bucket name (an access point's ARN is s3fs's own)."""
        if path.startswith(("arn:", "s3://arn:", "s3a://arn:")) or "?versionId=" in path:
            bucket, key, version = self._make().split_path(path)
            return bucket, key, version
        trail = path[len(path.rstrip("/")):]
        bucket, _, key = self._strip_protocol(path).lstrip("/").partition("/")
        return bucket, key + trail if key else "", None

    def unstrip_protocol(self, name: str) -> str:
        return name if name.startswith(("s3://", "s3a://")) else f"s3://{name}"

    @property
    def dircache(self) -> Any:
        """s3fs's cached listings: none while s3fs listed nothing."""
        return self._make().dircache if self.made else {}

    def invalidate_cache(self, path: str | None = None) -> None:
        """What s3fs listed of ``path`` forgotten; nothing, while s3fs listed nothing."""
        if self.made:
            self._make().invalidate_cache(path)


class StandIns:
    """One storage's stand-ins, by reach (new credentials in the environment: a new
    one); rebuilt where the storage is used, as its filesystems are."""

    __slots__ = ("_known", "_lock")

    def __init__(self) -> None:
        self._known: dict[Reach, LazyS3] = {}
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, ...]:
        return StandIns, ()

    def get(self, reach: Reach, make: Callable[[], Any]) -> LazyS3:
        with self._lock:
            lazy = self._known.get(reach)
            if lazy is None:
                lazy = self._known[reach] = LazyS3(reach, make)
            return lazy
