"""distcp.copying.results: the one way an exception becomes a failed TaskResult."""

from __future__ import annotations

from distcp.copying.results import failed
from distcp.errors import ConversionError, SourceReadError
from distcp.model import TaskResult

OK = TaskResult(guid="g", unit_id=3, attempt="s0p1a0", origin="/src/a.gz",
                destination="/dst/a", dataset_urn="d", file_set="", status="ok",
                bytes_read=12, split_index=2)


def test_a_copy_error_keeps_its_message_type_and_retryability() -> None:
    r = failed(OK, SourceReadError("source changed while copying: /src/a.gz", path="/src/a.gz"))
    assert (r.status, r.error_type, r.retryable) == ("failed", "SourceReadError", True)
    assert r.message == "source changed while copying: /src/a.gz"
    r = failed(OK, ConversionError("corrupt gzip: /src/a.gz"), retryable=True)
    assert (r.error_type, r.retryable) == ("ConversionError", False)  # the error says: terminal


def test_another_exception_names_the_file_the_step_and_the_cause() -> None:
    r = failed(OK, PermissionError(13, "Permission denied"))
    assert r.message == "/src/a.gz: PermissionError: [Errno 13] Permission denied"
    assert (r.error_type, r.retryable) == ("PermissionError", False)
    r = failed(OK, OSError("disk gone"), retryable=True, doing="cannot join its ranges: ")
    assert r.message == "/src/a.gz: cannot join its ranges: OSError: disk gone"
    assert r.retryable is True


def test_the_other_fields_of_the_result_are_kept() -> None:
    r = failed(OK, ValueError("x"))
    assert (r.guid, r.unit_id, r.attempt, r.destination, r.bytes_read, r.split_index) == (
        "g", 3, "s0p1a0", "/dst/a", 12, 2)


def test_a_key_gives_every_result_of_one_file_the_same_shared_fields() -> None:
    from distcp.copying.results import ResultKey
    from distcp.model import CopyableFile, FileStatus

    file = CopyableFile(FileStatus("s3://b/in/a.tar", 10, 1.5), "s3://c/out/a.tar", "urn:d", "p=1")
    key = ResultKey.of(file, 4, "s2p4a1")
    one, two = key.result("s3://c/out/x"), key.result("s3://c/out/y", "failed", bytes_read=3)
    for r in (one, two):
        assert (r.guid, r.unit_id, r.attempt, r.origin, r.dataset_urn, r.file_set) == (
            file.guid, 4, "s2p4a1", "s3://b/in/a.tar", "urn:d", "p=1")
    assert (one.destination, one.status, one.bytes_read) == ("s3://c/out/x", "ok", 0)
    assert (two.destination, two.status, two.bytes_read) == ("s3://c/out/y", "failed", 3)


def test_a_copied_result_by_position_is_the_result_by_keyword() -> None:
    """``ResultKey.copied`` passes TaskResult's fields by position: a field moved or
    inserted before ``checksum`` must fail here, not stage a copy under wrong values."""
    from distcp.copying.results import ResultKey
    from distcp.model import CopyableFile, FileStatus

    file = CopyableFile(FileStatus("/in/a", 10, 1.5), "/out/a", "urn:d", "p=1")
    key = ResultKey.of(file, 4, "a1")
    assert key.copied("/out/a", "/stage/d0/a", 10, 11, "xxh3:ab") == key.result(
        "/out/a", staging="/stage/d0/a", bytes_read=10, bytes_written=11, checksum="xxh3:ab")
