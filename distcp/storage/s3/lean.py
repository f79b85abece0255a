"""The copy path's S3 requests, signed and sent by hand (driver and executor).

The small object's GET, listing pages and the uploads' requests, without botocore's
request pipeline.

Downloading many small objects is bound by per-request CPU, not by the network:
measured here (2 cores, ``rclone serve s3`` on loopback, 32 threads, 64-byte objects),
one ``GetObject`` through s3fs costs 2.8-3.2 ms of CPU (aiobotocore's handler chain,
response parsing, and fsspec's hop to its event loop) and a synchronous botocore
client 2.9 ms, while signing the same request with botocore's own SigV4 signer and
sending it on a pooled urllib3 connection costs 1.0 ms: 4x the files per second, and
signing it here (``sign``, SigV4) instead of with botocore's signer
saves most of another 0.8 ms.

The request is then written on a kept-alive socket and its answer split by hand
(``distcp.storage.http.wire``): 94 µs of CPU per GET instead of urllib3's 464 (one thread,
2,000 GETs: 3,100/s instead of 1,400).

So a small object read whole with ``If-Match`` (``sources._get_listed``) goes through
``LeanGetter``: the endpoint, region and credentials are taken once from the s3fs
client the run configured (whatever chain found them: options, environment, profile,
instance role), the request is signed by ``sign`` and sent by ``httpwire``. Only the
plain case takes this path; anything else falls back to s3fs for that filesystem
(requester-pays buckets, SSE-C keys, extra request arguments, an unsigned or exotic
signer, a proxy) or for that request (a redirect to another region, an answer we do
not expect), so behaviour never depends on which path ran.

Uploads are bound the same way: a request of a small file's upload through s3fs cost
about 3 ms of CPU, on a machine whose other core runs the S3 server, and publishing a
file set completes every upload from the driver. So PutObject (per-file visibility),
CreateMultipartUpload, UploadPart and CompleteMultipartUpload go out on the same wire
(``put``, ``post``), a body's SHA-256 signed as botocore signs it on plain HTTP (the
server checks it), PutObject with its Content-MD5 besides (``distcp.storage.s3.put``).
A request that met a kept connection the server had closed is sent again, as
botocore's retries send any request again after a connection error: a second
CreateMultipartUpload leaves an upload nobody references, which the run's end aborts
(``distcp.commit.orphans``). A 200 answer that holds an ``<Error>`` (S3 may answer a
CompleteMultipartUpload so) is that error, retried when it is the server's trouble.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import random
import ssl
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

from distcp.storage.http.wire import Answer, Wire, proxied
from distcp.storage.s3 import settings
from distcp.storage.s3.reach import LazyS3
from distcp.storage.watchdog import watchdog_seconds

T = TypeVar("T")

#: Frozen credentials are taken again after this many seconds (refreshable ones expire).
CREDENTIALS_TTL_S = 300.0
_RETRY_STATUS = {500, 502, 503, 504, 429}
#: Codes of a 200 answer's ``<Error>`` that are the server's trouble (botocore retries them).
_RETRY_CODES = {"InternalError", "SlowDown", "ServiceUnavailable", "RequestTimeout"}


class _Fallback(Exception):
    """This request (or filesystem) goes through s3fs instead."""


class _HTTPError(OSError):
    """An S3 error answer, shaped like botocore's so ``s3.precondition_failed`` reads it."""

    def __init__(self, status: int, code: str, message: str) -> None:
        if code == "SlowDown" or status == 503:  # as s3fs raises it: the server sheds load
            super().__init__(errno.EBUSY, message)
        else:
            super().__init__(message)
        self.response = {"Error": {"Code": code, "Message": message},
                         "ResponseMetadata": {"HTTPStatusCode": status}}


class LeanGetter:
    """Signed GETs for one s3fs filesystem's endpoint and credentials."""

    def __init__(self, fs: Any) -> None:
        self.fs = fs
        self._credentials: Any = None
        self._fetched = 0.0
        if isinstance(fs, LazyS3):  # a plain reach: no botocore client made for it
            endpoint, self.region = fs.reach.endpoint, fs.reach.region
            style, verify = fs.reach.addressing, fs.reach.verify
            self._signer_credentials: Any = None
            self._credentials = fs.reach.credentials
        else:
            client = fsspec_sync(fs, fs.set_session)
            endpoint = client.meta.endpoint_url
            self.region = client.meta.region_name or "us-east-1"
            style = (client.meta.config.s3 or {}).get("addressing_style") or "auto"
            verify = (fs.client_kwargs or {}).get(  # botocore's order: given, then the
                "verify", os.environ.get("AWS_CA_BUNDLE") or True)  # environment's bundle
            self._signer_credentials = client._request_signer._credentials
        self.endpoint = urlsplit(endpoint)
        self.virtual_host = (style == "virtual" or (
            style == "auto" and self.endpoint.hostname is not None
            and self.endpoint.hostname.endswith(".amazonaws.com")))
        self._context = _tls_context(verify) if self.endpoint.scheme == "https" else None
        self._wires: dict[tuple[str, float], Wire] = {}
        self._lock = threading.Lock()
        #: Requests this getter sent (botocore's event hooks do not see them).
        self.sent = 0
        _ALL.add(self)

    def _forked(self) -> None:
        """In a process forked from the one that made this getter (a run's planning
        child, ``distcp.planning.beside``), none of the parent's kept connections: two
        processes writing requests on one socket would read each other's answers."""
        self._lock = threading.Lock()  # one a parent's thread held stays held here
        self._wires = {}

    def count_sent(self) -> None:
        """One more request sent for this getter (``requests_sent``)."""
        with self._lock:
            self.sent += 1

    def credentials(self, refresh: bool = False) -> Any:
        with self._lock:
            if self._signer_credentials is None:
                return self._credentials  # given, as botocore's own are: never refreshed
            if refresh or self._credentials is None or \
                    time.monotonic() - self._fetched > CREDENTIALS_TTL_S:
                self._credentials = fsspec_sync(
                    self.fs, self._signer_credentials.get_frozen_credentials)
                self._fetched = time.monotonic()
            return self._credentials

    def target(self, bucket: str, key: str) -> tuple[str, str]:
        """The host and the path a GET of ``bucket/key`` is sent to."""
        path = quote(key, safe="/~")
        host = self.endpoint.netloc
        if self.virtual_host and "." not in bucket and bucket.islower():
            return f"{bucket}.{host}", f"/{path}"
        return host, f"/{bucket}/{path}"

    def wire(self, host: str) -> Wire:
        """The kept connections to ``host`` (one per bucket with virtual-host addressing),
        their sockets' timeouts within the S3 bound in force now (``watchdog_seconds``):
        a getter made under another bound (a task's, a test's) keeps its own wires."""
        limit = watchdog_seconds()
        with self._lock:
            wire = self._wires.get((host, limit))
            if wire is None:
                wire = self._wires[(host, limit)] = Wire(
                    self.endpoint.scheme, host,
                    connect_timeout=min(settings.CONNECT_TIMEOUT_S, limit),
                    read_timeout=min(settings.READ_TIMEOUT_S, limit),
                    maxsize=settings.POOL_CONNECTIONS, context=self._context)
            return wire

    def get(self, bucket: str, key: str, etag: str) -> bytes:
        """The object's bytes if it still has ``etag`` (any version: ""); 412 as s3fs
        would raise it, also when the answer names another ETag: ``rclone serve s3``
        ignores ``If-Match`` and answers the object's new version."""
        host, path = self.target(bucket, key)
        where = f"s3://{bucket}/{key}"
        answer = self.call(host, path, {}, {"if-match": etag} if etag else {}, where)
        if not same_etag(answer.headers, etag):
            raise _HTTPError(412, "PreconditionFailed", f"GET {where}: answered ETag "
                             f"{answer.headers['etag']}, not the {etag} asked for")
        return answer.data

    def put(self, operation: str, bucket: str, key: str, body: bytes | memoryview,
            params: dict[str, str], headers: dict[str, str]) -> str:
        """PUT ``body`` at ``bucket/key`` (``params``: an UploadPart's number and upload
        id); the answer's ETag."""
        host, path = self.target(bucket, key)
        answer = self.call(host, path, params, headers, f"s3://{bucket}/{key}", "PUT", body,
                           operation)
        etag = answer.headers.get("etag", "")
        if not etag:
            raise _Fallback("an answer to PUT without an ETag")
        return etag

    def post(self, operation: str, bucket: str, key: str, params: dict[str, str],
             body: bytes = b"") -> bytes:
        """POST to ``bucket/key`` (``params``: ``uploads``, or an ``uploadId``); the
        answer's XML."""
        host, path = self.target(bucket, key)
        return self.call(host, path, params, {}, f"s3://{bucket}/{key}", "POST", body,
                         operation).data

    def list_bucket(self, bucket: str, params: dict[str, str]) -> bytes:
        """The XML answer of a bucket-level GET (``list-type=2``: ListObjectsV2;
        ``uploads``: ListMultipartUploads)."""
        return self.call(*self.bucket_target(bucket), params, {}, f"s3://{bucket}").data

    def bucket_target(self, bucket: str) -> tuple[str, str]:
        """The host and the path of a request to the bucket itself."""
        host, path = self.target(bucket, "")
        if not host.startswith(f"{bucket}."):
            path = f"/{bucket}"  # path style: the bucket, not an empty key in it
        return host, path

    def head(self, bucket: str, key: str) -> dict[str, str]:
        """The headers of a HEAD of ``bucket/key`` (``key`` "": of the bucket);
        FileNotFoundError or PermissionError as s3fs raises them."""
        host, path = self.target(bucket, key) if key else self.bucket_target(bucket)
        return self.call(host, path, {}, {}, f"s3://{bucket}/{key}" if key else f"s3://{bucket}",
                         "HEAD", operation="HeadObject" if key else "HeadBucket").headers

    def delete_keys(self, bucket: str, body: bytes, md5: str) -> bytes:
        """DeleteObjects (``body``: its XML, ``md5``: the body's Content-MD5, which S3
        requires); the answer's XML."""
        return self.call(*self.bucket_target(bucket), {"delete": ""},
                         {"Content-MD5": md5, "Content-Type": "application/xml"},
                         f"s3://{bucket}", "POST", body, "DeleteObjects").data

    def delete(self, bucket: str, key: str, upload_id: str = "") -> bool:
        """DeleteObject of ``bucket/key`` (a key that is not there is no error on S3);
        with ``upload_id``, AbortMultipartUpload of that upload."""
        host, path = self.target(bucket, key)
        self.call(host, path, {"uploadId": upload_id} if upload_id else {}, {},
                  f"s3://{bucket}/{key}", "DELETE",
                  operation="AbortMultipartUpload" if upload_id else "DeleteObject")
        return True

    def call(self, host: str, path: str, params: dict[str, str], headers: dict[str, str],
             where: str, method: str = "GET", body: bytes | memoryview = b"",
             operation: str = "") -> Answer:
        """A signed request, retried as botocore would (connection trouble, throttling,
        an expired token once) within the S3 bound (``watchdog_seconds``); its 200
        answer, or the error s3fs would raise, naming ``operation`` (else the method)."""
        refreshed = False
        what = f"{operation or method} {where}"
        payload = hashlib.sha256(body).hexdigest() if body else _EMPTY_SHA256
        limit = watchdog_seconds()
        deadline = time.monotonic() + limit
        for attempt in range(settings.THROTTLE_RETRIES + 1):
            try:
                response = self._send(method, host, path, params, headers, body, payload)
            except _Fallback:
                raise
            except Exception as exc:  # noqa: BLE001 - connection trouble: retried or raised
                _pause_or_give_up(exc, attempt, deadline, limit, what)
                continue
            status, code = _outcome(response, method)
            if status == 200 or (status == 204 and method == "DELETE"):
                return response
            if status == 403 and code in ("ExpiredToken", "InvalidToken") and not refreshed:
                self.credentials(refresh=True)
                refreshed = True
                continue
            if status in _RETRY_STATUS and attempt < settings.THROTTLE_RETRIES \
                    and settings.throttle_pause(attempt, deadline):
                continue
            raise _answer_error(status, code, where, what)
        raise AssertionError("unreachable")

    def _send(self, method: str, host: str, path: str, params: dict[str, str],
              headers: dict[str, str], body: bytes | memoryview, payload: str) -> Answer:
        credentials = self.credentials()
        if credentials is None:  # s3fs says why (NoCredentialsError) in its own words
            raise _Fallback("no credentials")
        query = canonical_query(params)
        signed = sign(method, host, path, headers, credentials, self.region, query=query,
                      payload=payload)
        response = self.wire(host).request(method, f"{path}?{query}" if query else path,
                                           signed, body)
        self.count_sent()
        if 300 <= response.status < 400 or (
                response.status == 400 and _error_code(response.data) in (
                    "AuthorizationHeaderMalformed", "PermanentRedirect")):
            raise _Fallback(f"redirected ({response.status})")
        return response


def same_etag(headers: dict[str, str], etag: str) -> bool:
    """Whether an answer (its lower-cased ``headers``) is of the version ``etag`` names
    (True where either side names none)."""
    given = headers.get("etag")
    return not etag or given is None or given.strip('"') == etag.strip('"')


def _pause_or_give_up(exc: Exception, attempt: int, deadline: float, limit: float,
                      what: str) -> None:
    """After connection trouble, wait a little before the next attempt, as botocore's
    retries do (a kept connection the server closed is the common case); past its
    attempts or the S3 bound, raise what s3fs would: a TimeoutError naming the bound,
    else an OSError naming the request."""
    if attempt >= settings.MAX_ATTEMPTS - 1 or time.monotonic() >= deadline:
        if isinstance(exc, TimeoutError):
            raise TimeoutError(settings.no_answer(limit, what)) from exc
        raise OSError(f"{what}: {exc}") from exc
    time.sleep(random.uniform(0.1, 0.3) * 2 ** attempt)


def _outcome(response: Answer, method: str) -> tuple[int, str]:
    """The answer's status and error code as the retry rules read them: S3 may answer a
    POST (CompleteMultipartUpload) 200 with an ``<Error>`` inside, which is that error,
    retried as a 500 when it is the server's trouble."""
    status = response.status
    code = _error_code(response.data) if status != 200 or (
        method == "POST" and _an_error(response.data)) else ""
    if status == 200 and code:
        status = 500 if code in _RETRY_CODES else 400
    return status, code


def _an_error(body: bytes) -> bool:
    """Whether an XML answer is an ``<Error>`` (not a DeleteObjects result, which lists
    the keys it could not remove as ``<Error>`` elements inside)."""
    head = body[:512].lstrip()
    if head.startswith(b"<?xml"):
        head = head[head.find(b"?>") + 2:].lstrip()
    return head.startswith(b"<Error>")


def _tls_context(verify: bool | str) -> ssl.SSLContext:
    """botocore's ``verify``: True (the system's CAs), a CA bundle's path, or False."""
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)


_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_KEYS: dict[tuple[str, str, str], bytes] = {}


def canonical_query(params: dict[str, str]) -> str:
    """A query string as SigV4 signs it and as it is then sent: names and values
    percent-encoded (all but RFC 3986's unreserved characters), sorted by name."""
    return "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
                    for k, v in sorted(params.items()))


def sign(method: str, host: str, path: str, headers: dict[str, str], credentials: Any,
         region: str, now: float | None = None, query: str = "",
         payload: str = _EMPTY_SHA256) -> dict[str, str]:
    """AWS Signature Version 4 of a request, as S3 wants it: the path signed as sent
    (each key segment percent-encoded once, never normalised), ``query`` as
    ``canonical_query`` gives it, ``payload`` the body's SHA-256 in hex (the empty
    body's by default). botocore's signer computes the same in 0.8 ms; this in a
    tenth, and the signing key is derived once a day. Returns the headers to send."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    day = stamp[:8]
    signed = {**{k.lower(): v.strip() for k, v in headers.items()}, "host": host,
              "x-amz-content-sha256": payload, "x-amz-date": stamp}
    if credentials.token:
        signed["x-amz-security-token"] = credentials.token
    names = sorted(signed)
    canonical = "\n".join([method, path, query, *(f"{n}:{signed[n]}" for n in names), "",
                           ";".join(names), payload])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = _signing_key(credentials.secret_key, day, region)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    signed["authorization"] = (f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
                               f"SignedHeaders={';'.join(names)}, Signature={signature}")
    del signed["host"]  # the wire sends the Host header itself
    return signed


def _signing_key(secret: str, day: str, region: str) -> bytes:
    cached = _KEYS.get((secret, day, region))
    if cached is None:
        key = ("AWS4" + secret).encode()
        for part in (day, region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        _KEYS.clear()  # one secret, one day and one region at a time in practice
        cached = _KEYS[(secret, day, region)] = key
    return cached


def _error_code(body: bytes) -> str:
    """The ``<Code>`` of an S3 XML error body, or ""."""
    start = body.find(b"<Code>")
    end = body.find(b"</Code>", start)
    return body[start + 6:end].decode(errors="replace") if start >= 0 and end > start else ""


def _answer_error(status: int, code: str, where: str, what: str) -> OSError:
    if status == 404:
        return FileNotFoundError(f"{where}: {code or 'NoSuchKey'}")
    if status == 403:  # a builtin, as s3fs raises it, with the code botocore's carried
        refused = PermissionError(f"{where}: {code or 'AccessDenied'}")
        refused.response = {"Error": {"Code": code or "AccessDenied"},  # type: ignore[attr-defined]
                            "ResponseMetadata": {"HTTPStatusCode": 403}}
        return refused
    return _HTTPError(status, code or str(status), f"{what}: HTTP {status} {code}".strip())


def fsspec_sync(fs: Any, coroutine: Any, *args: Any) -> Any:
    import fsspec.asyn

    return fsspec.asyn.sync(fs.loop, coroutine, *args, timeout=watchdog_seconds())


_GETTERS: dict[int, tuple[Any, LeanGetter | None]] = {}
_GETTERS_LOCK = threading.Lock()
#: Every getter of this process, for ``_after_fork``.
_ALL: weakref.WeakSet[LeanGetter] = weakref.WeakSet()


def _after_fork() -> None:
    """A forked child's getters keep none of the parent's connections or held locks
    (``LeanGetter._forked``): asked once at the fork, not at every request."""
    global _GETTERS_LOCK
    _GETTERS_LOCK = threading.Lock()
    for getter in list(_ALL):
        getter._forked()


os.register_at_fork(after_in_child=_after_fork)
DISABLE_ENV = "PYDISTCP_S3_LEAN_GET"


def requests_sent() -> int:
    """Requests this process sent on the lean path (for request counts and tests)."""
    with _GETTERS_LOCK:
        return sum(g.sent for _, g in _GETTERS.values() if g is not None)


def _getter(fs: Any) -> LeanGetter | None:
    """This process's getter for ``fs`` (None: this filesystem stays on s3fs)."""
    with _GETTERS_LOCK:
        known = _GETTERS.get(id(fs))
        if known is None or known[0] is not fs:
            known = _GETTERS[id(fs)] = (fs, LeanGetter(fs) if _plain(fs) else None)
        return known[1]


def _plain(fs: Any) -> bool:
    """Only the plain signed case: anything special keeps s3fs's full pipeline."""
    if os.environ.get(DISABLE_ENV) == "0" or getattr(fs, "anon", False):
        return False
    if isinstance(fs, LazyS3):  # ``plain_reach`` refused every special setting
        return not proxied()
    if getattr(fs, "requester_pays", False) or getattr(fs, "version_aware", False):
        return False
    if getattr(fs, "s3_additional_kwargs", None):
        return False
    config = getattr(fs, "config_kwargs", None) or {}
    if "signature_version" in config or config.get("proxies"):
        return False
    return not proxied()  # botocore honours the proxy variables; the wire does not


def lean(fs: Any, action: Callable[[LeanGetter], T]) -> T | None:
    """``action`` done by ``fs``'s lean getter; None when ``fs`` is served by s3fs (a
    special filesystem, or one that answered with a redirect or had no credentials: from
    then on, for this process)."""
    try:
        getter = _getter(fs)
    except Exception:  # noqa: BLE001 - a client we cannot read: s3fs knows it
        with _GETTERS_LOCK:
            _GETTERS[id(fs)] = (fs, None)
        getter = None
    if getter is None:
        return None
    try:
        return action(getter)
    except _Fallback:  # another region, no credentials: s3fs from now on, for this fs
        with _GETTERS_LOCK:
            _GETTERS[id(fs)] = (fs, None)
        return None


def endpoint_of(fs: Any) -> str:
    """The endpoint ``fs``'s lean getter sends to; "" when ``fs`` is served by s3fs."""
    return lean(fs, lambda getter: getter.endpoint.geturl()) or ""


def get(fs: Any, bucket: str, key: str, etag: str = "") -> bytes | None:
    """A GetObject (If-Match ``etag``, unless "") through the lean path: the bytes, or
    None when ``fs`` is served by s3fs (``distcp.storage.s3.ops.get_if_match`` and
    ``ObjectStorage.read_bytes`` then ask s3fs)."""
    return lean(fs, lambda getter: getter.get(bucket, key, etag))


def head(fs: Any, bucket: str, key: str) -> dict[str, str] | None:
    """The headers of a HEAD of ``bucket/key`` (``key`` "": of the bucket) through the
    lean path; None when ``fs`` is served by s3fs."""
    return lean(fs, lambda getter: getter.head(bucket, key))


def delete(fs: Any, bucket: str, key: str, upload_id: str = "") -> bool | None:
    """DeleteObject (with ``upload_id``: AbortMultipartUpload) through the lean path:
    True, or None when ``fs`` is served by s3fs."""
    return lean(fs, lambda getter: getter.delete(bucket, key, upload_id))


def put(fs: Any, operation: str, bucket: str, key: str, body: bytes | memoryview,
        params: dict[str, str], headers: dict[str, str]) -> str | None:
    """A PutObject or an UploadPart (``operation``, botocore's name) through the lean
    path: the ETag, or None when ``fs`` is served by s3fs."""
    return lean(fs, lambda getter: getter.put(operation, bucket, key, body, params, headers))


def post(fs: Any, operation: str, bucket: str, key: str, params: dict[str, str],
         body: bytes = b"") -> bytes | None:
    """A CreateMultipartUpload or CompleteMultipartUpload (``operation``) through the
    lean path: the answer's XML, or None when ``fs`` is served by s3fs."""
    return lean(fs, lambda getter: getter.post(operation, bucket, key, params, body))


def xml_text(answer: bytes, tag: str) -> str:
    """The text of the first ``<tag>`` of an S3 XML answer, entities resolved; an
    OSError when there is none."""
    start = answer.find(f"<{tag}>".encode())
    end = answer.find(f"</{tag}>".encode(), start)
    if start < 0 or end < 0:
        raise OSError(f"an S3 answer without <{tag}>: {answer[:200]!r}")
    from xml.sax.saxutils import unescape  # here: a local run never needs it (0.01 s)

    return unescape(answer[start + len(tag) + 2:end].decode(),
                    {"&quot;": '"', "&#34;": '"', "&apos;": "'", "&#39;": "'"})
