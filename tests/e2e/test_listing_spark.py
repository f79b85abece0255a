"""Listing on the executors gives exactly what the driver's walk gives (issue 11, point 1).

The same trees listed both ways, on the real local Spark session and the real moto
S3 server: same entries in the same order (every FileStatus field), same entries
not copied with the same reasons. Small trees are cut as big ones are (``target``,
``page``), so that subtrees and key ranges really run as Spark tasks.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from distcp.planning.tops import tree_tasks
from distcp.spark.listing import Lister, key_tasks, listing_frame
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage import treelisting as tl
from distcp.storage.s3 import lean as s3get
from distcp.storage.s3 import listing as s3list
from tests.conftest import cli_env
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e


def _skipped(skipped: list[fsutil.Skipped]) -> list[tuple[str, str, bool]]:
    return sorted((s.path, s.reason, s.failure) for s in skipped)


def walked(fs: Any, root: str, links: str) -> tuple[list[Any], list[Any]]:
    skipped: list[fsutil.Skipped] = []
    return list(fsutil.walk(fs, root, links, skipped)), _skipped(skipped)


def spark_listed(spark: Any, fs: Any, root: str, links: str, target: int,
                 options: dict[str, Any] | None = None, page: int = 1000
                 ) -> tuple[list[Any], list[Any]]:
    skipped: list[fsutil.Skipped] = []
    lister = Lister("spark", lambda: spark, target=target, page=page)
    tree = storage_for(fsutil.to_url(fs, root), options or {}).tree(fsutil.to_url(fs, root))
    return list(lister(tree, links, skipped)), _skipped(skipped)


def local_tree(base: Path) -> Path:
    """Nested and empty directories, unicode names, links of every kind, a loop, a FIFO,
    a socket and a state directory (never listed)."""
    src = base / "src"
    for d in ("a/b/c", "a/empty", "b", "é/ü", "a-z", "z/deep/er/est", ".pydistcp/staging"):
        (src / d).mkdir(parents=True)
    for rel in ("top.txt", "a/1", "a/b/2", "a/b/c/3", "b/4", "é/ü/名前.txt", "a-z/5",
                "z/deep/er/est/6", ".pydistcp/staging/x", "a/b/c/.pydistcp"):
        (src / rel).write_text(rel)
    (base / "outside").mkdir()
    (base / "outside" / "o").write_text("o")
    (src / "lfile").symlink_to("top.txt")
    (src / "a" / "lout").symlink_to("../../outside")
    (src / "b" / "dang").symlink_to("nowhere")
    (src / "a" / "b" / "loop").symlink_to("../..")
    os.mkfifo(src / "z" / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(src / "b" / "sock"))
    sock.close()
    return src


@pytest.mark.parametrize("links", ["skip", "follow", "copy"])
@pytest.mark.parametrize("target", [1, 3, 1000])
def test_local_tree_listed_on_spark_is_the_walk(spark: Any, tmp_path: Path, links: str,
                                                target: int) -> None:
    src = local_tree(tmp_path)
    fs, root = fsutil.filesystem(str(src), {})
    expected = walked(fs, root, links)
    assert spark_listed(spark, fs, root, links, target) == expected
    assert any(p.endswith("名前.txt") for p, _ in expected[0])
    assert (str(src / "a" / "empty"), True) in [(p, st.is_dir) for p, st in expected[0]]


def test_subtrees_run_as_spark_tasks_and_stay_a_dataframe(spark: Any, tmp_path: Path) -> None:
    src = local_tree(tmp_path)
    _fs, root = fsutil.filesystem(str(src), {})
    skipped: list[fsutil.Skipped] = []
    found = tree_tasks(str(src), root, "follow", {}, 3, skipped)
    # five top directories are enough for 3 tasks: nothing below the top listed here
    assert [t.start for t in found.tasks] == [str(src / d) for d in ("a", "a-z", "b", "z", "é")]
    assert [p for p, _ in found.entries] == [str(src / "lfile"), str(src / "top.txt")]
    frame = listing_frame(spark, found.tasks)
    assert frame.columns == [name for name, _ in tl.ROW_COLUMNS]
    assert frame.rdd.getNumPartitions() == len(found.tasks)  # one Spark task per subtree
    rows = frame.collect()
    listed = {r["path"] for r in rows if r["skipped"] is None}
    assert str(src / "z" / "deep" / "er" / "est" / "6") in listed
    assert str(src / "top.txt") not in listed  # listed by the driver, at the top


def _put_keys(server: S3Server, keys: dict[str, bytes]) -> None:
    client = server.client()
    for key, data in keys.items():
        client.put_object(Bucket="src", Key=key, Body=data)


S3_KEYS = {
    **{f"t/flat/{c}{n:02d}.bin": bytes([n]) * n for c in "0123456789abcdef" for n in range(6)},
    **{f"t/part-{n:05d}": b"p" for n in range(40)},
    "t/deep/a/b/c/d.txt": b"d", "t/deep/a/e.txt": b"e", "t/é/名前.txt": b"u",
    "t/marker/": b"", "t/marker/in.txt": b"i", "t/bad/": b"holds bytes",
    "t/shadow": b"object", "t/shadow/child": b"c", "t/.pydistcp/state.json": b"{}",
    "t/x": b"x", "t/x!": b"x!", "t/x/y": b"y", "other/not-listed": b"n",
}


@pytest.mark.parametrize(("target", "page"), [(1, 1000), (4, 7), (64, 3), (200, 2)])
def test_s3_prefix_listed_by_key_ranges_is_the_walk(spark: Any, s3: S3Server,  # noqa: F811
                                                    target: int, page: int) -> None:
    _put_keys(s3, S3_KEYS)
    fs, root = fsutil.filesystem("s3://src/t", s3.options)
    expected = walked(fs, root, "follow")
    got = spark_listed(spark, fs, root, "follow", target, s3.options, page)
    assert got[0] == expected[0]
    assert got[1] == expected[1]
    paths = [p for p, _ in expected[0]]
    assert "src/t/deep/a/b" in paths and "src/t/shadow" in paths
    shadowed = "object key is also the prefix of other keys (a file and a directory of one name)"
    assert ("s3://src/t/shadow", shadowed, True) in expected[1]
    assert any(s[0] == "s3://src/t/bad/" for s in expected[1])


def test_s3_walk_lists_the_keys_once_and_derives_the_directories_s3fs_derives(
        s3: S3Server) -> None:  # noqa: F811
    """The driver's S3 walk reads the keys in one pass (it used to list them twice to
    find keys shadowed by directories) and derives exactly s3fs's directories."""
    _put_keys(s3, S3_KEYS)
    fs, root = fsutil.filesystem("s3://src/t", s3.options)
    fs.invalidate_cache()
    theirs = fs.find(root, withdirs=True, detail=True)
    fs.invalidate_cache()
    skipped: list[fsutil.Skipped] = []
    ours = fsutil._keys_and_prefixes(fs, root, skipped)
    assert ours == theirs
    assert [s.path for s in skipped] == ["s3://src/t/shadow", "s3://src/t/x"]


def test_s3_key_ranges_are_several_tasks_covering_each_key_once(s3: S3Server  # noqa: F811
                                                                 ) -> None:
    _put_keys(s3, S3_KEYS)
    fs, _root = fsutil.filesystem("s3://src/t", s3.options)
    found = key_tasks(storage_for("s3://src/t", s3.options).tree("s3://src/t"), 8, None, 5)
    assert len(found.tasks) >= 8
    seen: list[str] = []
    for task in found.tasks:
        seen += [i["Key"].split("/", 1)[1] for i in tl._key_infos(fs, task)]
    assert sorted(seen) == sorted(k for k in S3_KEYS if k.startswith("t/"))


def test_s3_walk_of_an_empty_prefix_is_empty_both_ways(spark: Any, s3: S3Server  # noqa: F811
                                                       ) -> None:
    fs, root = fsutil.filesystem("s3://src/none", s3.options)
    assert spark_listed(spark, fs, root, "follow", 4, s3.options, 2) == ([], [])


def _dry_run(src: Path, dst: Path, listing: str, *prefix: str) -> dict[str, Any]:
    out = dst.parent / f"summary-{listing}.json"
    r = subprocess.run([*prefix, sys.executable, "-m", "distcp", "copy", str(src), str(dst),
                        "--dry-run", "--no-progress", "--links", "follow", "--listing", listing,
                        "--summary-json", str(out)],
                       check=False, capture_output=True, text=True, env=cli_env(), timeout=300,
                       stdin=subprocess.DEVNULL)
    assert r.returncode in (0, 1), r.stderr
    summary: dict[str, Any] = json.loads(out.read_text())
    return {k: summary[k] for k in ("plan", "failures", "entries_skipped", "files_failed")}


NO_DAC = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
          "--bounding-set=-dac_override,-dac_read_search"]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root's setpriv to make a directory unreadable to root")
def test_cli_dry_run_plans_the_same_with_spark_listing_and_an_unreadable_dir(
        tmp_path: Path) -> None:
    src = tmp_path / "src"
    for n in range(12):  # one top directory of 12: the driver hands them out as tasks
        (src / "top" / f"d{n:02d}" / "sub").mkdir(parents=True)
        (src / "top" / f"d{n:02d}" / "sub" / "f.txt").write_text(str(n))
    (src / "top" / "d05").chmod(0)
    (src / "top" / "d07" / "dang").symlink_to("nowhere")
    try:
        driver = _dry_run(src, tmp_path / "dst", "driver", *NO_DAC)
        spark = _dry_run(src, tmp_path / "dst", "spark", *NO_DAC)
    finally:
        (src / "top" / "d05").chmod(0o755)
    assert spark == driver
    reasons = {e["path"]: e["error"] for e in driver["failures"]}
    locked, dang = src / "top" / "d05", src / "top" / "d07" / "dang"
    assert reasons == {str(locked): f"{locked}: unreadable directory (Permission denied)",
                       str(dang): f"{dang}: dangling symbolic link to nowhere"}
    dst = tmp_path / "dst" / "top"
    assert [(e["action"], e["path"]) for e in driver["plan"]] == \
        [("copy", str(dst / f"d{n:02d}" / "sub" / "f.txt")) for n in range(12) if n != 5]


def test_auto_lists_a_prefix_of_up_to_keys_from_keys_on_the_driver_and_more_on_spark(
        spark: Any, s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """``auto`` lists an object-store prefix of up to ``keys_from`` keys on the driver
    (its listing read ahead beat the key ranges on Spark at 100,000 keys), once: the
    probe that counted them is the walk. A longer prefix is listed on Spark."""
    _put_keys(s3, {f"small/{n}": b"s" for n in range(5)} | {f"big/{n:02d}": b"b"
                                                             for n in range(12)}
              | {f"big/d{n}/x": b"d" for n in range(2)})
    opened: list[str] = []
    streams: list[str] = []
    real = s3list.page_stream

    def counted(fs: Any, bucket: str, prefix: str, *args: Any, **kw: Any) -> Any:
        streams.append(prefix)
        return real(fs, bucket, prefix, *args, **kw)

    monkeypatch.setattr(s3list, "page_stream", counted)

    def session() -> Any:
        opened.append("spark")
        return spark

    for prefix, big in (("small", False), ("big", True)):
        fs, root = fsutil.filesystem(f"s3://src/{prefix}", s3.options)
        expected = walked(fs, root, "follow")[0]
        streams.clear()
        before = s3get.requests_sent()
        lister = Lister("auto", session, target=4, page=5, keys_from=5)
        tree = storage_for(f"s3://src/{prefix}", s3.options).tree(f"s3://src/{prefix}")
        assert lister.joins(tree) is big
        got = list(lister(tree, "follow", []))
        assert got == expected
        assert len(got) == (5 if prefix == "small" else 16)
        assert opened == (["spark"] if big else []), prefix
        if not big:  # the probe's listing, not listed again: one page with a delimiter
            assert streams == [] and s3get.requests_sent() - before == 1


def test_probe_of_joins_is_the_first_page_of_the_listing(
        spark: Any, s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """``joins`` (is this tree planned on Spark?) probes the first key under ``spark``;
    the listing that follows starts from that probe instead of asking for it again."""
    _put_keys(s3, {f"big/{n:02d}": b"b" for n in range(12)})
    firsts: list[str] = []
    real = tl.list_page

    def counted(fs: Any, root: str, after: str | None = None, *args: Any, **kw: Any) -> Any:
        if after is None:
            firsts.append(root)
        return real(fs, root, after, *args, **kw)

    monkeypatch.setattr(tl, "list_page", counted)
    _fs, root = fsutil.filesystem("s3://src/big", s3.options)
    lister = Lister("spark", lambda: spark, target=4, page=5)
    tree = storage_for("s3://src/big", s3.options).tree("s3://src/big")
    assert lister.joins(tree)
    frame, kind = lister.frame(tree, "follow", [])
    assert kind == tl.KEYS
    assert sorted(r["path"] for r in frame.collect()) == [f"src/big/{n:02d}" for n in range(12)]
    assert firsts == [root]
