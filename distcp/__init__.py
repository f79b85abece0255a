"""pydistcp: distcp-style file replication on Spark.

The public API is ``copy``; the CLI (``pydistcp copy``) is a thin layer over it.
Importing this package imports neither Spark nor any plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from distcp.errors import (
    ConfigurationError,
    ConversionError,
    CopyError,
    CredentialsError,
    DestinationBusyError,
    DestinationNotWritableError,
    DestinationWriteError,
    DistcpError,
    DuplicateDestinationError,
    EndpointUnreachableError,
    EnvironmentProblem,
    IntegrityError,
    JavaMissingError,
    PlanningError,
    PluginError,
    PublishError,
    SourceReadError,
    SparkUnavailableError,
    StateError,
)
from distcp.summary import Failure, Summary

if TYPE_CHECKING:
    from distcp.callbacks import Callback

# The result and error types are light modules (no Spark, no plugin), so they are
# exported eagerly: users catch ``distcp.DistcpError`` and annotate with ``distcp.Summary``.
__all__ = [
    "ConfigurationError", "ConversionError", "CopyError", "CredentialsError",
    "DestinationBusyError", "DestinationNotWritableError", "DestinationWriteError", "DistcpError",
    "DuplicateDestinationError", "EndpointUnreachableError", "EnvironmentProblem", "Failure",
    "IntegrityError", "JavaMissingError", "PlanningError", "PluginError", "PublishError",
    "SourceReadError", "SparkUnavailableError", "StateError", "Summary", "__version__", "copy",
    "recover", "status",
]
__version__ = "0.1.0"


def copy(sources: str | list[str] | tuple[str, ...], destination: str, *,
         callback: Callback | None = None, **options: Any) -> Summary:
    """Copy ``sources`` to ``destination`` as a Spark job and return the Summary.

    Options are the CLI's long flags with underscores (``overwrite=True``,
    ``dataset_glob="*/tables/*"``, ``convert=["gunzip"]``, ``conf={...}``,
    ``gpg_recipient=[...]``); ``src_options``/``dst_options`` are mappings and
    ``progress=False`` is the CLI's ``--no-progress``.
    An active SparkSession is used and left running; otherwise one is started
    with ``master`` (default ``local[*]``) and stopped at the end. Raises
    ``DistcpError`` subclasses for bad configuration or plans; per-file failures
    are reported in the summary (``summary.ok`` is False).
    """
    from distcp.callbacks import DEFAULT_CALLBACK
    from distcp.configuration import CopyConfiguration
    from distcp.spark.job import run_copy

    if isinstance(sources, str):
        sources = [sources]
    cfg = CopyConfiguration.build(list(sources), destination, **_configuration_names(options))
    return run_copy(cfg, callback or DEFAULT_CALLBACK)


def status(destination: str | None = None, *, state_dir: str | None = None,
           dst_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return the report ``pydistcp status --json`` prints (the CLI calls this)."""
    from distcp.inspect import existing_state_root, status_report

    options = dict(dst_options or {})
    return status_report(existing_state_root(destination, state_dir, options)[0], options)


def recover(destination: str | None = None, *, state_dir: str | None = None,
            dst_options: dict[str, Any] | None = None, max_replays: int = 3) -> Summary:
    """Finish earlier runs' pending commits, copying nothing new (``pydistcp recover``)."""
    from distcp.inspect import existing_state_root, recover_only

    options = dict(dst_options or {})
    return recover_only(existing_state_root(destination, state_dir, options)[0], options,
                        max_replays)


# The CLI's names -> CopyConfiguration's fields, in one place. The old spellings are
# accepted for one release with a DeprecationWarning, since earlier docs showed them.
_CLI_NAMES = {"convert": "converters", "conf": "spark_conf", "gpg_recipient": "gpg_recipients"}


def _configuration_names(options: dict[str, Any]) -> dict[str, Any]:
    """Rename the CLI-named keywords to configuration fields; warn on the old spellings."""
    import warnings

    out = dict(options)
    for cli, field in _CLI_NAMES.items():
        if field in out:
            warnings.warn(f"distcp.copy({field}=...) is deprecated; use {cli}=...",
                          DeprecationWarning, stacklevel=3)
        if cli in out:
            if field in out:
                raise ConfigurationError(f"give {cli}= or {field}=, not both")
            out[field] = out.pop(cli)
    return out
