"""``distcp.copy`` and ``pydistcp copy`` take the same options, under the same names.

Read from the click command itself (``copy_command.params``) and from the function's
signature, so a flag added to one and not the other fails here. Only the exceptions
listed below, each with its reason, may differ. No Spark starts in this module.
"""

from __future__ import annotations

import enum
import inspect
import typing
import warnings
from dataclasses import fields
from pathlib import Path
from typing import Any

import click
import pytest

import distcp
from distcp.callbacks import Callback
from distcp.cli import copy_command
from distcp.configuration import CopyConfiguration, parse_duration, parse_size
from distcp.options import DURATIONS, SIZES, configuration_options

#: Flags of ``pydistcp copy`` the API has no parameter for, and why.
CLI_ONLY = {
    "src_option": "repeated KEY=VALUE on the command line; the API takes src_options, a mapping",
    "dst_option": "repeated KEY=VALUE on the command line; the API takes dst_options, a mapping",
    "src_options_file": "keeps secrets out of argv; an API caller passes src_options directly",
    "dst_options_file": "keeps secrets out of argv; an API caller passes dst_options directly",
    "gpg_passphrase_file": "keeps the passphrase out of argv; the API takes gpg_passphrase",
    "no_progress": "the API's progress=False",
    "verbose": "-v/-vv: the API's log_level='info'/'debug'",
    "quiet": "-q: the API's log_level='error'",
}
#: Parameters of ``distcp.copy`` no flag has, and why.
API_ONLY = {
    "callback": "a Python object receiving progress events; no command-line form",
    "src_options": "the mapping --src-option and --src-options-file build",
    "dst_options": "the mapping --dst-option and --dst-options-file build",
    "gpg_passphrase": "the value --gpg-passphrase-file holds",
    "progress": "--no-progress, positively",
    "compare": "the one mode --checksum / --size-only / --ignore-existing choose; kept for "
               "callers of the earlier API",
    "converters": "deprecated spelling of convert",
    "spark_conf": "deprecated spelling of conf",
    "gpg_recipients": "deprecated spelling of gpg_recipient",
}

def flag_name(param: click.Parameter) -> str:
    """``--gpg-recipient`` -> ``gpg_recipient``: the long flag, as the user types it."""
    long = [o for o in param.opts if o.startswith("--")]
    assert long, f"{param.name} has no long flag"
    return max(long, key=len)[2:].replace("-", "_")


CLI = {flag_name(p): p for p in copy_command.params if isinstance(p, click.Option)}
SIGNATURE = inspect.signature(distcp.copy)
API = {n: p for n, p in SIGNATURE.parameters.items() if n not in ("sources", "destination")}
# Callback is imported for type checkers only, Summary on first use (``distcp._LAZY``)
HINTS = typing.get_type_hints(distcp.copy, localns={"Callback": Callback,
                                                    "Summary": distcp.Summary})


def test_every_flag_is_a_parameter_of_the_same_name() -> None:
    missing = set(CLI) - set(API) - set(CLI_ONLY)
    assert not missing, f"flags of 'pydistcp copy' distcp.copy lacks: {sorted(missing)}"


def test_every_parameter_is_a_flag_of_the_same_name() -> None:
    extra = set(API) - set(CLI) - set(API_ONLY)
    assert not extra, f"parameters of distcp.copy no flag has: {sorted(extra)}"


def test_the_exceptions_are_not_stale() -> None:
    assert set(CLI_ONLY) <= set(CLI), set(CLI_ONLY) - set(CLI)
    assert set(API_ONLY) <= set(API) and not set(API_ONLY) & set(CLI)


def test_the_signature_is_checkable() -> None:
    """No ``**options``: an IDE or mypy checks every keyword of a call."""
    kinds = {p.kind for p in API.values()}
    assert kinds == {inspect.Parameter.KEYWORD_ONLY}
    assert all(name in HINTS for name in API), set(API) - set(HINTS)
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD
                   for f in (distcp.status, distcp.recover, distcp.cleanup)
                   for p in inspect.signature(f).parameters.values())


def _parsed(name: str, value: Any) -> Any:
    if value is None or value == ():
        return value
    return parse_size(value) if name in SIZES else parse_duration(value) \
        if name in DURATIONS else value


@pytest.mark.parametrize("name", sorted(set(CLI) & set(API)))
def test_defaults_agree(name: str) -> None:
    """The API's default is the flag's; ``None`` means the configuration's default (and
    the PYDISTCP_* variable), which must then be the flag's default too."""
    cli = CLI[name].get_default(click.Context(copy_command), call=True)
    cli = None if isinstance(cli, enum.Enum) else cli  # click's UNSET: no default
    cli = tuple(cli or ()) if CLI[name].multiple else cli
    cli = False if CLI[name].is_flag and not cli else cli
    api = API[name].default
    if api is None and cli == ():  # a mapping (conf): None is the empty one
        return
    if api is None and cli is not None:
        field = {f.name: f for f in fields(CopyConfiguration)}[name]
        assert _parsed(name, cli) == field.default, name
    else:
        assert _parsed(name, api) == _parsed(name, cli), name


@pytest.mark.parametrize("name", sorted(n for n in set(CLI) & set(API)
                                        if isinstance(CLI[n].type, click.Choice)))
def test_choices_agree(name: str) -> None:
    choices = set(typing.cast(click.Choice, CLI[name].type).choices)
    arms = typing.get_args(HINTS[name]) if typing.get_origin(HINTS[name]) is not typing.Literal \
        else (HINTS[name],)
    literal = {a for arm in arms if typing.get_origin(arm) is typing.Literal
               for a in typing.get_args(arm)}
    assert choices <= literal, (name, choices - literal)
    assert literal <= choices, (name, literal - choices)


def test_comparison_flags_are_booleans_and_compare_still_works() -> None:
    assert configuration_options({"checksum": True})["compare"] == "checksum"
    assert configuration_options({"size_only": True})["compare"] == "size-only"
    assert configuration_options({"ignore_existing": True})["compare"] == "ignore-existing"
    assert configuration_options({"compare": "size-only"})["compare"] == "size-only"
    opts = configuration_options({"overwrite": True, "checksum": False})
    assert opts["overwrite"] is True and opts["compare"] == "default"
    with pytest.raises(distcp.ConfigurationError,
                       match=r"^checksum=True and size_only=True are mutually exclusive$"):
        configuration_options({"checksum": True, "size_only": True})
    with pytest.raises(distcp.ConfigurationError,
                       match=r"^overwrite=True and compare='checksum' are mutually exclusive$"):
        configuration_options({"overwrite": True, "compare": "checksum"})


def test_values_are_normalised_and_named_in_errors() -> None:
    opts = configuration_options({"split_size": "256M", "recovery_retention": "2h",
                                  "include": "*.csv", "convert": ["gunzip"],
                                  "conf": {"spark.x": "1"}, "dataset_glob": None})
    assert opts["split_size"] == 256 << 20 and opts["recovery_retention"] == 7200.0
    assert opts["include"] == ("*.csv",) and opts["converters"] == ("gunzip",)
    assert opts["spark_conf"] == {"spark.x": "1"} and "dataset_glob" not in opts
    with pytest.raises(distcp.ConfigurationError,
                       match=r"^buffer_size: not a size: '12Q' \(examples"):
        configuration_options({"buffer_size": "12Q"})
    with pytest.raises(distcp.ConfigurationError, match=r"^conf: a mapping of key to value"):
        configuration_options({"conf": ["spark.x=1"]})


def test_a_bad_value_is_a_configuration_error_before_spark(tmp_path: Path) -> None:
    with pytest.raises(distcp.ConfigurationError,
                       match=r"^bad option value: invalid literal for int\(\) with base 10: "
                             r"'two'$"):
        distcp.copy(str(tmp_path), str(tmp_path / "out"),
                    parallelism=typing.cast(int, "two"))
    with pytest.raises(distcp.ConfigurationError, match=r"^--tasks must be at least 1$"):
        distcp.copy(str(tmp_path), str(tmp_path / "out"), tasks=0)
    assert not (tmp_path / "out").exists()


def test_old_spellings_warn_and_still_reach_the_configuration(tmp_path: Path) -> None:
    # --split-size with a converter is refused when the configuration is built: so the
    # ConfigurationError proves that converters= arrived there as the converter chain.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(distcp.ConfigurationError, match="--split-size cannot be used with "
                                                            "--convert"):
            distcp.copy(str(tmp_path), str(tmp_path / "o"), converters=["gunzip"],
                        split_size="1M")
    assert [w.category for w in caught] == [DeprecationWarning]
    assert str(caught[0].message) == "distcp.copy(converters=...) is deprecated; use convert=..."
    assert caught[0].filename == __file__  # points at the caller's line
    with pytest.raises(distcp.ConfigurationError, match=r"^give conf= or spark_conf=, not both$"), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        distcp.copy(str(tmp_path), str(tmp_path / "o"), conf={"a": "1"},
                        spark_conf={"b": "2"})


def test_cores_is_the_parallelism_flag_and_its_old_name_still_works() -> None:
    for flag in ("--cores", "--parallelism"):
        ctx = copy_command.make_context("copy", [flag, "3", "/src", "/dst"])
        assert ctx.params["parallelism"] == 3
    with pytest.raises(click.BadParameter):
        copy_command.make_context("copy", ["--cores", "0", "/src", "/dst"])
