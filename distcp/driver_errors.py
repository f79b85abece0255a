"""Storage failures turned into the DistcpError a user can act on (driver).

Listing, planning, preflight and state reads run on the driver; when a storage
refuses them, boto's exception (or the OSError s3fs made of it, the ClientError
kept as its cause or context) would reach the caller as a bare library error. The
public functions (``distcp.copy``, ``status``, ``recover``, ``cleanup``) run inside
``driver_errors()`` so a caller catches ``distcp.CredentialsError`` or
``distcp.EndpointUnreachableError`` instead, with the fix in the message. Failures
inside Spark tasks never get here: they are per-file results in the Summary.

Exceptions are recognised by class name along the chain, so this module imports
neither botocore nor s3fs (``import distcp`` stays light).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from distcp.errors import CredentialsError, DistcpError, EndpointUnreachableError

#: S3 error codes that mean "these credentials may not do this" (a HEAD answers a bare 403).
CREDENTIAL_CODES = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied",
                    "InvalidToken", "ExpiredToken", "403")
_MISSING = ("NoCredentialsError", "PartialCredentialsError")
_UNREACHABLE = ("EndpointConnectionError", "ConnectTimeoutError", "ConnectTimeout")
_SETTING = ("the storage options (src_options / dst_options; --src-option / --dst-option "
            "on the command line) or the AWS_* variables")


def storage_problem(exc: BaseException, where: str | None = None) -> DistcpError | None:
    """The DistcpError for a credentials or endpoint failure anywhere in ``exc``'s
    chain, or None when it is something else (which then propagates unchanged).
    ``where`` (the URL the command was about) starts the message when given."""
    problem = _classify(exc)
    if problem is not None and where:
        return type(problem)(f"{where}: {problem.message}", path=where)
    return problem


def _classify(exc: BaseException) -> DistcpError | None:
    for link in _chain(exc):
        name = type(link).__name__
        if name in _MISSING:
            return CredentialsError(f"no S3 credentials found ({_short(link)}); set them with "
                                    f"{_SETTING}")
        # botocore's ClientError, or the lean wire's PermissionError, which carries its code
        if (name == "ClientError" or isinstance(link, PermissionError)) and \
                _code(link) in CREDENTIAL_CODES:
            return CredentialsError(f"S3 refused the credentials or access ({_short(link)}); "
                                    f"fix them with {_SETTING}")
        if name in _UNREACHABLE:
            return EndpointUnreachableError(f"S3 endpoint unreachable ({_short(link)}); check "
                                            f"endpoint_url in {_SETTING}")
    return None


@contextmanager
def driver_errors(where: str | None = None) -> Iterator[None]:
    """Re-raise a storage's credentials or endpoint failure as ours (its message
    starting with ``where`` when given); leave our own errors, Ctrl-C and everything
    unrecognised as they are."""
    try:
        yield
    except DistcpError:
        raise
    except Exception as exc:
        problem = storage_problem(exc, where)
        if problem is None:
            raise
        raise problem from exc


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        link = todo.pop(0)
        if id(link) in seen:
            continue
        seen.add(id(link))
        yield link
        todo += [e for e in (link.__cause__, link.__context__) if e is not None]


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:200] if text else type(exc).__name__
