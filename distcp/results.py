"""How executors build TaskResults: the fields one file's results share, and failures.

Every per-file failure travels as a failed TaskResult (Spark would carry an
exception only as a traceback string); this module is the one place that turns an
exception into one, so that every stage (whole files, ranges, joins) reports the
same way: a CopyError's own message, else the file, the exception's type and text.
"""

from __future__ import annotations

from dataclasses import replace

from distcp.errors import CopyError
from distcp.fs import display
from distcp.model import TaskResult


def failed(result: TaskResult, exc: BaseException, *, retryable: bool = False,
           doing: str = "") -> TaskResult:
    """``result`` as the failure ``exc`` caused.

    ``retryable`` is the default for exceptions that do not say (a CopyError does);
    ``doing`` names the step for an exception whose text does not (``"cannot join its
    ranges: "``). A CopyError's message already names the file and the cause.
    """
    if isinstance(exc, CopyError):
        message = str(exc)
    else:
        message = f"{display(result.origin)}: {doing}{type(exc).__name__}: {exc}"
    return replace(result, status="failed", error_type=type(exc).__name__, message=message,
                   retryable=getattr(exc, "retryable", retryable))
