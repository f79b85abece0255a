"""Why an S3 bucket cannot be used, in one line a user can act on (driver).

The preflight asks each S3 URL's storage for one HEAD of its bucket before Spark
starts; what that request raised (botocore's exception, or the OSError s3fs made of
it, the original kept as cause or context) is classified here by class name and
error code, so the user hears "no credentials", "refused", "no such bucket" or
"endpoint unreachable" with the setting to fix, not a library's traceback.
"""

from __future__ import annotations

import re

from distcp.driver_errors import CREDENTIAL_CODES
from distcp.errors import CredentialsError, DistcpError, EndpointUnreachableError, PlanningError
from distcp.storage import filesystems as fsutil


def probe_problem(exc: BaseException, url: str, bucket: str, setting: str) -> DistcpError:
    """The error to raise for ``exc``, the HEAD of ``bucket`` for ``url``; ``setting``
    names where the user sets this storage's options."""
    chain = [exc, exc.__cause__, exc.__context__]
    names = {type(e).__name__ for e in chain if e is not None}
    text = " ".join(str(e) for e in chain if e is not None)
    where = fsutil.display(url)
    if names & {"NoCredentialsError", "PartialCredentialsError"}:
        return CredentialsError(f"{where}: no S3 credentials found; set them with {setting}",
                                path=where)
    if "ProfileNotFound" in names:
        return CredentialsError(f"{where}: {_short(text)}; fix AWS_PROFILE or {setting}",
                                path=where)
    words = set(re.findall(r"\w+", text))  # whole words: port 55403 is no HTTP 403
    if any(code in words or code in names for code in CREDENTIAL_CODES) or isinstance(
            exc, PermissionError):
        return CredentialsError(f"{where}: S3 refused the credentials or access to bucket "
                                f"{bucket} ({_short(text)}); fix them with {setting}",
                                path=where)
    if words & {"NoSuchBucket", "404"} or isinstance(exc, FileNotFoundError):
        return PlanningError(f"{where}: no such bucket: {bucket}", path=where)
    return EndpointUnreachableError(f"{where}: S3 endpoint unreachable ({_short(text)}); "
                                    f"check endpoint_url in {setting}", path=where)


def _short(text: str) -> str:
    return text.splitlines()[0][:200] if text else "no detail"
