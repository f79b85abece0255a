"""A ListObjectsV2 answer read as botocore reads it (the servers' own answers: e2e)."""

from __future__ import annotations

import datetime

import pytest
from botocore.utils import parse_timestamp

from distcp.storage.s3.listing import parse_page, timestamp

PAGE = """<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>b</Name><Prefix>p%2F</Prefix><KeyCount>3</KeyCount><MaxKeys>3</MaxKeys>
  {encoding}<IsTruncated>{truncated}</IsTruncated>
  <Contents><Key>p/a+b%2Bc%20d</Key><LastModified>2026-11-25T19:19:58.123Z</LastModified>
    <ETag>&quot;0f&quot;</ETag><ChecksumAlgorithm>CRC32</ChecksumAlgorithm><Size>9</Size>
    <StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>p/%C3%BC</Key><LastModified>2026-11-25T19:19:58Z</LastModified>
    <ETag>"1-2"</ETag><Size>0</Size><Owner><ID>o1</ID><DisplayName>me</DisplayName></Owner>
  </Contents>
</ListBucketResult>"""


def test_a_url_encoded_page_is_decoded_and_typed() -> None:
    page = parse_page(PAGE.format(encoding="<EncodingType>url</EncodingType>",
                                  truncated="true").encode())
    assert page["IsTruncated"] is True
    first, second = page["Contents"]
    assert first == {"Key": "p/a b+c d", "Size": 9, "ETag": '"0f"', "StorageClass": "STANDARD",
                     "LastModified": datetime.datetime(2026, 11, 25, 19, 19, 58, 123000,
                                                       tzinfo=datetime.UTC),
                     "ChecksumAlgorithm": ["CRC32"]}
    assert second["Key"] == "p/ü" and second["Size"] == 0 and "StorageClass" not in second
    assert second["Owner"] == {"ID": "o1", "DisplayName": "me"}


def test_keys_are_taken_as_they_are_when_the_answer_is_not_encoded() -> None:
    page = parse_page(PAGE.format(encoding="", truncated="false").encode())
    assert page["IsTruncated"] is False
    assert [c["Key"] for c in page["Contents"]] == ["p/a+b%2Bc%20d", "p/%C3%BC"]


@pytest.mark.parametrize("text", ["2026-11-25T19:19:58.123Z", "2026-11-25T19:19:58Z",
                                  "2026-11-25T19:19:58.123456789Z",
                                  "2026-11-25T19:19:58.5+02:00",
                                  "Wed, 25 Nov 2026 19:19:58 GMT"])
def test_times_are_the_instants_botocore_reads(text: str) -> None:
    got = timestamp(text)
    assert got == parse_timestamp(text) and got.tzinfo is not None


FLAT = """<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name>
{encoding}<IsTruncated>true</IsTruncated>
<Contents><Key>p/a+b%2Bc%20d</Key><LastModified>2026-11-25T19:19:58.123Z</LastModified>
<ETag>&quot;0f&quot;</ETag><ChecksumAlgorithm>CRC32</ChecksumAlgorithm><Size>9</Size>
<StorageClass>STANDARD</StorageClass></Contents>
<Contents><Key>p/x &amp; y&#38;z</Key><LastModified>2026-11-25T19:19:58Z</LastModified>
<ETag>"1-2"</ETag><Size>0</Size></Contents>
<Contents><Key>p/last%3Cone%3E</Key><LastModified>2026-11-25T19:19:59Z</LastModified>
<ETag>"3"</ETag><Size>12</Size></Contents></ListBucketResult>"""


@pytest.mark.parametrize("encoding", ["<EncodingType>url</EncodingType>", ""])
def test_flat_pages_read_by_the_quick_path_as_by_the_xml_parser(encoding: str) -> None:
    from distcp.storage.s3.listing import _last_key, _parse_tree

    data = FLAT.format(encoding=encoding).encode()
    quick, tree = parse_page(data), _parse_tree(data)
    assert quick == tree and len(quick["Contents"]) == 3 and quick["IsTruncated"] is True
    assert quick["Contents"][0]["ETag"] == '"0f"'
    # the page after this one starts after its last key, decoded like the others
    assert _last_key(data) == quick["Contents"][-1]["Key"]
    assert _last_key(data.replace(b"<IsTruncated>true", b"<IsTruncated>false")) is None


def test_markup_the_quick_path_does_not_expect_goes_through_the_xml_parser() -> None:
    prefixed = FLAT.format(encoding="").replace("<Key>", "<Key >").encode()
    page = parse_page(prefixed)
    assert [c["Key"] for c in page["Contents"]] == ["p/a+b%2Bc%20d", "p/x & y&z",
                                                     "p/last%3Cone%3E"]
