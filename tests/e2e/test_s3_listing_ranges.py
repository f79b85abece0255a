"""A prefix with subfolders listed in key ranges at once (``listing.find_keys``), against
real servers: every key once, the keys that sort beside a split point included, the
bound of keys kept across ranges."""

from __future__ import annotations

import pytest

from distcp.storage import filesystems as fsutil
from distcp.storage.s3 import lean as s3get
from distcp.storage.s3 import listing as s3list
from tests.fixtures.s3_server import S3Server, moto_server, rclone_server, s3_any  # noqa: F401

pytestmark = pytest.mark.e2e

#: Keys that sort just before and just after the subfolders the ranges split at (g2/,
#: g30/ and g5/ of g0/-g7/ and g30/; '-' < '.' < '/' < '0'), and one subfolder's own.
_BESIDE = ("g2-x", "g2.", "g2.x", "g2x", "g2~", "g3-x", "g30.", "g30/a", "g30~", "g4.x",
           "g5-", "g5.", "g1/b/c", "top")


def test_a_prefix_with_subfolders_is_listed_in_ranges_as_one_listing_would(
        s3_any: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    keys = [f"rg/{k}" for k in _BESIDE] + [f"rg/g{n}/k{m}" for n in range(8) for m in range(5)]
    client = s3_any.client()
    for key in keys:
        client.put_object(Bucket="src", Key=key, Body=key.encode())
    fs, _ = fsutil.filesystem("s3://src/", s3_any.options)
    fs.invalidate_cache()
    expected = fs.find("s3://src/rg", detail=True)
    assert sorted(expected) == sorted(f"src/{k}" for k in keys)
    monkeypatch.setattr(s3list, "RANGES", 4)
    before = s3get.requests_sent()
    assert s3list.find_keys(fs, "s3://src/rg") == expected
    # the page with a delimiter, then each of the 4 ranges' one page (1,000 keys a page)
    folders = sorted({k.rsplit("/", 1)[0] + "/" for k in keys if k.count("/") == 2})
    assert s3list._ranges(folders)[1:] == [("rg/g2.", "rg/g30/"), ("rg/g30.", "rg/g5/"),
                                           ("rg/g5.", None)]
    assert s3get.requests_sent() - before == 5
    # pages of 3 keys: a range that started past its split point would leave keys
    # unread, which the range before it stops short of
    real = s3list.page_stream
    monkeypatch.setattr(s3list, "page_stream", lambda fs, bucket, prefix, after=None, **kw:
                        real(fs, bucket, prefix, after, 3, kw.get("beyond")))
    assert s3list.find_keys(fs, "s3://src/rg") == expected
    monkeypatch.setattr(s3list, "page_stream", real)
    monkeypatch.setattr(s3list, "RANGES", 1)  # one listing after the page: the same answer
    assert s3list.find_keys(fs, "s3://src/rg") == expected
    with pytest.raises(s3list.MoreKeys, match="more than 20 keys under s3://src/rg/"):
        s3list.find_keys(fs, "s3://src/rg", most=20)
    monkeypatch.setattr(s3list, "RANGES", 4)
    with pytest.raises(s3list.MoreKeys, match="more than 20 keys under s3://src/rg/"):
        s3list.find_keys(fs, "s3://src/rg", most=20)
    # no subfolder: the page with a delimiter is the whole listing
    before = s3get.requests_sent()
    found = s3list.find_keys(fs, "s3://src/rg/g1")
    assert sorted(found or {}) == ["src/rg/g1/b/c", *(f"src/rg/g1/k{m}" for m in range(5))]
    assert s3get.requests_sent() - before == 2  # one subfolder (b/): listed once more
    before = s3get.requests_sent()
    assert sorted(s3list.find_keys(fs, "s3://src/rg/g5") or {}) == [
        f"src/rg/g5/k{m}" for m in range(5)]
    assert s3get.requests_sent() - before == 1


def test_ranges_split_at_subfolders_and_start_just_before_them() -> None:
    assert s3list._ranges(["p/a/", "p/b/"]) == [(None, "p/b/"), ("p/b.", None)]
    folders = [f"p/f{n:02d}/" for n in range(10)]
    assert s3list._ranges(folders) == [(None, "p/f02/"), ("p/f02.", "p/f05/"),
                                       ("p/f05.", "p/f07/"), ("p/f07.", None)]
