"""Every refusal of CopyConfiguration, with its exact text and in the order the checks
run: the first bad setting is the one the user is told about, so the order is behaviour.
Also what ``build`` fills in from the environment and how it reads strings."""

from __future__ import annotations

import re
from typing import Any

import pytest

from distcp.configuration import CopyConfiguration
from distcp.converters.base import ConverterOptions, UnknownConverterError
from distcp.errors import ConfigurationError

# (settings, error) in the order __post_init__ checks them.
REFUSALS: list[tuple[dict[str, Any], str]] = [
    ({"sources": ()}, "at least one source is required"),
    ({"compare": "newer"}, "compare: unknown mode 'newer'"),
    ({"tasks": 0}, "--tasks must be at least 1"),
    ({"preserve": "pzqt"}, "--preserve takes letters from 'ugptb', not 'qz'"),
    ({"verify": "md5"}, "--verify must be 'digest' or 'size', not 'md5'"),
    ({"parallelism": 0}, "--parallelism must be at least 1"),
    ({"commit_policy": "some"},
     "--commit-policy must be full, successful or partial, not 'some'"),
    ({"engine": "hot"}, "--engine must be auto, warm or cold, not 'hot'"),
    ({"max_replays": 0}, "--max-replays must be at least 1"),
    ({"destination": "s3://AK:SK@bucket/key"},
     ("a s3:// URL with credentials in it is refused (they would show in logs and process "
     "lists); use the AWS environment or profile, or --src-options-file/--dst-options-file "
     "with key=... secret=...")),
    ({"split_size": (1 << 20) - 1}, "--split-size must be at least 1M"),
    ({"converters": ("gunzip",), "split_size": 1 << 20},
     ("--split-size cannot be used with --convert: a converter needs the whole stream of a "
     "file in one task (drop one of the two options)")),
    ({"visibility": "object"}, "--visibility must be file or file-set, not 'object'"),
    ({"links": "hard"}, "--links must be skip, follow or copy, not 'hard'"),
    ({"min_size": -1}, "--min-size must not be negative"),
    ({"max_size": -1}, "--max-size must not be negative"),
    ({"min_age": -1.0}, "--min-age must not be negative"),
    ({"max_age": -0.5}, "--max-age must not be negative"),
    ({"min_size": 10, "max_size": 9}, "--min-size is larger than --max-size: nothing could match"),
    ({"min_age": 10.0, "max_age": 9.0},
     "--min-age is larger than --max-age: nothing could match"),
    ({"log_level": "trace"}, "--log-level must be one of error, notice, info, debug, not 'trace'"),
    ({"bwlimit": 1023}, "--bwlimit must be at least 1K (bytes per second)"),
    ({"buffer_size": 4095}, "--buffer-size must be at least 4 KiB"),
    ({"converters": ("gunzip",), "converter_options": ConverterOptions(max_expansion_ratio=0)},
     "--max-expansion-ratio must be positive"),
]


def _config(**settings: Any) -> CopyConfiguration:
    values: dict[str, Any] = {"sources": ("/a",), "destination": "/b", **settings}
    return CopyConfiguration(**values)


@pytest.mark.parametrize("settings, message", REFUSALS)
def test_each_bad_setting_is_refused_with_its_own_text(settings: dict[str, Any],
                                                       message: str) -> None:
    with pytest.raises(ConfigurationError, match=f"^{re.escape(message)}$"):
        _config(**settings)


@pytest.mark.parametrize("index", range(len(REFUSALS)))
def test_the_first_bad_setting_in_check_order_is_reported(index: int) -> None:
    merged: dict[str, Any] = {}
    for settings, _ in reversed(REFUSALS[index:]):
        merged.update(settings)
    settings, message = REFUSALS[index]
    merged.update(settings)
    with pytest.raises(ConfigurationError, match=f"^{re.escape(message)}$"):
        _config(**merged)


@pytest.mark.parametrize("url, where", [
    ("s3a://k:s@b/x", ("use the AWS environment or profile, or --src-options-file/"
                      "--dst-options-file with key=... secret=...")),
    ("sftp://me:pw@host/x", "put password=... in --src-options-file or --dst-options-file"),
])
def test_credentials_in_a_source_url_are_refused(url: str, where: str) -> None:
    scheme = url.split("://")[0]
    with pytest.raises(ConfigurationError, match=re.escape(
            f"a {scheme}:// URL with credentials in it is refused (they would show in logs "
            f"and process lists); {where}")):
        _config(sources=("/ok", url))


def test_an_unknown_converter_is_refused_last() -> None:
    with pytest.raises(UnknownConverterError, match="^--convert: "):
        _config(converters=("no-such-converter",))


def test_limits_at_their_bounds_are_accepted() -> None:
    cfg = _config(tasks=1, parallelism=1, max_replays=1, split_size=1 << 20, min_size=0,
                  max_size=0, min_age=0.0, max_age=0.0, bwlimit=1024, buffer_size=4096,
                  preserve="ugptb", sources=("sftp://host/x", "s3://b/k"))
    assert (cfg.split_size, cfg.bwlimit, cfg.buffer_size) == (1 << 20, 1024, 4096)


ENV_NAMES = ("MASTER", "PARALLELISM", "BUFFER_SIZE", "VERIFY", "PRESERVE", "ENGINE",
             "GPG_PASSPHRASE")


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ENV_NAMES:
        monkeypatch.delenv(f"PYDISTCP_{name}", raising=False)
    return monkeypatch


def test_build_fills_every_unset_option_from_the_environment(env: pytest.MonkeyPatch) -> None:
    for name, value in {"MASTER": "local[3]", "PARALLELISM": "7", "BUFFER_SIZE": "64K",
                        "VERIFY": "size", "PRESERVE": "pb", "ENGINE": "cold",
                        "GPG_PASSPHRASE": "pw"}.items():
        env.setenv(f"PYDISTCP_{name}", value)
    cfg = CopyConfiguration.build(["/a"], "/b")
    assert (cfg.master, cfg.parallelism, cfg.buffer_size, cfg.verify, cfg.preserve,
            cfg.engine) == ("local[3]", 7, 64 << 10, "size", "pb", "cold")
    assert cfg.converter_options == ConverterOptions(gpg_passphrase="pw")


def test_explicit_options_win_over_the_environment(env: pytest.MonkeyPatch) -> None:
    env.setenv("PYDISTCP_BUFFER_SIZE", "64K")
    env.setenv("PYDISTCP_ENGINE", "cold")
    env.setenv("PYDISTCP_GPG_PASSPHRASE", "pw")
    cfg = CopyConfiguration.build(["/a"], "/b", engine="warm", gpg_passphrase="mine",
                                  gpg_home="/h")
    assert (cfg.buffer_size, cfg.engine) == (64 << 10, "warm")
    assert cfg.converter_options == ConverterOptions(gpg_home="/h", gpg_passphrase="mine")


def test_a_buffer_size_keyword_sets_the_copy_buffer_and_the_converters(
        env: pytest.MonkeyPatch) -> None:
    """``buffer_size`` is a field of both the run and ConverterOptions: ``--buffer-size``
    sizes the copy loop (it used to reach only the converters, the run's buffer then
    coming from the environment) and, as given, beats ``PYDISTCP_BUFFER_SIZE``."""
    env.setenv("PYDISTCP_BUFFER_SIZE", "64K")
    cfg = CopyConfiguration.build(["/a"], "/b", buffer_size=8192)
    assert cfg.buffer_size == 8192
    assert cfg.converter_options == ConverterOptions(buffer_size=8192)
    assert CopyConfiguration.build(["/a"], "/b").buffer_size == 64 << 10


def test_an_empty_environment_variable_is_ignored(env: pytest.MonkeyPatch) -> None:
    env.setenv("PYDISTCP_MASTER", "")
    env.setenv("PYDISTCP_GPG_PASSPHRASE", "")
    cfg = CopyConfiguration.build(["/a"], "/b")
    assert cfg.master == "local[*]"
    assert cfg.converter_options == ConverterOptions()


def test_a_bad_buffer_size_in_the_environment_names_the_text(env: pytest.MonkeyPatch) -> None:
    env.setenv("PYDISTCP_BUFFER_SIZE", "lots")
    with pytest.raises(ConfigurationError, match=re.escape("not a size: 'lots'")):
        CopyConfiguration.build(["/a"], "/b")


def test_build_reads_strings_and_sequences(env: pytest.MonkeyPatch) -> None:
    cfg = CopyConfiguration.build(
        ["/a", "/c"], "/b", recovery_retention="2h", parallelism="4", split_size="2M",
        min_size="1K", max_size="1G", bwlimit="10M", min_age="30m", max_age="7d",
        include=["*.csv"], exclude=["tmp/*"],
        spark_conf={"spark.a": "1", "spark.b": "2"})
    assert cfg.sources == ("/a", "/c")
    assert cfg.recovery_retention == 7200.0 and cfg.parallelism == 4
    assert (cfg.split_size, cfg.min_size, cfg.max_size, cfg.bwlimit) == (
        2 << 20, 1 << 10, 1 << 30, 10 << 20)
    assert (cfg.min_age, cfg.max_age) == (1800.0, 7 * 86400.0)
    assert (cfg.include, cfg.exclude) == (("*.csv",), ("tmp/*",))
    assert CopyConfiguration.build(["/a"], "/b", converters=["gunzip"]).converters == ("gunzip",)
    assert cfg.spark_conf == (("spark.a", "1"), ("spark.b", "2"))


def test_build_passes_numbers_and_none_through(env: pytest.MonkeyPatch) -> None:
    cfg = CopyConfiguration.build(("/a",), "/b", recovery_retention=60, split_size=None,
                                  min_age=5.0, include=None,
                                  spark_conf=(("spark.x", "y"),))
    assert (cfg.recovery_retention, cfg.split_size, cfg.min_age, cfg.include) == (
        60, None, 5.0, None)
    assert cfg.spark_conf == (("spark.x", "y"),)


@pytest.mark.parametrize("name, text, message", [
    ("split_size", "big", "--split-size: not a size: 'big'"),
    ("min_size", "x", "--min-size: not a size: 'x'"),
    ("max_size", "x", "--max-size: not a size: 'x'"),
    ("bwlimit", "fast", "--bwlimit: not a size: 'fast'"),
    ("min_age", "old", "--min-age: not a duration: 'old'"),
    ("max_age", "1y", "--max-age: not a duration: '1y'"),
])
def test_a_bad_string_names_its_flag(env: pytest.MonkeyPatch, name: str, text: str,
                                     message: str) -> None:
    with pytest.raises(ConfigurationError, match=f"^{re.escape(message)}"):
        CopyConfiguration.build(["/a"], "/b", **{name: text})


def test_unknown_options_are_refused_before_the_environment_is_read(
        env: pytest.MonkeyPatch) -> None:
    env.setenv("PYDISTCP_BUFFER_SIZE", "lots")
    with pytest.raises(ConfigurationError, match="^unknown option\\(s\\): colour, size$"):
        CopyConfiguration.build(["/a"], "/b", size=1, colour="red", gpg_home="/h")


def test_a_bad_recovery_retention_string_is_not_labelled(env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="^not a duration: 'soon'"):
        CopyConfiguration.build(["/a"], "/b", recovery_retention="soon")
