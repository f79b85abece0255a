"""Server parts of URLs as storage options, options files, FTP error mapping: pure logic."""

from __future__ import annotations

import ftplib
from pathlib import Path
from types import SimpleNamespace

import pytest

from distcp.configuration import CopyConfiguration, parse_options_file
from distcp.errors import ConfigurationError
from distcp.storage import filesystems as fsutil
from distcp.storage.fsspec.ftp import translate


def test_ftp_url_server_parts_become_options_and_given_options_win() -> None:
    keys = fsutil._url_keys("ftp")
    url, options = fsutil._fold_server("ftp://bob@h.example:2121/a/b", {"port": 21}, keys)
    assert url == "ftp:///a/b"
    assert options == {"host": "h.example", "username": "bob", "port": 21}


def test_protocols_that_keep_the_server_in_paths_are_left_alone() -> None:
    assert fsutil._url_keys("s3") == {} and fsutil._url_keys("http") == {}
    assert fsutil._url_keys("hdfs")["user"] == "user"  # probed, not hard-coded


def test_to_url_names_the_server_again_but_never_the_password() -> None:
    fake = SimpleNamespace(protocol="ftp", storage_options={
        "host": "h.example", "port": 2121, "username": "bob", "password": "s3cret"})
    assert fsutil.to_url(fake, "/a/b") == "ftp://bob@h.example:2121/a/b"  # type: ignore[arg-type]
    bare = SimpleNamespace(protocol="ftp", storage_options={"host": "h.example"})
    assert fsutil.to_url(bare, "/x") == "ftp://h.example/x"  # type: ignore[arg-type]


def test_a_password_in_a_url_is_refused_without_showing_it() -> None:
    with pytest.raises(ConfigurationError, match="--dst-options-file") as err:
        CopyConfiguration.build(["/src"], "ftp://bob:s3cret@h.example/dir")
    assert "s3cret" not in str(err.value)
    with pytest.raises(ConfigurationError) as err2:
        fsutil.refuse_password_in_url("sftp://bob:s3cret@h.example/dir")
    assert "s3cret" not in str(err2.value)
    fsutil.refuse_password_in_url("ftp://bob@h.example:2121/dir")  # a user alone is fine


def test_options_file_reads_key_values_and_skips_comments(tmp_path: Path) -> None:
    f = tmp_path / "opts"
    f.write_text("# secrets\n\nhost=h.example\npassword=a#b=c d\n  port = 2121\n")
    assert parse_options_file(str(f), "--dst-options-file") == {
        "host": "h.example", "password": "a#b=c d", "port": " 2121"}


def test_a_bad_options_file_line_is_named_by_number_not_value(tmp_path: Path) -> None:
    f = tmp_path / "opts"
    f.write_text("host=h\nhunter2\n")
    with pytest.raises(ConfigurationError, match="line 2") as err:
        parse_options_file(str(f), "--dst-options-file")
    assert "hunter2" not in str(err.value)


@pytest.mark.parametrize(("exc", "kind"), [
    (ftplib.error_perm("550 No such file or directory."), FileNotFoundError),
    (ftplib.error_perm("550 Not enough privileges."), PermissionError),
    (ftplib.error_perm("530 Authentication failed."), PermissionError),
    (ftplib.error_perm("550 Failed to open file."), OSError),
    (ftplib.error_temp("421 Too many connections"), OSError),
    (EOFError(), ConnectionError),
])
def test_ftplib_errors_become_oserrors_naming_the_path(exc: Exception, kind: type) -> None:
    err = translate(exc, "/a/b")
    assert type(err) is kind
    assert "/a/b" in str(err)
    if kind is OSError:
        assert str(exc) in str(err)  # the server's reply


def test_oserrors_pass_unchanged() -> None:
    exc = TimeoutError("slow")
    assert translate(exc, "/a") is exc


@pytest.mark.parametrize("url", ["/a/b", "/a/b/", "/", "//", "a", "a/b/", "./a", ".", "./",
                                 "~", "~/x/", "/a/./b", "/a/../b", "caf\u00e9/bad\udce9",
                                 "file:///a/b", "local:///a", "file:/a", "/a:b"])
def test_a_local_path_is_spelled_as_fsspec_spells_it_without_importing_it(
        url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A plain path is resolved without fsspec (``LocalPaths``), to fsspec's own
    spelling; a ``file:`` URL goes through fsspec, as before; either is local."""
    from fsspec.core import url_to_fs

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "/home/someone")
    fs, path = fsutil.filesystem(url)
    assert path == url_to_fs(url)[1]
    assert fsutil.is_local(fs) and fsutil.to_url(fs, path) == path
    assert isinstance(fs, fsutil.LocalPaths) == (":" not in url)


def test_the_lazy_local_filesystem_answers_as_fsspecs_does(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("abc")
    fs, path = fsutil.filesystem(str(tmp_path))
    assert isinstance(fs, fsutil.LocalPaths)
    assert fs.ls(path, detail=False) == [f"{path}/f"]
    assert fs.size(f"{path}/f") == 3
    assert fs.storage_options == {}
    fs2, _ = fsutil.filesystem(str(tmp_path), {"auto_mkdir": True})
    assert not isinstance(fs2, fsutil.LocalPaths) and fsutil.is_local(fs2)
