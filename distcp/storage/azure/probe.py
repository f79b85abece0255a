"""Why an Azure container cannot be used, in one line a user can act on (driver).

The preflight asks each Azure URL's storage for the properties of its container
before Spark starts; what that raised (the SDK's error, or adlfs's ValueError when no
account is set) is worded here: no credentials, refused, no such container, or the
endpoint unreachable, with the setting to fix.
"""

from __future__ import annotations

from distcp.errors import CredentialsError, DistcpError, EndpointUnreachableError, PlanningError
from distcp.storage import filesystems as fsutil

#: Azure's standard environment, named in the errors' advice.
ENVIRONMENT = ("AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT_NAME with "
               "AZURE_STORAGE_ACCOUNT_KEY")
#: Error codes of a request Azure refused for its credentials or rights.
_REFUSED = {"AuthenticationFailed", "AuthorizationFailure", "AuthorizationPermissionMismatch",
            "InvalidAuthenticationInfo", "NoAuthenticationInformation"}


def probe_problem(exc: BaseException, url: str, container: str, setting: str) -> DistcpError:
    """The error to raise for ``exc``, the look at ``container`` for ``url``."""
    where = fsutil.display(url)
    name = type(exc).__name__
    code = str(getattr(exc, "error_code", "") or "")
    advice = f"{setting} or {ENVIRONMENT}"
    if isinstance(exc, ValueError) and "account" in str(exc).lower():
        return CredentialsError(f"{where}: no Azure account or credentials found; set "
                                f"them with {advice}", path=where)
    status = getattr(exc, "status_code", None)
    if name == "ClientAuthenticationError" or code in _REFUSED or status in (401, 403):
        return CredentialsError(f"{where}: Azure refused the credentials or access to "
                                f"container {container} ({code or _short(exc)}); fix them "
                                f"with {advice}", path=where)
    if name == "ResourceNotFoundError" or code == "ContainerNotFound" or status == 404:
        return PlanningError(f"{where}: no such container: {container}", path=where)
    return EndpointUnreachableError(f"{where}: Azure endpoint unreachable ({_short(exc)}); "
                                    f"check the account's endpoint in {advice}", path=where)


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:200] if text else type(exc).__name__
