"""RenamePublisher.sequence_for: which steps a file set gets, in which order (pure, no I/O)."""

from __future__ import annotations

from distcp.commit.steps import (
    DeletePaths,
    MakeDirectories,
    PublishFiles,
    RemoveStaging,
    SetAttributes,
)
from distcp.commit.upload_steps import CheckDigests, CompleteUploads
from distcp.model import CopyableDirectory, FileStatus, TaskResult
from distcp.publishers.base import FileSetOutcome
from distcp.publishers.rename import RenamePublisher
from distcp.storage import Capabilities


def result(dest: str, staging: str, status: str = "ok", **kw) -> TaskResult:  # type: ignore[no-untyped-def]
    return TaskResult("g" + dest, 0, "a0", "/src" + dest, dest, "urn", "fs", status,  # type: ignore[arg-type]
                      staging=staging, bytes_written=5, checksum="c" + dest, **kw)


RESULTS = (
    result("/d/a/one", "/stage/one"),
    result("/d/b/joined", "/state/splits/j/data", records="/state/splits/j"),
    result("/d/up", "s3-upload:U1:s3://b/d/up", parts=((1, '"e"', 5),),
           records="/state/splits/u"),
    result("/d/pub", "s3-published:s3://b/d/pub"),
    result("/d/bad", "/stage/bad", status="failed"),
    result("/d/arc/", "", mode=0o750, mtime=7.0),
)
DIRS = (CopyableDirectory(FileStatus("/src/e", 0, 3.0, is_dir=True), "/d/e", "urn", "fs",
                          mode=0o700, mtime=3.0),)


def test_a_file_set_gets_its_steps_in_publishing_order() -> None:
    outcome = FileSetOutcome("urn", "fs", "/d", RESULTS, DIRS, ("/d/old",),
                             Capabilities(offset_writes=True))
    seq = RenamePublisher().sequence_for(outcome, [])
    assert (seq.dataset_urn, seq.file_set) == ("urn", "fs")
    assert list(seq.steps) == [
        DeletePaths(("/d/old",)),
        MakeDirectories(("/d/a", "/d/arc", "/d/b", "/d/e")),
        CheckDigests((("/state/splits/j/data", "/d/b/joined", 5, "c/d/b/joined"),)),
        PublishFiles((("/stage/one", "/d/a/one", 5),
                      ("/state/splits/j/data", "/d/b/joined", 5))),
        CompleteUploads((("s3-upload:U1:s3://b/d/up", "/d/up", 5, ((1, '"e"', 5),)),)),
        SetAttributes((("/d/e", 0o700, 3.0), ("/d/arc", 0o750, 7.0))),
        RemoveStaging(("/state/splits/j", "/state/splits/u")),
    ]


def test_an_object_store_gets_no_directories_and_no_digest_check() -> None:
    outcome = FileSetOutcome("urn", "fs", "/d", RESULTS[:2],
                             capabilities=Capabilities(directories=False))
    steps = RenamePublisher().sequence_for(outcome, []).steps
    assert [type(s) for s in steps] == [PublishFiles, RemoveStaging]


def test_a_set_with_nothing_to_do_has_no_steps() -> None:
    outcome = FileSetOutcome("urn", "fs", "/d", (RESULTS[3], RESULTS[4]))
    assert RenamePublisher().sequence_for(outcome, []).steps == ()
