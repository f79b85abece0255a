"""``java -version`` is asked once per JDK, not once per run: the answer is kept on disk
under the binary's identity, and a binary replaced in place is asked again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from distcp.errors import JavaMissingError
from distcp.spark import jvm


def _fake_java(home: Path, version: str, code: int = 0) -> Path:
    java = home / "bin" / "java"
    java.parent.mkdir(parents=True, exist_ok=True)
    java.write_text("#!/bin/sh\n"
                    f"echo asked >> {home / 'asked'}\n"
                    f"echo 'openjdk version \"{version}\" 2025-04-15' >&2\n"
                    f"exit {code}\n")
    java.chmod(0o755)
    return java


def _asked(home: Path) -> int:
    try:
        return len((home / "asked").read_text().splitlines())
    except FileNotFoundError:
        return 0


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    jvm.java_version.cache_clear()
    yield tmp_path / "cache"
    jvm.java_version.cache_clear()


def test_the_version_is_asked_once_and_again_when_the_binary_changes(tmp_path: Path) -> None:
    home = tmp_path / "jdk"
    java = _fake_java(home, "17.0.15")
    assert 'version "17.0.15"' in jvm.java_version(str(java))
    jvm.java_version.cache_clear()  # a later run: a new process
    assert 'version "17.0.15"' in jvm.java_version(str(java))
    assert _asked(home) == 1
    assert [p.suffix for p in (tmp_path / "cache" / "pydistcp" / "java").iterdir()] == [
        ".version"]

    _fake_java(home, "21.0.4")  # upgraded in place: another size and mtime
    jvm.java_version.cache_clear()
    assert 'version "21.0.4"' in jvm.java_version(str(java))
    assert _asked(home) == 2


def test_a_failing_java_is_not_remembered_and_an_old_one_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "jdk"
    java = _fake_java(home, "17.0.15", code=1)
    jvm.java_version(str(java))
    jvm.java_version.cache_clear()
    jvm.java_version(str(java))
    assert _asked(home) == 2

    old = _fake_java(tmp_path / "old", "1.8.0_402")
    monkeypatch.setenv("JAVA_HOME", str(old.parent.parent))
    with pytest.raises(JavaMissingError, match="is Java 8"):
        jvm.check_java()
