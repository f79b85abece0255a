"""--chmod (rsync's rules) and --chown parsing, and where the run applies them."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from distcp.chmod import parse_chmod
from distcp.chown import Chown, parse_chown, unknown_ids
from distcp.configuration import CopyConfiguration
from distcp.errors import ConfigurationError
from distcp.preflight import check_attributes


@pytest.mark.parametrize(("rules", "mode", "is_dir", "want"), [
    ("D755,F644", 0o600, False, 0o644),
    ("D755,F644", 0o700, True, 0o755),
    ("u+rwx,g-w,o=", 0o666, False, 0o740),
    ("Fu+x", 0o644, False, 0o744),
    ("Fu+x", 0o755, True, 0o755),          # F: files only
    ("Dg+s", 0o755, True, 0o2755),
    ("Dg+s", 0o644, False, 0o644),         # D: directories only
    ("a+X", 0o644, False, 0o644),          # X: no exec bit anywhere, a file
    ("a+X", 0o744, False, 0o755),          # X: some exec bit already
    ("a+X", 0o600, True, 0o711),           # X: a directory
    ("go=", 0o777, False, 0o700),
    ("=r", 0o777, False, 0o444),           # no who: all
    ("u=rw,go=r", 0o4777, False, 0o644),   # = clears setuid of u
    ("o+t", 0o777, True, 0o1777),
    ("u+r-x", 0o700, False, 0o600),        # several actions in one clause
    ("644", 0o777, False, 0o644),
    ("F0600,D0700", 0o755, True, 0o700),
])
def test_rsync_rules_change_the_mode(rules: str, mode: int, is_dir: bool, want: int) -> None:
    assert oct(parse_chmod(rules).mode_for(mode, is_dir)) == oct(want)


def test_no_source_mode_starts_from_a_new_entrys_default() -> None:
    assert parse_chmod("g+w").mode_for(None, False) == 0o664
    assert parse_chmod("g+w").mode_for(None, True) == 0o775


def test_the_file_type_bits_of_a_stat_mode_are_dropped() -> None:
    assert parse_chmod("u+x").mode_for(0o100644, False) == 0o744


@pytest.mark.parametrize(("rules", "bad"), [
    ("u+z", "'u+z'"), ("D755,,F644", "empty rule"), ("", "empty rule"),
    ("8755", "'8755'"), ("X+r", "'X+r'"), ("u", "'u'"),
])
def test_bad_rules_are_refused_naming_the_part(rules: str, bad: str) -> None:
    with pytest.raises(ConfigurationError) as exc:
        parse_chmod(rules)
    assert str(exc.value).startswith(f"--chmod {rules!r}: ")
    assert bad in str(exc.value)


def test_parsed_rules_survive_pickling() -> None:
    rules = parse_chmod("D755,Fu+x,go-w")
    assert pickle.loads(pickle.dumps(rules)) == rules


@pytest.mark.parametrize(("text", "want"), [
    ("alice:staff", Chown("alice", "staff")), ("1000:1000", Chown("1000", "1000")),
    (":staff", Chown(None, "staff")), ("alice", Chown("alice", None)),
    ("alice:", Chown("alice", None)), ("0:0", Chown("0", "0")),
])
def test_chown_forms(text: str, want: Chown) -> None:
    assert parse_chown(text) == want


@pytest.mark.parametrize("text", [":", "", "al ice:staff", "alice:st/aff"])
def test_bad_chown_is_refused(text: str) -> None:
    with pytest.raises(ConfigurationError, match=r"^--chown "):
        parse_chown(text)


def test_unknown_names_are_named_numeric_ids_always_pass() -> None:
    assert unknown_ids(Chown("no-such-user-pydistcp", None)) == \
        "no user 'no-such-user-pydistcp' on this machine"
    assert unknown_ids(Chown(None, "no-such-group-pydistcp")) == \
        "no group 'no-such-group-pydistcp' on this machine"
    assert unknown_ids(Chown("4242", "4343")) is None
    assert unknown_ids(Chown("root", "root")) is None


def test_configuration_refuses_a_bad_chmod(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"^--chmod 'Fu\+q': cannot read 'Fu\+q'"):
        CopyConfiguration.build([str(tmp_path)], str(tmp_path / "d"), chmod="Fu+q")


def test_an_object_store_destination_refuses_chmod_and_chown() -> None:
    with pytest.raises(ConfigurationError) as exc:
        check_attributes("F644", None, "s3://bucket/x", {})
    assert str(exc.value) == ("--chmod: destination s3://bucket/x keeps no file modes or "
                              "owners (an object store); leave it unset")
    with pytest.raises(ConfigurationError, match="^--chown: destination s3://bucket/x"):
        check_attributes(None, "0:0", "s3://bucket/x", {})


def test_a_local_destination_refuses_an_unknown_owner(tmp_path: Path) -> None:
    check_attributes("F644", "0:0", str(tmp_path), {})  # fine
    with pytest.raises(ConfigurationError,
                       match="^--chown nobody-pydistcp: no user 'nobody-pydistcp'"):
        check_attributes(None, "nobody-pydistcp", str(tmp_path), {})


def test_a_branch_of_a_job_file_takes_chmod_and_chown(tmp_path: Path) -> None:
    from distcp.cli import job_keys
    from distcp.jobs import load_job

    job = tmp_path / "job.toml"
    job.write_text('[[datasets]]\nsource = "/data/in"\n\n[[branches]]\nname = "share"\n'
                   'destination = "/srv/share"\nchmod = "D2775,F664"\nchown = "1000:33"\n')
    _, destination, options = load_job(str(job), job_keys()).copy_arguments()
    assert destination == "/srv/share"
    assert (options["chmod"], options["chown"]) == ("D2775,F664", "1000:33")
