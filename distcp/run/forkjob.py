"""A job file of several ``[[branches]]``, run as one fork (driver).

Each branch's configuration is built exactly as ``distcp.copy`` builds a plain copy's
(one model, one set of defaults).
"""

from __future__ import annotations

from typing import Any

from distcp.callbacks import DEFAULT_CALLBACK, Callback
from distcp.configuration import CopyConfiguration
from distcp.errors import ConfigurationError
from distcp.fork.branches import Branch, Route, settings_of
from distcp.jobs.model import Job
from distcp.options import configuration_options
from distcp.summary import Summary


def fork_job(job: Job, *_: Any, callback: Callback = DEFAULT_CALLBACK,
             **run_options: Any) -> Summary:
    """Run ``job``'s branches as one fork; ``run_options`` are branch 0's keywords (the
    run's own settings, already in each branch's; the signature is ``distcp.copy``'s
    so the CLI reports both alike)."""
    from distcp import _write_summary
    from distcp.driver_errors import driver_errors
    from distcp.run.pipeline import run_branches

    branches = tuple(_branch(job, n) for n in range(len(job.branches)))
    with driver_errors():
        summary = run_branches(branches, settings_of(branches[0].cfg), callback)
    _write_summary(summary, run_options.get("summary_json"))
    return summary


def _branch(job: Job, index: int) -> Branch:
    sources, destination, options = job.copy_arguments(index)
    chosen = job.branches[index]
    route = Route(globs=tuple(chosen.options.get("route_glob", ())),
                  min_size=chosen.options.get("route_min_size"),
                  max_size=chosen.options.get("route_max_size"),
                  datasets=tuple(chosen.options.get("route_dataset", ())))
    try:
        cfg = CopyConfiguration.build(sources, destination, **configuration_options(options))
    except ConfigurationError as exc:
        raise ConfigurationError(f"{job.path}: branch {chosen.name!r}: {exc}") from None
    return Branch(chosen.name, cfg, route)
