"""Mtimes kept as object metadata: rclone's RFC 3339 form on Azure, gsutil's seconds on
GCS, read back by listings, and the Azure staging that carries one to its commit."""

from __future__ import annotations

from distcp.storage.azure import blobs
from distcp.storage.filesystems import info_status
from distcp.storage.keptmtimes import from_rfc3339, kept_mtime, rfc3339


def test_rclone_form_round_trips_to_the_nanosecond() -> None:
    ns = 1_600_000_000_123_456_789
    assert rfc3339(ns) == "2020-09-13T12:26:40.123456789Z"
    assert from_rfc3339(rfc3339(ns)) == ns
    assert rfc3339(1_600_000_000.5) == "2020-09-13T12:26:40.500000000Z"


def test_any_rfc3339_time_reads_as_rclone_reads_it() -> None:
    assert from_rfc3339("2020-09-13T12:26:40Z") == 1_600_000_000 * 10**9
    assert from_rfc3339("2020-09-13T14:26:40.5+02:00") == 1_600_000_000_500_000_000
    assert from_rfc3339("yesterday") is None


def test_metadata_of_either_store_gives_its_kept_mtime() -> None:
    assert kept_mtime({"mtime": "2020-09-13T12:26:40.000000001Z"}) == 1_600_000_000 * 10**9 + 1
    assert kept_mtime({"goog-reserved-file-mtime": "1600000000"}) == 1_600_000_000 * 10**9
    assert kept_mtime({"mtime": "not a time"}) is None
    assert kept_mtime(None) is None and kept_mtime({"other": "x"}) is None


def test_a_listing_entry_with_a_kept_mtime_has_it_not_the_write_time() -> None:
    class Fs:
        protocol = ("abfs",)

        @staticmethod
        def unstrip_protocol(path: str) -> str:
            return f"abfs://{path}"

    st = info_status(Fs(), {"name": "c/f", "size": 3, "type": "file",  # type: ignore[arg-type]
                            "last_modified": 1_700_000_000.0,
                            "metadata": {"mtime": "2020-09-13T12:26:40.123456789Z"}})
    assert st.mtime_ns == 1_600_000_000_123_456_789
    assert st.mtime == 1_600_000_000.123456789


def test_an_azure_upload_id_carries_the_mtime_but_its_blocks_do_not() -> None:
    upload = "a" * 32
    kept = blobs.with_mtime(upload, 1_600_000_000_123_456_789)
    assert blobs.mtime_in(kept) == 1_600_000_000_123_456_789 and blobs.mtime_in(upload) is None
    assert blobs.block_id(kept, 3) == blobs.block_id(upload, 3)
    assert blobs.block_number(kept, blobs.block_id(upload, 3)) == 3
    assert blobs.with_mtime(kept, 5) == upload + ".5"
