"""Why a GCS bucket cannot be used, in one line a user can act on (driver).

The preflight asks each GCS URL's storage for its bucket before Spark starts; what
that raised (Google's auth library finding no credentials or a bad key file, the API's
401/403/404, a connection refused) is worded here with the setting to fix.
"""

from __future__ import annotations

from distcp.errors import CredentialsError, DistcpError, EndpointUnreachableError, PlanningError
from distcp.storage import filesystems as fsutil

#: Google's standard environment, named in the errors' advice.
ENVIRONMENT = "GOOGLE_APPLICATION_CREDENTIALS (or STORAGE_EMULATOR_HOST for an emulator)"


def probe_problem(exc: BaseException, url: str, bucket: str, setting: str) -> DistcpError:
    """The error to raise for ``exc``, the look at ``bucket`` for ``url``."""
    where = fsutil.display(url)
    name = type(exc).__name__
    advice = f"{setting} (token) or {ENVIRONMENT}"
    code = getattr(exc, "code", None)
    if name in ("DefaultCredentialsError", "RefreshError"):
        return CredentialsError(f"{where}: no usable Google credentials ({_short(exc)}); "
                                f"set them with {advice}", path=where)
    if name in ("Unauthorized", "Forbidden") or code in (401, 403):
        return CredentialsError(f"{where}: GCS refused the credentials or access to bucket "
                                f"{bucket} ({_short(exc)}); fix them with {advice}",
                                path=where)
    if name == "NotFound" or code == 404:
        return PlanningError(f"{where}: no such bucket: {bucket}", path=where)
    if isinstance(exc, (ValueError, FileNotFoundError)) and "json" in str(exc).lower():
        return CredentialsError(f"{where}: unreadable Google credentials ({_short(exc)}); "
                                f"fix them with {advice}", path=where)
    return EndpointUnreachableError(f"{where}: GCS endpoint unreachable ({_short(exc)}); "
                                    f"check endpoint_url in {setting} or "
                                    "STORAGE_EMULATOR_HOST", path=where)


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:200] if text else type(exc).__name__
