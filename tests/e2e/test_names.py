"""Every name survives (issue 38, point 2): a tree whose names hold a newline, glob
characters, bytes that are not UTF-8 and components of NAME_MAX bytes is copied, copied
again (a no-op), mirrored with ``--delete``, logged, summed up and shown by ``status``,
on local disk and through S3, by the real command.

Names are compared as bytes (``os.listdir`` of a bytes path). On S3 a key is UTF-8: a
name that is not fails its file by name and the run goes on. moto answers 404 to keys
holding a newline (docs/PITFALLS), so the S3 tree leaves newlines to the local test.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e

#: NAME_MAX: the longest component a Linux filesystem allows.
LONGEST = b"L" * 251 + b".txt"
#: Valid UTF-8, hostile: a newline, glob characters (and a name the glob matches), a
#: component of 255 bytes, a space and percent signs, an escape sequence.
UTF8_NAMES = (b"[x]*?.txt", b"xab.txt", LONGEST, b"sp ace %2F+.txt", "café.txt".encode())
NEWLINES = (b"a\nb.txt", b"esc\x1b[2J.txt")
#: Not UTF-8: a Latin-1 name, and a folder whose name is not UTF-8 either.
NOT_UTF8 = (b"caf\xe9.txt", b"d\xff\xfe/x.txt")
FOLDERS = (b"dir\n[*]", "ü [?]".encode())
#: The folders of the S3 tree: moto refuses keys holding a newline.
KEY_FOLDERS = (b"[*]?", "ü [?]".encode())


def make_tree(root: bytes, names: tuple[bytes, ...], folders: tuple[bytes, ...] = FOLDERS
              ) -> dict[bytes, bytes]:
    """``names`` at the top and in each of ``folders``; each file's bytes name it."""
    files: dict[bytes, bytes] = {}
    for folder in (b"", *folders):
        for name in names:
            rel = os.path.join(folder, name)
            files[rel] = b"bytes of " + rel
    for rel, data in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
    return files


def files_of(root: bytes) -> dict[bytes, bytes]:
    """relative name -> bytes of every file below ``root`` (bytes names, as on disk),
    the state directory left out."""
    out: dict[bytes, bytes] = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != b".pydistcp"]
        for name in names:
            with open(os.path.join(folder, name), "rb") as f:
                out[os.path.relpath(os.path.join(folder, name), root)] = f.read()
    return out


def test_every_name_survives_a_copy_its_rerun_a_delete_the_log_and_status(
        tmp_path: Path, warm_engine: dict[str, str]) -> None:
    src = os.path.join(bytes(tmp_path), b"src\n[*]\xe9")  # the dataset's own name too
    dst = os.path.join(bytes(tmp_path), b"dst")
    files = make_tree(src, UTF8_NAMES + NEWLINES + NOT_UTF8)
    sj, log = tmp_path / "s.json", tmp_path / "run.jsonl"

    # Planned on Spark, results kept in the tasks' Parquet files, manifest written.
    first = run_cli("copy", os.fsdecode(src), os.fsdecode(dst), "--listing", "spark",
                    "--summary-json", str(sj), env=warm_engine)
    assert first.returncode == 0, first.stderr
    assert files_of(dst) == files
    summary = json.loads(sj.read_text())
    assert summary["files_copied"] == len(files)
    assert [os.fsencode(k) for k in summary["per_dataset"]] == [src]

    # Planned on the driver, every decision shown (-v) and logged: nothing to copy.
    again = run_cli("copy", os.fsdecode(src), os.fsdecode(dst), "-v", "--log-file", str(log),
                    env=warm_engine)
    assert again.returncode == 0, again.stderr
    assert f"copied 0 files (0 B), skipped {len(files)}, failed 0" in again.stdout
    assert "dir\\n[*]/a\\nb.txt  (same size and mtime)" in again.stderr
    assert "caf\\xe9.txt  (same size and mtime)" in again.stderr
    assert not any(line.startswith(("b.txt", "[*]", "[2J")) for line in
                   again.stderr.splitlines()), again.stderr  # no name forged a line
    records = [json.loads(line) for line in log.read_text().splitlines()]
    skipped = {os.fsencode(r["path"]) for r in records if r.get("action") == "skip"}
    assert skipped == {os.path.join(src, rel) for rel in files}

    # --delete removes the one name the source lost, never what its pattern matches.
    os.remove(os.path.join(src, b"[x]*?.txt"))
    os.remove(os.path.join(src, FOLDERS[0], NOT_UTF8[0]))
    mirror = run_cli("copy", os.fsdecode(src), os.fsdecode(dst), "--delete",
                     "--summary-json", str(sj), env=warm_engine)
    assert mirror.returncode == 0, mirror.stderr
    assert files_of(dst) == files_of(src)
    assert json.loads(sj.read_text())["files_deleted"] == 2

    events = os.path.join(dst, b".pydistcp", b"events", b"events.jsonl")
    with open(events, "rb") as f:
        lines = f.read().splitlines()
    assert len(lines) >= 3 and all(line.isascii() for line in lines)  # one event a line
    assert all(os.fsencode(json.loads(line)["inputs"][0]["name"]) == src for line in lines)

    shown = run_cli("status", os.fsdecode(dst))
    assert shown.returncode == 0, shown.stderr
    assert "src\\n[*]\\xe9: watermark" in shown.stdout
    assert not any(line.startswith("[*]") for line in shown.stdout.splitlines())
    as_json = run_cli("status", os.fsdecode(dst), "--json")
    [dataset] = json.loads(as_json.stdout)["datasets"]
    assert os.fsencode(dataset["dataset"]) == src
    assert dataset["files"] == len(files) - 2


def test_names_round_trip_through_s3_and_a_name_no_key_can_hold_fails_alone(
        tmp_path: Path, s3: S3Server, warm_engine: dict[str, str]) -> None:  # noqa: F811
    env = {**s3.env, **warm_engine}
    src = os.path.join(bytes(tmp_path), b"src")
    back = os.path.join(bytes(tmp_path), b"back")
    utf8 = make_tree(src, UTF8_NAMES, KEY_FOLDERS)
    make_tree(src, NOT_UTF8, KEY_FOLDERS)
    sj = tmp_path / "s.json"

    up = run_cli("copy", os.fsdecode(src), "s3://dst/tree", "--summary-json", str(sj),
                 env=env)
    assert up.returncode == 1, up.stderr
    failed = [line for line in up.stderr.splitlines() if "FAILED" in line]
    assert len(failed) == len(NOT_UTF8) * (1 + len(KEY_FOLDERS)), up.stderr
    assert any("/src/caf\\xe9.txt" in line and "not valid UTF-8" in line for line in failed)
    assert any("/src/d\\xff\\xfe/x.txt" in line for line in failed)
    keys = {k.removeprefix("tree/").encode(): v for k, v in s3.objects("dst", "tree/").items()
            if "/.pydistcp/" not in k}
    assert keys == utf8  # every other name, byte for byte
    summary = json.loads(sj.read_text())
    assert summary["files_copied"] == len(utf8)
    assert {os.fsencode(f["path"]) for f in summary["failures"]} == {
        os.path.join(src, folder, name) for folder in (b"", *KEY_FOLDERS) for name in NOT_UTF8}

    down = run_cli("copy", "s3://dst/tree", os.fsdecode(back), env=env)
    assert down.returncode == 0, down.stderr
    assert files_of(back) == utf8

    # --delete on S3: the one key the source lost goes, never the keys its pattern
    # matches. (A run with a failed file deletes nothing: the names S3 cannot hold go.)
    for folder in (b"", *KEY_FOLDERS):
        os.remove(os.path.join(src, folder, NOT_UTF8[0]))
        shutil.rmtree(os.path.join(src, folder, os.path.dirname(NOT_UTF8[1])))
    os.remove(os.path.join(src, b"[x]*?.txt"))
    mirror = run_cli("copy", os.fsdecode(src), "s3://dst/tree", "--delete",
                     "--summary-json", str(sj), env=env)
    assert mirror.returncode == 0, mirror.stderr
    keys = {k.removeprefix("tree/").encode() for k in s3.objects("dst", "tree/")
            if "/.pydistcp/" not in k}
    assert keys == set(utf8) - {b"[x]*?.txt"}
    assert json.loads(sj.read_text())["files_deleted"] == 1


def test_a_big_file_no_key_can_hold_fails_alone_when_split(
        tmp_path: Path, s3: S3Server, warm_engine: dict[str, str]) -> None:  # noqa: F811
    """A split file's upload is created on the driver: a name S3 cannot hold is not
    split, and its task fails it by name, never the run."""
    src = os.path.join(bytes(tmp_path), b"big")
    os.makedirs(src)
    with open(os.path.join(src, b"caf\xe9.bin"), "wb") as f:
        f.write(os.urandom(6 << 20))
    with open(os.path.join(src, b"ok.bin"), "wb") as f:
        f.write(b"ok")
    r = run_cli("copy", os.fsdecode(src), "s3://dst/big", "--split-size", "5M",
                env={**s3.env, **warm_engine})
    assert r.returncode == 1, r.stderr
    [failed] = [line for line in r.stderr.splitlines() if "FAILED" in line]
    assert "/big/caf\\xe9.bin" in failed and "not valid UTF-8" in failed, r.stderr
    assert "internal error" not in r.stderr
    assert {k: v for k, v in s3.objects("dst", "big/").items()
            if "/.pydistcp/" not in k} == {"big/ok.bin": b"ok"}
