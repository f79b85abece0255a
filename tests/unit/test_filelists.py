"""Parsing the lists users give instead of a listing (distcp.planning.filelists): pure
values in, FilesFromEntry values out; no filesystem, no Spark."""

from __future__ import annotations

import gzip
import io
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from distcp.configuration import CopyConfiguration
from distcp.errors import ConfigurationError
from distcp.planning.filelists import (
    FilesFromEntry,
    as_batches,
    from_batches,
    inventory_files,
    manifest_format,
    normalise,
    parse_lines,
    parse_manifest,
)

T = datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=UTC)


def lines(text: str) -> list[FilesFromEntry]:
    return list(parse_lines(io.StringIO(text), "--files-from l.txt"))


def test_files_from_skips_blanks_and_comments_trims_and_reads_leading_slash_as_root() -> None:
    got = lines("# a comment\n\n  a.txt  \n;another\n/sub/b.txt\r\nsub//./c d.txt\n")
    assert [(p.path, p.where) for p in got] == [
        ("a.txt", "line 3"), ("sub/b.txt", "line 5"), ("sub/c d.txt", "line 6")]
    assert not any(p.known for p in got)  # a line says nothing of size or mtime


def test_files_from_keeps_the_first_of_duplicates_and_resolves_dotdot_inside_the_root() -> None:
    got = lines("a/x\nb/../a/x\nb/../c\n")
    assert [(p.path, p.where) for p in got] == [("a/x", "line 1"), ("c", "line 3")]


@pytest.mark.parametrize("text", ["../etc/passwd", "a/../../b", "/.."])
def test_a_path_above_the_root_is_refused_naming_its_line(text: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        lines(f"ok.txt\n# c\n{text}\n")
    message = str(err.value)
    assert message.startswith("--files-from l.txt line 3: ")
    assert repr(text) in message and "climbs above the source root" in message
    assert "\n" not in message


def test_a_line_naming_the_root_itself_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"line 1: '/' names the source root"):
        lines("/\n")
    assert normalise("./a/", "x") == "a"


def test_manifest_format_is_read_from_the_first_bytes() -> None:
    assert manifest_format(b"PAR1") == "parquet"
    assert manifest_format(gzip.compress(b"x")[:4]) == "csv.gz"
    assert manifest_format(b'"src","a"') == "csv"


def manifest(data: bytes, root: str = "src/pre") -> list[FilesFromEntry]:
    return list(parse_manifest(io.BytesIO(data), "--files-from-manifest m", root))


INVENTORY_CSV = (b'"src","pre/a+b%2Bc.txt","12","2024-05-01T12:00:00.250Z","d41d8cd9"\n'
                 b'"src","pre/007","3","2024-05-01T12:00:00.000Z",""\n'
                 b'"src","pre/d/e%C3%A9.bin","","",""\n')


def test_inventory_csv_without_header_decodes_keys_and_reads_size_mtime_etag() -> None:
    got = manifest(INVENTORY_CSV)
    assert got[0] == FilesFromEntry("a b+c.txt", "line 1", 12, T.timestamp(), '"d41d8cd9"')
    assert got[1] == FilesFromEntry("007", "line 2", 3, T.replace(microsecond=0).timestamp(), None)
    assert got[2] == FilesFromEntry("d/eé.bin", "line 3")  # unknown size: asked of the source
    assert got[0].known and not got[2].known


def test_gzipped_csv_reads_the_same_as_plain() -> None:
    assert manifest(gzip.compress(INVENTORY_CSV)) == manifest(INVENTORY_CSV)


def test_a_header_row_names_the_columns_in_any_order_and_extra_columns_are_ignored() -> None:
    data = (b"Key,VersionId,Bucket,Size,LastModifiedDate,ETag\n"
            b"pre/x.txt,v1,src,5,1714564800,abc\n")
    assert manifest(data) == [FilesFromEntry("x.txt", "line 2", 5, 1714564800.0, '"abc"')]


def test_a_row_with_an_empty_bucket_is_relative_to_the_source_root() -> None:
    assert manifest(b",/a/b.txt\n", root="/data/src") == [FilesFromEntry("a/b.txt", "line 1")]


def test_a_row_outside_the_source_is_refused_naming_the_row() -> None:
    with pytest.raises(ConfigurationError) as err:
        manifest(b'"src","pre/a"\n"other","pre/b"\n')
    assert str(err.value).startswith("--files-from-manifest m line 2: other/pre/b is not "
                                     "under the source src/pre")


def test_a_key_no_path_can_hold_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"line 1: key 'a//b' has an empty"):
        manifest(b'"src","pre/a//b"\n')
    with pytest.raises(ConfigurationError, match=r"line 1: key '../x'"):
        manifest(b'"src","pre/../x"\n')


def test_a_positional_csv_with_other_columns_says_to_add_a_header() -> None:
    with pytest.raises(ConfigurationError, match=r"line 1: size 'v1' is not a number.*header"):
        manifest(b'"src","pre/a","v1","true"\n')


def parquet_bytes(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def test_parquet_inventory_columns_keys_verbatim_and_timestamps_in_utc() -> None:
    table = pa.table({
        "bucket": ["src", "src"], "key": ["pre/a+b.txt", "pre/n/x"],
        "size": pa.array([12, None], pa.int64()),
        "last_modified_date": pa.array([T, None], pa.timestamp("ms", tz="UTC")),
        "e_tag": ["d41d8cd9", None], "storage_class": ["STANDARD", "STANDARD"]})
    got = manifest(parquet_bytes(table))
    assert got == [FilesFromEntry("a+b.txt", "row 1", 12, T.timestamp(), '"d41d8cd9"'),
                   FilesFromEntry("n/x", "row 2")]


def test_parquet_without_a_key_column_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="no 'key' column"):
        manifest(parquet_bytes(pa.table({"bucket": ["src"], "path": ["x"]})))


def test_entries_travel_as_arrow_batches_of_one_schema_and_back() -> None:
    entries = [FilesFromEntry(f"d/{i}", f"line {i}", i, 1.5 * i, None) for i in range(5)]
    batches = list(as_batches(entries, rows=2))
    assert [b.num_rows for b in batches] == [2, 2, 1]
    assert batches[0].schema.names == ["path", "where", "size", "mtime", "etag"]
    assert list(from_batches(batches)) == entries


def test_configuration_refuses_lists_with_what_they_cannot_mean() -> None:
    def build(**kw: object) -> CopyConfiguration:
        return CopyConfiguration.build(kw.pop("sources", ["/s"]), "/d", **kw)  # type: ignore[arg-type]

    assert build(files_from="l.txt").files_from == "l.txt"
    cases = {
        "--files-from and --files-from-manifest are mutually exclusive":
            {"files_from": "l", "files_from_manifest": "m"},
        "--files-from takes one SRC (the root its paths are relative to), not 2":
            {"files_from": "l", "sources": ["/a", "/b"]},
        "--files-from-manifest and --dataset-glob are mutually exclusive":
            {"files_from_manifest": "m", "dataset_glob": "*"},
        "--files-from cannot be used with --delete: the source is not listed, so nothing "
        "tells what it lacks": {"files_from": "-", "delete": True},
    }
    for message, kw in cases.items():
        with pytest.raises(ConfigurationError) as err:
            build(**kw)
        assert str(err.value) == message


def test_an_inventory_manifest_json_names_its_data_files_and_csv_columns() -> None:
    doc = (b'{"sourceBucket": "src", "destinationBucket": "arn:aws:s3:::inv",'
           b' "fileFormat": "CSV", "fileSchema": "Bucket, Key, VersionId, IsLatest, Size,'
           b' LastModifiedDate, ETag", "files": [{"key": "src/cfg/data/1.csv.gz", "size": 9,'
           b' "MD5checksum": "x"}, {"key": "src/cfg/data/2.csv.gz"}]}')
    assert manifest_format(doc[:16]) == "json"
    urls, columns = inventory_files(doc, "m")
    assert urls == ["s3://inv/src/cfg/data/1.csv.gz", "s3://inv/src/cfg/data/2.csv.gz"]
    assert columns is not None and columns[2] == "VersionId"
    # the fileSchema's order, VersionId and IsLatest included, decides the columns
    data = gzip.compress(b'"src","pre/k+1","v9","true","7","2024-05-01T12:00:00.250Z","e"\n'
                         b'"src","pre/k2","v1","true","8","2024-05-01T12:00:00.250Z","f"\n')
    seen: set[str] = set()
    got = list(parse_manifest(io.BytesIO(data), "m", "src/pre", columns, seen))
    assert got == [FilesFromEntry("k 1", "line 1", 7, T.timestamp(), '"e"'),
                   FilesFromEntry("k2", "line 2", 8, T.timestamp(), '"f"')]
    assert list(parse_manifest(io.BytesIO(data), "m", "src/pre", columns, seen)) == []
    with pytest.raises(ConfigurationError, match="ORC inventory reports are not read"):
        inventory_files(doc.replace(b'"CSV"', b'"ORC"'), "m")
    with pytest.raises(ConfigurationError, match="m: not an S3 Inventory manifest.json"):
        inventory_files(b'{"files": []}', "m")
