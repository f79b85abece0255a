"""ListObjectsV2 pages through the lean signed GET (driver and executor).

Listing is bound by the client's CPU as much as by the server: botocore parses each
page of 1,000 keys into its shapes and dateutil parses every timestamp. Measured here
(2 cores, ``rclone serve s3`` on loopback, 20,000 keys): s3fs's pages took 2.1-2.6 s
and 1.9 s of CPU; the same pages signed by ``s3get``, sent by ``httpwire`` and read
with ElementTree 0.56-0.64 s and 0.35 s of CPU (``s5cmd ls``: 0.8-1.0 s).

A page is returned in botocore's shape (``Contents`` of ``Key``, ``Size`` as an int,
``LastModified`` as an aware datetime, ``ChecksumAlgorithm`` as a list, the other fields
as text; ``IsTruncated``), keys
decoded as botocore decodes them (``encoding-type=url`` is asked, and honoured only when
the answer says so), so callers cannot tell which path listed. A filesystem the lean
getter does not serve (``s3get._plain``) gets None: the caller lists through s3fs.
"""

from __future__ import annotations

import datetime
import html
import re
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from functools import partial
from typing import Any
from urllib.parse import unquote_plus

from distcp.storage.s3 import lean as s3get

_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
#: Key ranges a prefix with subfolders is listed in at once (``find_keys``).
RANGES = 4


def list_page(fs: Any, bucket: str, prefix: str, after: str | None = None,
              max_keys: int = 1000) -> dict[str, Any] | None:
    """One page of the keys under ``prefix`` after ``after``; None: ask s3fs."""
    data = _fetch(fs, bucket, prefix, after, max_keys)
    return None if data is None else parse_page(data)


def _fetch(fs: Any, bucket: str, prefix: str, after: str | None, max_keys: int = 1000
           ) -> bytes | None:
    params = {"list-type": "2", "prefix": prefix, "max-keys": str(max_keys),
              "encoding-type": "url"}
    if after is not None:
        params["start-after"] = after
    return s3get.lean(fs, lambda getter: getter.list_bucket(bucket, params))


def page_stream(fs: Any, bucket: str, prefix: str, after: str | None = None,
                max_keys: int = 1000, beyond: Callable[[str], bool] | None = None
                ) -> Generator[dict[str, Any]] | None:
    """The pages of keys under ``prefix`` after ``after``; None: ask s3fs.

    The next page is asked for (in a thread: the wait releases the GIL) as soon as this
    page's last key is read from the raw answer, before this page is parsed, so the
    server's time and ours overlap (100,000 keys: its answers took 1.4 s of the 4.5 s
    the driver's walk took here, and the walk 2.7 s after). No page is asked for past
    a key that is ``beyond`` the caller's range. A page that ends at or before the key
    it started after is an OSError naming the listing (a server that would never end).
    """
    first = _fetch(fs, bucket, prefix, after, max_keys)
    if first is None:
        return None
    return _pages(fs, bucket, prefix, first, max_keys, beyond, after)


def _pages(fs: Any, bucket: str, prefix: str, data: bytes, max_keys: int,
           beyond: Callable[[str], bool] | None, after: str | None = None
           ) -> Generator[dict[str, Any]]:
    with ThreadPoolExecutor(1) as pool:
        while True:
            last = _last_key(data)
            if last is not None and after is not None and last <= after:
                raise OSError(f"listing s3://{bucket}/{prefix}: the server answered a page "
                              f"after {after!r} ending at {last!r}, which would list again")
            ahead = None
            if last is not None and not (beyond is not None and beyond(last)):
                ahead = pool.submit(_fetch, fs, bucket, prefix, last, max_keys)
                after = last
            yield parse_page(data)
            if ahead is None:
                return
            got = ahead.result()
            if got is None:  # the lean path was given up on mid-way: never a partial list
                raise OSError(f"listing s3://{bucket}/{prefix}: the lean listing stopped")
            data = got


_COMMON = re.compile(rb"<CommonPrefixes>\s*<Prefix>([^<]*)</Prefix>\s*</CommonPrefixes>")
_TOKEN = re.compile(rb"<NextContinuationToken>([^<]*)</NextContinuationToken>")


def folder_names(fs: Any, bucket: str, prefix: str, max_keys: int = 1000
                 ) -> list[str] | None:
    """The names directly under ``prefix`` (a folder's, ending in ``/``): its keys' and
    its subfolders' last parts, from pages listed with a delimiter; [] when nothing is
    there; None: ask s3fs. s3fs lists a folder's parent too when the folder is empty
    (to tell a missing folder from a file): two requests for each state folder a run
    finds empty, at its start and at its end. A truncated page without a new
    continuation token is an OSError naming the listing: never a partial list, never
    the same page asked for again."""
    names: list[str] = []
    token = None
    seen: set[str] = set()
    while True:
        params = {"list-type": "2", "prefix": prefix, "delimiter": "/",
                  "max-keys": str(max_keys), "encoding-type": "url"}
        if token is not None:
            params["continuation-token"] = token
        data = s3get.lean(fs, partial(_list_bucket, bucket=bucket, params=params))
        if data is None:
            return None
        encoded = _url_encoded(data)
        keys = [c["Key"] for c in parse_page(data)["Contents"]]  # the keys as a walk reads them
        for full in keys + [_key(_text(raw.decode()), encoded) for raw in _COMMON.findall(data)]:
            name = full[len(prefix):].rstrip("/")
            if name:  # not the folder's own marker object
                names.append(name)
        if b"<IsTruncated>true</IsTruncated>" not in data:
            return names
        more = _TOKEN.search(data)
        token = _text(more.group(1).decode()) if more is not None else ""
        if not token or token in seen:  # never a partial list, never the same page again
            raise OSError(f"listing s3://{bucket}/{prefix}: the server answered a truncated "
                          + ("page with a continuation token it gave before" if token
                             else "page without a continuation token"))
        seen.add(token)


def _list_bucket(getter: s3get.LeanGetter, bucket: str, params: dict[str, str]) -> bytes:
    return getter.list_bucket(bucket, params)


class MoreKeys(Exception):
    """A prefix holds more keys than the caller would list here (``find_keys``' most)."""


def find_keys(fs: Any, root: str, most: int | None = None
              ) -> dict[str, dict[str, Any]] | None:
    """What s3fs's ``find(root, detail=True)`` answers for a prefix with keys, through
    lean pages; None when s3fs must answer (this filesystem is not served, or nothing is
    under ``root``: it may be an object itself, which s3fs then looks up). Past ``most``
    keys it stops and raises MoreKeys: the caller lists such a prefix elsewhere.

    ListObjectsV2's pages follow one another, so one listing waits on the server page
    by page. A first page with a delimiter names the prefix's subfolders; with two or
    more, the keys are listed in up to ``RANGES`` ranges at once, split at subfolders
    (``_ranges``): 20,000 keys in 50 folders on ``rclone serve s3`` in 0.33-0.42 s
    against 0.43-0.46 s in one listing (benchmarks/RESULTS.md, 2026-12-02), the rest
    this process's work on each key; where each page waits on a distant server, the
    ranges wait side by side. Without subfolders that page is the whole listing; with
    a truncated one (over 1,000 names), one listing follows."""
    bucket, key, _ = fs.split_path(fs._strip_protocol(root))
    prefix = key.lstrip("/") + "/" if key else ""
    top = s3get.lean(fs, partial(_list_bucket, bucket=bucket, params={
        "list-type": "2", "prefix": prefix, "delimiter": "/", "max-keys": "1000",
        "encoding-type": "url"}))
    if top is None:
        return None
    truncated = b"<IsTruncated>true</IsTruncated>" in top
    folders = [] if truncated else \
        [_key(_text(raw.decode()), _url_encoded(top)) for raw in _COMMON.findall(top)]
    found: dict[str, dict[str, Any]] = {}
    if not truncated and not folders:  # the page holds every key
        _found(found, bucket, parse_page(top)["Contents"], most, prefix)
        return found or None
    ranges = _ranges(folders) if len(folders) >= 2 else [(None, None)]
    stop = threading.Event()

    def listed(span: tuple[str | None, str | None]) -> bool:
        after, end = span
        pages = page_stream(fs, bucket, prefix, after,
                            beyond=None if end is None else (lambda k: k >= end))
        if pages is None:
            return False
        with closing(pages):  # stopped early: the page read ahead is awaited
            for page in pages:
                if stop.is_set():
                    return True
                try:
                    _found(found, bucket, page["Contents"], most, prefix)
                except MoreKeys:
                    stop.set()
                    raise
        return True

    if len(ranges) == 1:
        served = listed(ranges[0])
    else:
        with ThreadPoolExecutor(len(ranges)) as pool:
            served = all(list(pool.map(listed, ranges)))
    return (found or None) if served else None


def _ranges(folders: list[str]) -> list[tuple[str | None, str | None]]:
    """Up to ``RANGES`` key ranges that cover a prefix whose sorted subfolders are
    ``folders``, each (the key its listing starts after, the first key past it): each
    range but the first starts just before one subfolder (its name with the ``/`` made
    the byte below it, so no key of the subfolder is left out); a key in two ranges'
    pages is kept once."""
    count = min(RANGES, len(folders))
    splits = [folders[n * len(folders) // count] for n in range(1, count)]
    starts: list[str | None] = [None, *(s[:-1] + chr(ord(s[-1]) - 1) for s in splits)]
    ends: list[str | None] = [*splits, None]
    return list(zip(starts, ends, strict=True))


def _found(found: dict[str, dict[str, Any]], bucket: str, contents: list[dict[str, Any]],
           most: int | None, prefix: str) -> None:
    for c in contents:
        name = f"{bucket}/{c['Key']}"
        found[name] = {**c, "type": "file", "size": c["Size"], "name": name, "Key": name}
    if most is not None and len(found) > most:
        raise MoreKeys(f"more than {most:,} keys under s3://{bucket}/{prefix}")


def _last_key(data: bytes) -> str | None:
    """The last key of a truncated page, read from the raw answer; None: the last page."""
    if b"<IsTruncated>true</IsTruncated>" not in data:
        return None
    start = data.rfind(b"<Key>")
    end = data.find(b"</Key>", start)
    if start < 0 or end < 0:
        return None  # truncated yet empty: nothing to start after
    return _key(_text(data[start + 5:end].decode()), _url_encoded(data))


#: One object's fields when they are flat (no Owner or RestoreStatus inside).
_FIELD = re.compile(rb"<(\w+)>([^<]*)</\1>")
_CONTENTS = re.compile(rb"<Contents>(.*?)</Contents>", re.DOTALL)


def parse_page(data: bytes) -> dict[str, Any]:
    """A ListObjectsV2 answer in botocore's shape (the fields pydistcp reads).

    Pages of flat entries are split with two regular expressions (a page of 1,000 keys
    in ~4 ms instead of ElementTree's ~19); any other page goes through ElementTree.
    """
    if b"<Owner>" in data or b"<RestoreStatus>" in data or b"<![CDATA[" in data:
        return _parse_tree(data)
    encoded = _url_encoded(data)
    contents = []
    for block in _CONTENTS.findall(data):
        entry: dict[str, Any] = {}
        for tag, raw in _FIELD.findall(block):
            _put(entry, tag.decode(), _text(raw.decode()), encoded)
        if "Key" not in entry:  # not the markup expected: read it as XML
            return _parse_tree(data)
        contents.append(entry)
    return {"Contents": contents, "IsTruncated": b"<IsTruncated>true</IsTruncated>" in data}


def _parse_tree(data: bytes) -> dict[str, Any]:
    root = ET.fromstring(data)
    encoded = root.findtext(f"{_NS}EncodingType") == "url"
    contents = []
    for item in root.iter(f"{_NS}Contents"):
        entry: dict[str, Any] = {}
        for child in item:
            tag = child.tag.removeprefix(_NS)
            if len(child):  # Owner, RestoreStatus: their fields as text
                entry[tag] = {c.tag.removeprefix(_NS): c.text or "" for c in child}
            else:
                _put(entry, tag, child.text or "", encoded)
        contents.append(entry)
    return {"Contents": contents, "IsTruncated": root.findtext(f"{_NS}IsTruncated") == "true"}


def _put(entry: dict[str, Any], tag: str, text: str, encoded: bool) -> None:
    if tag == "Key":
        entry["Key"] = _key(text, encoded)
    elif tag == "Size":
        entry["Size"] = int(text)
    elif tag == "LastModified":
        entry["LastModified"] = timestamp(text)
    elif tag == "ChecksumAlgorithm":  # a list in botocore's shape
        entry.setdefault(tag, []).append(text)
    else:
        entry[tag] = text


def _url_encoded(data: bytes) -> bool:
    return b"<EncodingType>url</EncodingType>" in data


def _key(text: str, encoded: bool) -> str:
    """A key as botocore decodes it (``unquote_plus`` when the answer is URL-encoded)."""
    return unquote_plus(text) if encoded and ("%" in text or "+" in text) else text


def _text(raw: str) -> str:
    """An element's text: XML's character references resolved."""
    return html.unescape(raw) if "&" in raw else raw


def timestamp(text: str) -> datetime.datetime:
    """An ISO 8601 time as botocore reads it: aware, fractions past microseconds cut."""
    try:
        value = datetime.datetime.fromisoformat(text)
    except ValueError:
        from botocore.utils import parse_timestamp

        parsed: datetime.datetime = parse_timestamp(text)
        return parsed
    return value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
