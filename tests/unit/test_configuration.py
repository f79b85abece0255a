"""Configuration parsing and validation."""

from __future__ import annotations

import pytest

from distcp.configuration import CopyConfiguration, parse_key_values, parse_size
from distcp.errors import ConfigurationError, PluginError
from distcp.registry import CONVERTERS, Registry


@pytest.mark.parametrize("text, value", [("1048576", 1 << 20), ("64K", 64 << 10),
                                          ("256M", 256 << 20), ("2G", 2 << 30), ("1.5k", 1536),
                                          ("8MiB", 8 << 20)])
def test_sizes_parse_as_binary_multiples(text: str, value: int) -> None:
    assert parse_size(text) == value


def test_bad_size_names_the_text() -> None:
    with pytest.raises(ConfigurationError, match="not a size: '12Q'"):
        parse_size("12Q")


def test_key_values_need_an_equals_sign() -> None:
    assert parse_key_values(("a=1", "b=x=y"), "--conf") == {"a": "1", "b": "x=y"}
    with pytest.raises(ConfigurationError, match="--conf takes key=value, got 'oops'"):
        parse_key_values(("oops",), "--conf")


def test_preserve_letters_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="not 'z'"):
        CopyConfiguration.build(["/a"], "/b", preserve="ptz")


def test_visibility_is_file_or_file_set() -> None:
    assert CopyConfiguration.build(["/a"], "s3://b/k").visibility == "file-set"
    assert CopyConfiguration.build(["/a"], "s3://b/k", visibility="file").visibility == "file"
    with pytest.raises(ConfigurationError, match="--visibility must be file or file-set, "
                                                 "not 'object'"):
        CopyConfiguration.build(["/a"], "s3://b/k", visibility="object")


def test_unknown_option_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="unknown option.*colour"):
        CopyConfiguration.build(["/a"], "/b", colour="red")


def test_environment_fills_unset_options_but_explicit_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYDISTCP_MASTER", "local[1]")
    monkeypatch.setenv("PYDISTCP_GPG_PASSPHRASE", "s3cret")
    cfg = CopyConfiguration.build(["/a"], "/b")
    assert cfg.master == "local[1]"
    assert cfg.converter_options.gpg_passphrase == "s3cret"
    assert "s3cret" not in repr(cfg)
    assert CopyConfiguration.build(["/a"], "/b", master="local[2]").master == "local[2]"


def test_registry_lists_known_names_for_unknown_plugin() -> None:
    reg: Registry = Registry("things", "x:Y")
    reg.register("alpha", "distcp.model:FileStatus")
    with pytest.raises(PluginError, match="unknown things plugin 'beta'; known: alpha"):
        reg.get("beta")
    with pytest.raises(PluginError, match="already registered"):
        reg.register("alpha", "distcp.model:WorkUnit")
    assert reg.get("alpha").__name__ == "FileStatus"


def test_registry_reports_a_plugin_that_does_not_import() -> None:
    reg: Registry = Registry("things", "x:Y")
    reg.register("broken", "no_such_module_here:Thing")
    with pytest.raises(PluginError, match="cannot be imported"):
        reg.get("broken")
    with pytest.raises(PluginError, match="pydistcp.converters"):
        CONVERTERS.get("no-such-converter")


def test_a_local_driver_jvm_leaves_the_cores_to_the_copy_unless_the_user_says(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from distcp.spark.jvm import LOCAL_DRIVER_JVM, base_conf

    log = str(tmp_path / "spark.log")
    local = base_conf(log, str(tmp_path), "local[2]")["spark.driver.extraJavaOptions"]
    assert LOCAL_DRIVER_JVM in local and "-Dlog4j.configurationFile=" in local
    cluster = base_conf(log, str(tmp_path), "spark://h:7077")["spark.driver.extraJavaOptions"]
    assert LOCAL_DRIVER_JVM not in cluster  # a cluster driver may do real JVM work
