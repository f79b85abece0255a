"""pydistcp: distcp-style file replication on Spark.

The public API is ``copy``; the CLI (``pydistcp copy``) is a thin layer over it.
Importing this package imports neither Spark nor any plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distcp.callbacks import Callback
    from distcp.summary import Summary

__all__ = ["__version__", "copy"]
__version__ = "0.1.0"


def copy(sources: str | list[str] | tuple[str, ...], destination: str, *,
         callback: Callback | None = None, **options: Any) -> Summary:
    """Copy ``sources`` to ``destination`` as a Spark job and return the Summary.

    Options are the CLI's long flags with underscores (``overwrite=True``,
    ``dataset_glob="*/tables/*"``, ``converters=["gunzip"]``, ``src_options={...}``).
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
    cfg = CopyConfiguration.build(list(sources), destination, **options)
    return run_copy(cfg, callback or DEFAULT_CALLBACK)
