"""Job files: parsing, validation and the copy keywords they give, from literal TOML.

Every bad file must give one line naming the file, the line and the key (exit 2
through the CLI), and never the value of a secret. No Spark starts here.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from distcp.cli import copy_command, job_keys, main, run_command
from distcp.errors import ConfigurationError
from distcp.jobs import load_job
from distcp.jobs.keys import NOT_IN_FILE, RUN_ONLY_FLAGS, SECRET_FLAGS, long_name
from distcp.jobs.lines import key_lines, line_of
from distcp.jobs.secrets import is_secret_name

ISSUE_EXAMPLE = """\
[[datasets]]
source = "s3://drops/partner"        # any URL a copy takes; finder options beside it

[[branches]]
name = "lake"
destination = "/lake/partner"
convert = ["decrypt", "gunzip", "untar"]
"""
SECRET = "s3cr3t-value-never-shown"


def write(tmp_path: Path, text: str, name: str = "job.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load(path: Path):  # type: ignore[no-untyped-def]
    return load_job(str(path), job_keys())


def refusal(path: Path) -> str:
    with pytest.raises(ConfigurationError) as info:
        load(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_issue_example_with_one_branch_gives_the_copy_keywords(tmp_path: Path) -> None:
    job = load(write(tmp_path, ISSUE_EXAMPLE))
    assert [b.name for b in job.branches] == ["lake"]
    sources, destination, options = job.copy_arguments()
    assert sources == ["s3://drops/partner"] and destination == "/lake/partner"
    assert options == {"convert": ["decrypt", "gunzip", "untar"], "src_options": {},
                       "dst_options": {}}


def test_a_branch_without_a_name_is_fork_and_its_index(tmp_path: Path) -> None:
    job = load(write(tmp_path, '[[datasets]]\nsource = "a"\n[[branches]]\ndestination = "b"\n'))
    assert job.branches[0].name == "fork_0"


def test_relative_paths_are_under_the_job_files_folder(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    job = load(write(tmp_path / "jobs", """\
        summary_json = "out/summary.json"
        log_file = "-"
        state_dir = "s3://state/x"
        [[datasets]]
        source = "../in"
        files_from = "lists/today.txt"
        [[branches]]
        destination = "out/tree"
        gpg_home = "keys"
        [storage."data/local"]
        auto_mkdir = true
        """))
    sources, destination, options = job.copy_arguments()
    assert sources == [str(tmp_path / "in")]
    assert destination == str(tmp_path / "jobs" / "out" / "tree")
    assert options["files_from"] == str(tmp_path / "jobs" / "lists" / "today.txt")
    assert options["gpg_home"] == str(tmp_path / "jobs" / "keys")
    assert options["summary_json"] == str(tmp_path / "jobs" / "out" / "summary.json")
    assert options["log_file"] == "-" and options["state_dir"] == "s3://state/x"
    assert job.storage[0].prefix == str(tmp_path / "jobs" / "data" / "local")


def test_secrets_by_reference_reach_the_options_and_no_repr(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOB_SECRET", SECRET)
    (tmp_path / "pass.txt").write_text("gpg-pass\n")
    job = load(write(tmp_path, """\
        conf = { "spark.hadoop.fs.s3a.secret.key" = { env = "JOB_SECRET" } }
        [[datasets]]
        source = "s3://src/a"
        [[branches]]
        destination = "s3://dst/b"
        gpg_passphrase = { file = "pass.txt" }
        [storage."s3://"]
        endpoint_url = "http://127.0.0.1:9"
        [storage."s3://src"]
        secret = { env = "JOB_SECRET" }
        client_kwargs = { region_name = "eu-west-1" }
        [storage.destination]
        token = { file = "pass.txt" }
        """))
    _, _, options = job.copy_arguments()
    assert options["src_options"] == {"endpoint_url": "http://127.0.0.1:9", "secret": SECRET,
                                      "client_kwargs": {"region_name": "eu-west-1"}}
    assert options["dst_options"] == {"token": "gpg-pass", "endpoint_url": "http://127.0.0.1:9"}
    assert options["gpg_passphrase"] == "gpg-pass"
    assert options["conf"] == {"spark.hadoop.fs.s3a.secret.key": SECRET}
    assert SECRET not in repr(job) and "gpg-pass" not in repr(job)


BAD_FILES = [
    # (file text, line, key, words of the problem)
    ('comit_policy = "full"\n' + ISSUE_EXAMPLE, 1, "comit_policy",
     "unknown key; did you mean 'commit_policy'?"),
    ('[[datasets]]\nsourse = "a"\n[[branches]]\ndestination = "b"\n', 2, "datasets[0].sourse",
     "unknown key; did you mean 'source'?"),
    ('include = ["*.csv"]\n' + ISSUE_EXAMPLE, 1, "include",
     "not a key of the top level (before any table); it belongs in [[datasets]]"),
    (ISSUE_EXAMPLE + 'dst_option = ["a=b"]\n', 8, "branches[0].dst_option",
     "not a job-file key; use [storage]"),
    (ISSUE_EXAMPLE + f'[storage."s3://drops"]\nendpoint_url = "x"\nsecret = "{SECRET}"\n', 10,
     'storage.s3://drops.secret', 'an inline secret is refused; write secret = { env = "NAME" }'),
    (f'conf = {{ "spark.hadoop.fs.s3a.access.key" = "{SECRET}" }}\n' + ISSUE_EXAMPLE, 1,
     "conf.spark.hadoop.fs.s3a.access.key", "an inline secret is refused"),
    (ISSUE_EXAMPLE + f'gpg_passphrase = "{SECRET}"\n', 8, "branches[0].gpg_passphrase",
     "an inline secret is refused"),
    (ISSUE_EXAMPLE.replace("s3://drops", f"s3://user:{SECRET}@drops"), 2, "datasets[0].source",
     "a URL with credentials in it is an inline secret, refused"),
    ('parallelism = "four"\n' + ISSUE_EXAMPLE, 1, "parallelism",
     "expected an integer, got a string"),
    ('overwrite = "yes"\n' + ISSUE_EXAMPLE, 1, "overwrite", "expected a boolean, got a string"),
    (ISSUE_EXAMPLE.replace('["decrypt", "gunzip", "untar"]', '"gunzip"'), 7,
     "branches[0].convert", "expected an array of strings, got a string"),
    ('commit_policy = "most"\n' + ISSUE_EXAMPLE, 1, "commit_policy",
     "must be one of full, successful, partial"),
    ('bwlimit = "fast"\n' + ISSUE_EXAMPLE, 1, "bwlimit", "not a size: 'fast'"),
    ('max_expansion_ratio = 0.5\n' + ISSUE_EXAMPLE, 1, "max_expansion_ratio",
     "belongs in [[branches]]"),
    (ISSUE_EXAMPLE + "max_expansion_ratio = 0.5\n", 8, "branches[0].max_expansion_ratio",
     "must be at least 1"),
    ('[[datasets]]\nsource = "a"\n\n[[branches]]\nname = "x"\n', 4, "branches[0]",
     "destination is missing: the branch writes nowhere"),
    ('[[datasets]]\ninclude = ["*"]\n[[branches]]\ndestination = "b"\n', 1, "datasets[0]",
     "source is missing"),
    (ISSUE_EXAMPLE + 'route_glob = ["*.gz"]\n', 8, "branches[0].route_glob",
     "routing chooses between branches: a job of one branch takes every file"),
    (ISSUE_EXAMPLE + '\n[[branches]]\ndestination = "b"\nroute_min_size = "big"\n', 11,
     "branches[1].route_min_size", "size"),
    (ISSUE_EXAMPLE + '\n[[branches]]\nname = "lake"\ndestination = "/x"\n', 10,
     "branches[1].name", "branch name 'lake' is taken"),
    (ISSUE_EXAMPLE.replace('"lake"', '"a b"'), 5, "branches[0].name", "use letters, digits"),
    (ISSUE_EXAMPLE + 'checks = ["not-empty"]\n', 8, "branches[0].checks",
     "unknown key; did you mean 'check'?"),
    (ISSUE_EXAMPLE + '[storage."s3://x"]\nsecret = { env = "PYDISTCP_TEST_UNSET_VAR" }\n', 9,
     "storage.s3://x.secret", "environment variable PYDISTCP_TEST_UNSET_VAR is not set"),
    ('[[datasets]]\nsource = "a"\nfinder = "glob"\n[[branches]]\ndestination = "b"\n', 3,
     "datasets[0].finder", "the glob finder needs dataset_glob"),
    (('[[datasets]]\nsource = "a"\ninclude = ["*.csv"]\n[[datasets]]\nsource = "c"\n'
      '[[branches]]\ndestination = "b"\n'), 4, "datasets[1]",
     "differs from datasets[0]'s include"),
]


@pytest.mark.parametrize(("text", "line", "key", "problem"), BAD_FILES,
                         ids=[f"{k}-{p[:20]}" for _, _, k, p in BAD_FILES])
def test_a_bad_file_is_one_line_naming_file_line_and_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, line: int, key: str,
        problem: str) -> None:
    monkeypatch.delenv("PYDISTCP_TEST_UNSET_VAR", raising=False)
    path = write(tmp_path, text)
    message = refusal(path)
    assert message.startswith(f"{path}:{line}: {key}: "), message
    assert problem in message, message
    assert SECRET not in message


def test_invalid_toml_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, ISSUE_EXAMPLE + "preserve = = 1\n")
    message = refusal(path)
    assert message.startswith(f"{path}:8: not valid TOML: Invalid value"), message


def test_no_branches_table_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, '[[datasets]]\nsource = "a"\n')
    assert refusal(path) == f"{path}: no [[branches]] table: a job needs at least one"


def test_datasets_as_a_plain_table_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[datasets]\nsource = "a"\n[[branches]]\ndestination = "b"\n')
    assert refusal(path) == f"{path}:1: datasets: must be [[datasets]] tables, not a [table]"


def test_the_cli_exits_2_with_the_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, ISSUE_EXAMPLE + "convrt = []\n")
    result = CliRunner().invoke(main, ["run", str(path)])
    assert result.exit_code == 2, result.output
    assert result.output == (f"pydistcp: error: {path}:8: branches[0].convrt: unknown key; "
                             "did you mean 'convert'?\n")


def test_a_missing_job_file_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", str(tmp_path / "nope.toml")])
    assert result.exit_code == 2
    assert f"cannot read job file {tmp_path / 'nope.toml'}: No such file" in result.output


def test_overrides_win_a_comparison_flag_replaces_the_files_and_conf_merges(
        tmp_path: Path) -> None:
    job = load(write(tmp_path, 'checksum = true\nmaster = "local[1]"\n'
                               'conf = { a = "1", b = "2" }\n' + ISSUE_EXAMPLE))
    _, _, options = job.with_overrides({"size_only": True, "master": "local[2]",
                                        "conf": {"b": "3"}, "no_progress": True}
                                       ).copy_arguments()
    assert options["size_only"] is True and "checksum" not in options
    assert options["master"] == "local[2]" and options["conf"] == {"a": "1", "b": "3"}
    assert options["progress"] is False and "no_progress" not in options


def test_every_copy_flag_is_a_job_key_or_says_what_replaces_it() -> None:
    keys = {k.name: k for k in job_keys()}
    for option in copy_command.params:
        if not hasattr(option, "is_flag"):
            continue
        name = long_name(option)
        assert SECRET_FLAGS.get(name, name) in keys or name in NOT_IN_FILE, name
    assert keys["include"].section == "dataset" and keys["convert"].section == "branch"
    assert keys["commit_policy"].section == "run" and keys["gpg_passphrase"].kind == "secret"
    assert keys["bwlimit"].kind == "size" and keys["min_age"].kind == "duration"
    assert keys["conf"].kind == "table" and keys["files_from"].path


def test_run_takes_copys_own_run_time_options() -> None:
    names = {long_name(p) for p in run_command.params if hasattr(p, "is_flag")}
    copy_options = {id(p) for p in copy_command.params}
    assert all(id(p) in copy_options for p in run_command.params if hasattr(p, "is_flag"))
    assert {"no_progress", "summary_json", "master", "log_dir", "commit_policy",
            *RUN_ONLY_FLAGS} <= names
    assert not names & {"include", "convert", "dst_option", "src_options_file"}


@pytest.mark.parametrize(("name", "secret"), [
    ("secret", True), ("aws_secret_access_key", True), ("password", True), ("token", True),
    ("key", True), ("spark.hadoop.fs.s3a.access.key", True), ("gpg_passphrase", True),
    ("private_key", True), ("key_file", False), ("key_filename", False), ("kms_key_id", False),
    ("endpoint_url", False), ("gpg_home", False), ("region_name", False),
    ("anon", False), ("Password", True),
])
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_no_copy_setting_is_taken_for_a_secret() -> None:
    flagged = {k.name for k in job_keys() if is_secret_name(k.name)}
    assert flagged == {"gpg_passphrase"}


def test_key_lines_follow_headers_arrays_dotted_keys_and_skip_multiline_values() -> None:
    text = textwrap.dedent('''\
        a = 1
        b.c = "x"
        long = """
        fake = 1
        [not.a.header]
        """
        list = [
          "y",
          [1, 2]
        ]
        [[t]]
        k = 1
        [[t]]
        k = { inner = 2 }
        [t.sub]
        z = 3
        ["quoted.name".'x']
        q = 4
        ''')
    lines = key_lines(text)
    assert lines[("a",)] == 1 and lines[("b", "c")] == 2 and lines[("long",)] == 3
    assert ("fake",) not in lines and ("not", "a", "header") not in lines
    assert lines[("list",)] == 7 and lines[("t", 0)] == 11 and lines[("t", 0, "k")] == 12
    assert lines[("t", 1, "k")] == 14 and lines[("t", 1, "sub", "z")] == 16
    assert lines[("quoted.name", "x", "q")] == 18
    assert line_of(lines, ("t", 1, "k", "inner")) == 14
    assert line_of(lines, ("missing",)) is None


def test_a_stream_dataset_in_a_job_file_gives_the_copy_keywords(tmp_path: Path) -> None:
    job = load(write(tmp_path, """\
        [[datasets]]
        source = "/data/topics"
        finder = "stream"
        partition_pattern = "dt=yyyy-MM-dd/hr=HH"
        lookback = "24h"
        ready_marker = "_SUCCESS"
        [[branches]]
        destination = "/lake/topics"
        """))
    _sources, _destination, options = job.copy_arguments()
    assert {k: options[k] for k in ("finder", "partition_pattern", "lookback", "ready_marker")} \
        == {"finder": "stream", "partition_pattern": "dt=yyyy-MM-dd/hr=HH", "lookback": "24h",
            "ready_marker": "_SUCCESS"}
