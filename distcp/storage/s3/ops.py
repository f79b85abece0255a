"""S3 requests through s3fs, bounded; multipart uploads as staging (driver and executor).

On S3 a rename is a full copy, so staging-then-rename pays for every byte
twice. Instead a file is staged as an *uncompleted multipart upload* on its
final key: invisible to HEAD, GET and LIST until ``CompleteMultipartUpload``
(the publish), and removed without trace by ``AbortMultipartUpload``. A staged
upload is a ``distcp.storage.Staged`` value (written ``s3-upload:<upload id>:<final
url>`` in TaskResults, the journal and the commit log), so any of them can complete
or abort it later.

Every request goes through ``call`` with a watchdog: s3fs can hang forever on a
request a server rejects up front (PITFALLS.md), and keys are validated before
anything is sent. Storage options (which hold the secret in plain text) are
only ever passed to ``filesystem``; nothing here logs or stores them.

Two bounds keep a server that stops answering from hanging a run:

- ``bounded_options`` gives every s3fs filesystem we build botocore timeouts per
  attempt and a bounded number of attempts (unless the user set them), so each
  request s3fs makes for us ends, whichever API makes it (``fs.ls``, ``fs.open``...);
- ``call`` and ``sync_bounded`` (state, journal and progress documents) also put a
  watchdog around the whole operation, retries included, because no socket timeout
  covers a request body the server stopped reading (aiohttp has no write timeout).

Both come from ``PYDISTCP_S3_TIMEOUT`` (seconds, default 300): the longest one S3
operation may take. Per-attempt socket timeouts are capped by it too. The driver
reads it once per run into ``TaskSpec.request_timeout``; tasks run ``bounded_by`` it
(``distcp.storage.watchdog``).
"""

from __future__ import annotations

import base64
import errno
import hashlib
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlencode

import fsspec.asyn
from fsspec.exceptions import FSTimeoutError

from distcp import request_count
from distcp.names import utf8_problem
from distcp.storage.errors import ServerSideCopyUnsupported
from distcp.storage.s3 import lean, settings
from distcp.storage.watchdog import watchdog_seconds
from distcp.storage.writes import WriteOptions

MIN_PART = 5 << 20
MAX_PART = 5 << 30
MAX_PARTS = 10_000
MAX_KEY_BYTES = 1024


def bucket_key(fs: Any, url: str) -> tuple[str, str]:
    bucket, _, key = fs._strip_protocol(url).partition("/")
    return bucket, key


def key_problem(key: str) -> str | None:
    """Why ``key`` must not be sent to a server, or None.

    Empty, ``.`` and ``..`` segments are rejected up front: strict servers refuse
    them, and s3fs was seen to hang on such a refusal (PITFALLS.md). A key is UTF-8: a
    local name that is not cannot become one.
    """
    problem = utf8_problem(key)
    if problem:
        return problem
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        return f"key longer than {MAX_KEY_BYTES} bytes"
    segments = key.split("/")
    if any(s in ("", ".", "..") for s in segments):
        return "key has an empty, '.' or '..' segment"
    return None


def bounded_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """s3fs storage options with per-attempt timeouts and attempts set where the user
    set none: botocore retries a timed-out attempt and s3fs retries botocore's error,
    so without a cap on attempts one silent server costs many times the timeout."""
    limit = watchdog_seconds()
    config = dict(options.get("config_kwargs") or {})
    config.setdefault("connect_timeout", min(settings.CONNECT_TIMEOUT_S, limit))
    config.setdefault("read_timeout", min(settings.READ_TIMEOUT_S, limit))
    # total_max_attempts counts the first try; botocore reads max_attempts as retries.
    config.setdefault("retries", {"total_max_attempts": settings.MAX_ATTEMPTS, "mode": "standard"})
    config.setdefault("max_pool_connections", settings.POOL_CONNECTIONS)
    return {**options, "config_kwargs": config}


def sync_bounded(fs: Any, what: str, coroutine: Any, *args: Any, **kwargs: Any) -> Any:
    """Run an async s3fs method; a TimeoutError naming ``what`` after watchdog_seconds().
    A throttled method is sent again after growing pauses while they fit in that bound.

    The abandoned request is left to the event loop (fsspec cannot cancel it); its
    socket timeouts end it later.
    """
    limit = watchdog_seconds()
    deadline = time.monotonic() + limit
    for attempt in range(settings.THROTTLE_RETRIES + 1):
        try:
            return fsspec.asyn.sync(fs.loop, coroutine, *args, timeout=limit, **kwargs)
        except FSTimeoutError as exc:
            raise TimeoutError(settings.no_answer(limit, what)) from exc
        except OSError as exc:
            if exc.errno != errno.EBUSY or attempt == settings.THROTTLE_RETRIES or \
                    not settings.throttle_pause(attempt, deadline):
                raise
    raise AssertionError("unreachable")


async def _get_if_match(fs: Any, bucket: str, key: str, etag: str) -> bytes:
    out = await fs._call_s3("get_object", Bucket=bucket, Key=key, IfMatch=etag)
    body = out["Body"]
    try:
        data = await body.read()
    finally:
        body.close()
    return bytes(data)


def get_if_match(fs: Any, url: str, etag: str) -> bytes:
    """The whole object in ONE GET, only if it still has ``etag``: on the lean path when
    it serves ``fs``, else through s3fs.

    The server answers 412 (an OSError naming PreconditionFailed, from either path) when
    the object changed since the listing, so the bytes are the listed version's and no
    HEAD is needed before (size, ETag) or after (the recheck).
    """
    bucket, key = bucket_key(fs, url)
    data = lean.get(fs, bucket, key, etag)
    if data is not None:
        return data
    request_count.count_method("get_object")
    return sync_bounded(fs, f"GetObject {url}", _get_if_match, fs, bucket, key, etag)  # type: ignore[no-any-return]


def precondition_failed(exc: BaseException) -> bool:
    """Whether s3fs's error is the server's 412 (an If-Match that no longer holds)."""
    return _answered(exc, "PreconditionFailed", 412)


def not_implemented(exc: BaseException) -> bool:
    """Whether s3fs's error is the server's 501: a request this S3-compatible server
    does not have (Google Cloud Storage's XML API has no DeleteObjects)."""
    return _answered(exc, "NotImplemented", 501)


def _answered(exc: BaseException, code: str, status: int) -> bool:
    """Whether the server's answer behind s3fs's error (or its causes) had ``code`` or
    ``status``."""
    seen: BaseException | None = exc
    while seen is not None:
        response = getattr(seen, "response", None) or {}
        if (response.get("Error", {}).get("Code") == code
                or response.get("ResponseMetadata", {}).get("HTTPStatusCode") == status):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def call(fs: Any, method: str, **kwargs: Any) -> Any:
    """One S3 request through s3fs, abandoned (TimeoutError) after watchdog_seconds()."""
    what = f"{method} s3://{kwargs.get('Bucket', '')}/{kwargs.get('Key', '')}"
    request_count.count_method(method)
    return sync_bounded(fs, what, fs._call_s3, method, **kwargs)


#: Seconds a bucket that refused new uploads through all throttle retries is not asked
#: again by this process: its next files fail at once instead of each waiting it out.
REFUSAL_MEMORY_S = 60.0
_refused: dict[str, tuple[float, str]] = {}


def create(fs: Any, url: str, extra: Mapping[str, Any] | None = None) -> str:
    """Start the upload that stages ``url`` (``extra``: the arguments the object is
    created with, ``object_arguments``; they go through botocore, not the lean path).

    A server that keeps answering SlowDown here may be capping pending uploads
    (``rclone serve s3`` refuses a 1,001st): every file of a file set stays a pending
    upload until the set publishes, so the error says so instead of "SlowDown".
    """
    bucket, key = bucket_key(fs, url)
    refused = _refused.get(bucket)
    if refused and time.monotonic() - refused[0] < REFUSAL_MEMORY_S:
        raise OSError(errno.EBUSY, refused[1])
    try:
        answer = None if extra else _lean_post(fs, "create_multipart_upload", bucket, key,
                                               {"uploads": ""})
        if answer is not None:
            return str(lean.xml_text(answer, "UploadId"))
        return str(call(fs, "create_multipart_upload", Bucket=bucket, Key=key,
                        **(extra or {}))["UploadId"])
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            raise
        why = (f"the server kept refusing new multipart uploads in bucket {bucket!r} "
               f"({exc.strerror or exc}) through {settings.THROTTLE_RETRIES} retries: it is "
               "overloaded or caps pending uploads (rclone serve s3 allows 1,000); every "
               "file of a file set is a pending upload until the set publishes, so copy "
               "fewer files per run (--include/--exclude), publish each file as it is "
               "copied (--visibility file: a small file is one PutObject, never pending), "
               "or use another server")
        _refused[bucket] = (time.monotonic(), why)
        raise OSError(errno.EBUSY, why) from exc


def upload_part(fs: Any, url: str, upload_id: str, number: int, data: bytes | memoryview) -> str:
    """One part of an upload; its ETag. Sent on the lean path when it serves ``fs``
    (``distcp.storage.s3.lean``: the body signed by its SHA-256, as botocore signs it)."""
    bucket, key = bucket_key(fs, url)
    etag = _lean_put(fs, "upload_part", bucket, key, data,
                     {"partNumber": str(number), "uploadId": upload_id}, {})
    if etag is None:
        out = call(fs, "upload_part", Bucket=bucket, Key=key, UploadId=upload_id,
                   PartNumber=number, Body=bytes(data))
        etag = str(out["ETag"])
    return etag


def copy_part(fs: Any, url: str, upload_id: str, number: int, source_url: str,
              first: int, last: int) -> str:
    """UploadPartCopy of source bytes [first, last]: the server copies, nothing comes here."""
    bucket, key = bucket_key(fs, url)
    sbucket, skey = bucket_key(fs, source_url)
    out = call(fs, "upload_part_copy", Bucket=bucket, Key=key, UploadId=upload_id,
               PartNumber=number, CopySource={"Bucket": sbucket, "Key": skey},
               CopySourceRange=f"bytes={first}-{last}")
    etag = (out.get("CopyPartResult") or {}).get("ETag")
    if not etag:
        raise ServerSideCopyUnsupported("the server answered UploadPartCopy without a part "
                                        "ETag, so it does not copy server-side")
    return str(etag)


def complete(fs: Any, url: str, upload_id: str,
             parts: Sequence[tuple[int, str, int]]) -> str:
    """Complete an upload; returns the ETag the server gave the object."""
    from xml.sax.saxutils import escape  # here: a local run never needs it (0.01 s)

    bucket, key = bucket_key(fs, url)
    body = "".join(f"<Part><ETag>{escape(str(e))}</ETag><PartNumber>{int(n)}</PartNumber></Part>"
                   for n, e, _ in sorted(parts))
    try:
        answer = _lean_post(fs, "complete_multipart_upload", bucket, key,
                            {"uploadId": upload_id},
                            f'<CompleteMultipartUpload xmlns="{_XMLNS}">{body}'
                            "</CompleteMultipartUpload>".encode())
        if answer is not None:
            return str(lean.xml_text(answer, "ETag"))
        out = call(fs, "complete_multipart_upload", Bucket=bucket, Key=key, UploadId=upload_id,
                   MultipartUpload={"Parts": [{"PartNumber": int(n), "ETag": str(e)}
                                              for n, e, _ in sorted(parts)]})
        return str(out.get("ETag", ""))
    finally:
        written(fs, bucket, key)


def written(fs: Any, bucket: str, key: str) -> None:
    """Forget the listings ``fs`` cached of the folders above ``bucket/key``: an
    object was written or removed there by one of our requests, and s3fs forgets them
    only on writes of its own API. It answers ``info`` (every ``stat``) from a folder's
    cached listing once one was taken (a destination's ``isdir`` takes one): a key
    written after it would stay missing there, and a copy planned on that stat would
    publish the file again. Where none was taken (an upload's usual case) there is
    nothing to forget, and the walk up the key's folders is skipped."""
    if len(fs.dircache):
        fs.invalidate_cache(f"{bucket}/{key}")


_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"


def abort(fs: Any, url: str, upload_id: str) -> None:
    """Abort an upload; one that is already gone (completed or aborted) is fine."""
    bucket, key = bucket_key(fs, url)
    try:
        sent = lean.delete(fs, bucket, key, upload_id)
    except FileNotFoundError:
        sent = True
    if sent:
        request_count.count_method("abort_multipart_upload")  # as ``call`` counts its own
        return
    try:
        call(fs, "abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload_id)
    except FileNotFoundError:
        pass


def content_md5(data: bytes) -> str:
    """The Content-MD5 header of a body: a server that received other bytes refuses it."""
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def put(fs: Any, url: str, data: bytes, extra: Mapping[str, Any] | None = None,
        digest: bytes | None = None) -> str:
    """One PutObject with the body's Content-MD5: a server that received other bytes
    refuses the request (BadDigest) instead of storing them. Returns the ETag.
    ``extra`` as ``create``'s; ``digest``: the body's MD5 where the caller has it."""
    bucket, key = bucket_key(fs, url)
    md5 = base64.b64encode(digest or hashlib.md5(data).digest()).decode()
    try:
        etag = None if extra else _lean_put(fs, "put_object", bucket, key, data, {},
                                            {"Content-MD5": md5})
        if etag is None:
            etag = str(call(fs, "put_object", Bucket=bucket, Key=key, Body=data,
                            ContentMD5=md5, **(extra or {})).get("ETag", ""))
        return etag
    finally:
        written(fs, bucket, key)


def object_arguments(writes: WriteOptions) -> dict[str, Any]:
    """The arguments of CreateMultipartUpload and PutObject that give an object the
    write options: StorageClass, SSE-KMS (ServerSideEncryption ``aws:kms`` and
    SSEKMSKeyId), a canned ACL, user metadata (``x-amz-meta-*``) and tags (the
    ``x-amz-tagging`` query string). Requester pays is s3fs's own option (every
    request it sends then carries RequestPayer)."""
    out: dict[str, Any] = {}
    if writes.storage_class:
        out["StorageClass"] = writes.storage_class
    if writes.kms_key_id:
        out["ServerSideEncryption"] = "aws:kms"
        out["SSEKMSKeyId"] = writes.kms_key_id
    if writes.acl:
        out["ACL"] = writes.acl
    if writes.metadata:
        out["Metadata"] = dict(writes.metadata)
    if writes.tags:
        out["Tagging"] = urlencode(writes.tags)
    return out


def _lean_put(fs: Any, method: str, bucket: str, key: str, data: bytes | memoryview,
              params: dict[str, str], headers: dict[str, str]) -> str | None:
    """The ETag of ``method`` sent on the lean path, or None when s3fs serves ``fs``."""
    etag: str | None = lean.put(fs, method, bucket, key, data, params, headers)
    if etag is not None:
        request_count.count_method(method)
    return etag


def _lean_post(fs: Any, method: str, bucket: str, key: str, params: dict[str, str],
               body: bytes = b"") -> bytes | None:
    """The XML answer of ``method`` sent on the lean path, or None when s3fs serves ``fs``."""
    answer: bytes | None = lean.post(fs, method, bucket, key, params, body)
    if answer is not None:
        request_count.count_method(method)
    return answer


def lean_info(fs: Any, path: str) -> dict[str, Any] | None:
    """s3fs's ``info`` of ``path`` (a HEAD; on 404, one page of what is under it: a
    folder) through the lean path; None when s3fs answers (a bucket, a version, a
    filesystem it serves). FileNotFoundError when nothing is there."""
    bucket, key, version = fs.split_path(path)
    if not key or version:
        return None
    try:
        found = lean.head(fs, bucket, key)
    except FileNotFoundError:
        pass  # maybe a folder: asked as s3fs asks
    else:
        if found is None:
            return None
        modified = found.get("last-modified")
        return {"ETag": found.get("etag", ""),
                "LastModified": parsedate_to_datetime(modified) if modified else "",
                "size": int(found.get("content-length", 0)), "name": f"{bucket}/{key}",
                "type": "file", "StorageClass": found.get("x-amz-storage-class", "STANDARD"),
                "VersionId": found.get("x-amz-version-id"),
                "ContentType": found.get("content-type")}
    under = lean_holds_keys(fs, bucket, key)
    if under is None:
        return None
    if not under:
        raise FileNotFoundError(errno.ENOENT, "no such key or folder", path)
    return {"name": f"{bucket}/{key}", "type": "directory", "size": 0,
            "StorageClass": "DIRECTORY"}


def lean_holds_keys(fs: Any, bucket: str, key: str) -> bool | None:
    """Whether anything is under the folder ``key`` (one page of one key, as s3fs
    asks); None when s3fs answers."""
    params = {"list-type": "2", "prefix": key.rstrip("/") + "/" if key else "",
              "delimiter": "/", "max-keys": "1", "encoding-type": "url"}
    page = lean.lean(fs, lambda getter: getter.list_bucket(bucket, params))
    if page is None:
        return None
    return b"<Contents>" in page or b"<CommonPrefixes>" in page


def holds(fs: Any, url: str, size: int, parts: Sequence[tuple[int, str, int]] = ()) -> bool:
    """Whether the object at ``url`` has ``size`` and, when the server gives multipart
    ETags, the ETag of exactly these parts (one HEAD)."""
    found = head(fs, url)
    if found is None or int(found.get("ContentLength", -1)) != size:
        return False
    etag = str(found.get("ETag", ""))
    if not parts or "-" not in etag:
        return True  # a single PUT, or a server that gives a plain MD5 (rclone serve s3)
    return etag == multipart_etag([str(e) for _, e, _ in sorted(parts)])


def head(fs: Any, url: str) -> dict[str, Any] | None:
    """HeadObject's answer as botocore shapes it (on the lean path: the fields read
    here, ContentLength and ETag); None when no object is there."""
    bucket, key = bucket_key(fs, url)
    try:
        found = lean.head(fs, bucket, key)
    except Exception as exc:  # asked on the lean path: counted as ``call`` counts its own
        request_count.count_method("head_object")
        if isinstance(exc, FileNotFoundError):
            return None
        raise
    if found is None:  # served by s3fs: ``call`` counts it
        try:
            return dict(call(fs, "head_object", Bucket=bucket, Key=key))
        except FileNotFoundError:
            return None
    request_count.count_method("head_object")
    return {"ContentLength": int(found.get("content-length", 0)),
            "ETag": found.get("etag", "")}


def list_parts(fs: Any, url: str, upload_id: str) -> dict[int, tuple[str, int]] | None:
    """part number -> (ETag, size) of a pending upload; None when it is gone."""
    bucket, key = bucket_key(fs, url)
    parts: dict[int, tuple[str, int]] = {}
    marker = 0
    while True:
        try:
            out = call(fs, "list_parts", Bucket=bucket, Key=key, UploadId=upload_id,
                       PartNumberMarker=marker)
        except FileNotFoundError:
            return None
        for p in out.get("Parts", []):
            parts[int(p["PartNumber"])] = (str(p["ETag"]), int(p["Size"]))
        if not out.get("IsTruncated"):
            return parts
        marker = int(out["NextPartNumberMarker"])


def uploads(fs: Any, prefix_url: str) -> Iterator[tuple[str, str, float]]:
    """(final URL, upload id, initiated epoch seconds) of pending uploads under a prefix."""
    bucket, prefix = bucket_key(fs, prefix_url)
    prefix = prefix.rstrip("/") + "/" if prefix.strip("/") else ""
    pages = _lean_uploads(fs, bucket, prefix)
    if pages is not None:
        yield from pages
        return
    kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    while True:
        try:
            out = call(fs, "list_multipart_uploads", **kwargs)
        except FileNotFoundError:  # rclone serve s3 answers NoSuchUpload when there is none
            return
        for u in out.get("Uploads", []):
            yield f"s3://{bucket}/{u['Key']}", str(u["UploadId"]), u["Initiated"].timestamp()
        if not out.get("IsTruncated"):
            return
        kwargs.update(KeyMarker=out["NextKeyMarker"], UploadIdMarker=out["NextUploadIdMarker"])


def delete_keys(fs: Any, bucket: str, keys: Sequence[str]) -> list[tuple[str, str, str]]:
    """DeleteObjects of ``keys`` (quiet), on the lean path where it serves ``fs``:
    (key, code, message) of each key the server could not remove. A server without
    DeleteObjects raises its 501 (``not_implemented``): ``delete_key`` each then."""
    from xml.sax.saxutils import escape

    body = "".join([f'<Delete xmlns="{_XMLNS}"><Quiet>true</Quiet>',
                    *(f"<Object><Key>{escape(k)}</Key></Object>" for k in keys),
                    "</Delete>"]).encode()
    md5 = content_md5(body)
    answer = lean.lean(fs, lambda getter: getter.delete_keys(bucket, body, md5))
    if answer is None:
        out = call(fs, "delete_objects", Bucket=bucket, Delete={
            "Objects": [{"Key": k} for k in keys], "Quiet": True})
        return [(str(e.get("Key", "")), str(e.get("Code", "")), str(e.get("Message", "")))
                for e in out.get("Errors") or []]
    request_count.count_method("delete_objects")
    return [(lean.xml_text(e, "Key"), lean.xml_text(e, "Code"),
             lean.xml_text(e, "Message") if b"<Message>" in e else "")
            for e in _ERROR.findall(answer)]


def delete_key(fs: Any, bucket: str, key: str) -> None:
    """One DeleteObject, on the lean path where it serves ``fs``."""
    if lean.delete(fs, bucket, key) is None:
        call(fs, "delete_object", Bucket=bucket, Key=key)
    else:
        request_count.count_method("delete_object")


_ERROR = re.compile(rb"<Error>(.*?)</Error>", re.DOTALL)
_UPLOAD = re.compile(rb"<Upload>(.*?)</Upload>", re.DOTALL)


def _lean_uploads(fs: Any, bucket: str, prefix: str
                  ) -> Iterator[tuple[str, str, float]] | None:
    """``uploads`` through the lean path (ListMultipartUploads, its pages followed by
    their markers); None when s3fs answers ``fs``."""
    params = {"uploads": "", "prefix": prefix}
    try:
        page = _uploads_page(fs, bucket, params)
    except FileNotFoundError:  # rclone serve s3 answers NoSuchUpload when there is none
        return iter(())
    if page is None:
        return None
    return _upload_pages(fs, bucket, params, page)


def _uploads_page(fs: Any, bucket: str, params: dict[str, str]) -> bytes | None:
    page: bytes | None = lean.lean(fs, lambda getter: getter.list_bucket(bucket, params))
    if page is not None:
        request_count.count_method("list_multipart_uploads")
    return page


def _upload_pages(fs: Any, bucket: str, params: dict[str, str], page: bytes
                  ) -> Iterator[tuple[str, str, float]]:
    from distcp.storage.s3.listing import timestamp

    while True:
        for upload in _UPLOAD.findall(page):
            yield (f"s3://{bucket}/{lean.xml_text(upload, 'Key')}",
                   lean.xml_text(upload, "UploadId"),
                   timestamp(lean.xml_text(upload, "Initiated")).timestamp())
        if b"<IsTruncated>true</IsTruncated>" not in page:
            return
        params = {**params, "key-marker": lean.xml_text(page, "NextKeyMarker"),
                  "upload-id-marker": lean.xml_text(page, "NextUploadIdMarker")}
        try:
            got = _uploads_page(fs, bucket, params)
        except FileNotFoundError:
            return
        if got is None:  # given up on mid-way: never a partial list
            raise OSError(f"listing the uploads of s3://{bucket}: the lean listing stopped")
        page = got


def multipart_etag(etags: Sequence[str]) -> str:
    """The ETag S3 gives an object completed from these parts: md5 of the part md5s + "-N"."""
    md5s = b"".join(bytes.fromhex(e.strip('"')) for e in etags)
    return f'"{hashlib.md5(md5s).hexdigest()}-{len(etags)}"'


def part_size_for(size: int, wanted: int) -> int:
    """A part size >= ``wanted`` that respects S3's 5 MiB minimum and 10,000 parts."""
    need = -(-size // MAX_PARTS) if size else 0
    part = max(wanted, MIN_PART, need)
    return -(-part // (1 << 20)) * (1 << 20)  # whole MiB: a multiple of the digest block


