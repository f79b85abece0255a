"""``distcp.copy``'s keyword parameters -> ``CopyConfiguration.build`` options (driver).

The API names its parameters after the CLI's long flags (``convert``, ``conf``,
``gpg_recipient``, ``checksum`` ...); the configuration has its own field names
and one ``compare`` mode. This module is the one place that maps the first onto
the second, so the API and the CLI cannot disagree. No Spark, no click.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from distcp.errors import ConfigurationError

#: API (= CLI flag) name -> CopyConfiguration field, where they differ. The field names
#: were the API's spellings before this release; they still work, with a DeprecationWarning.
CLI_NAMES = {"convert": "converters", "conf": "spark_conf", "gpg_recipient": "gpg_recipients"}
#: The CLI's comparison flags, mutually exclusive, and the compare mode each one means.
COMPARE_FLAGS = {"checksum": "checksum", "size_only": "size-only",
                 "ignore_existing": "ignore-existing"}
SIZES = ("buffer_size", "split_size", "max_expanded_bytes", "bwlimit", "min_size", "max_size")
DURATIONS = ("recovery_retention", "min_age", "max_age", "lookback", "fork_queue_timeout",
             "interval", "settle", "full_listing_every",
             "events_timeout")
LISTS = ("include", "exclude", "convert", "gpg_recipient", "check", "fork", "fork_convert")


def configuration_options(params: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword options for ``CopyConfiguration.build``, from ``distcp.copy``'s
    parameters. ``None`` means "not given": the ``PYDISTCP_*`` variable or the
    configuration's default applies, and an option this version's configuration
    does not know yet is refused only when it is given."""
    from distcp.configuration import parse_flag
    from distcp.quantities import parse_duration, parse_size

    opts = {k: v for k, v in params.items() if v is not None}
    _take_deprecated(opts)
    opts["compare"] = _compare(opts)
    for name in SIZES:
        if name in opts:
            opts[name] = parse_flag(parse_size, opts[name], name, label=name)
    for name in DURATIONS:
        if name in opts:
            opts[name] = parse_flag(parse_duration, opts[name], name, label=name)
    for name in LISTS:
        if name in opts:
            value = opts[name]
            opts[name] = (value,) if isinstance(value, str) else tuple(value)
    for name in ("conf", "src_options", "dst_options"):
        if name in opts:
            if not isinstance(opts[name], Mapping):
                raise ConfigurationError(f"{name}: a mapping of key to value is needed, "
                                         f"not {type(opts[name]).__name__}")
            opts[name] = dict(opts[name])
    renamed = {CLI_NAMES.get(k, k): v for k, v in opts.items()}
    _refuse_unknown(renamed)
    return renamed


def _take_deprecated(opts: dict[str, Any]) -> None:
    """Move an old spelling's value to the API name, with a DeprecationWarning."""
    for cli, field in CLI_NAMES.items():
        if field not in opts:
            continue
        warnings.warn(f"distcp.copy({field}=...) is deprecated; use {cli}=...",
                      DeprecationWarning, stacklevel=4)
        if opts.get(cli):  # convert=() and the like are the defaults: not given
            raise ConfigurationError(f"give {cli}= or {field}=, not both")
        opts[cli] = opts.pop(field)


def _compare(opts: dict[str, Any]) -> object:
    """The one comparison asked for: ``compare=`` or one of the CLI's flags (or
    ``overwrite``, which copies everything); two of them are a ConfigurationError.
    A ``compare=`` value is returned as given: CopyConfiguration checks it."""
    given = [f"{n}=True" for n in ("overwrite", *COMPARE_FLAGS) if opts.pop(n, False)]
    mode: object = opts.pop("compare", "default")
    if mode != "default":
        given.append(f"compare={mode!r}")
    if len(given) > 1:
        raise ConfigurationError(f"{given[0]} and {given[1]} are mutually exclusive")
    if given and given[0] == "overwrite=True":
        opts["overwrite"] = True
        return "default"
    flag = given[0].split("=", 1)[0] if given else ""
    return COMPARE_FLAGS.get(flag, mode)


def _refuse_unknown(opts: Mapping[str, Any]) -> None:
    """Options the API names before this version's configuration has them (other
    features land separately): refused when given, ignored while left unset."""
    from distcp.configuration import CopyConfiguration
    from distcp.converters.base import ConverterOptions

    known = {f.name for f in fields(CopyConfiguration)} | {f.name for f in fields(ConverterOptions)}
    unknown = sorted(set(opts) - known)
    if unknown:
        raise ConfigurationError(
            f"{', '.join(unknown)}: not supported by this version of pydistcp (leave unset)")
