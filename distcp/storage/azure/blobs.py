"""Azure's SDK behind the backend: clients, blob names, block ids (driver and executor).

adlfs answers listings and reads through its own asynchronous client; staging blocks,
committing block lists and conditional reads use the SDK's synchronous client, built
from the same credentials adlfs resolved (its options, else Azure's standard
environment: ``AZURE_STORAGE_CONNECTION_STRING`` or ``AZURE_STORAGE_ACCOUNT_NAME`` with
``AZURE_STORAGE_ACCOUNT_KEY`` or ``AZURE_STORAGE_SAS_TOKEN``).
"""

from __future__ import annotations

import base64
import threading
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import BlobClient, BlobServiceClient

from distcp.storage.watchdog import watchdog_seconds

#: Seconds to connect and to wait for an answer: a silent server must not hang a run.
CONNECT_TIMEOUT = 20
READ_TIMEOUT = 120
#: Azure allows 50,000 blocks of up to 4,000 MiB a blob; blocks are sized like S3's parts
#: (at least 5 MiB, whole MiB, at most 10,000 of them), well inside both limits.
MAX_BLOCKS = 50_000

_clients: dict[int, tuple[Any, BlobServiceClient]] = {}
_lock = threading.Lock()


def service(fs: Any) -> BlobServiceClient:
    """The synchronous client of the account ``fs`` (an adlfs filesystem) talks to,
    built once per filesystem from the credentials it resolved."""
    known = _clients.get(id(fs))
    if known is not None and known[0] is fs:
        return known[1]
    with _lock:
        client = _build(fs)
        _clients[id(fs)] = (fs, client)
    return client


def probe_service(fs: Any) -> BlobServiceClient:
    """A client that sends each request once: the preflight's one look at a container
    must answer in seconds (the SDK's retries back off for about a minute)."""
    return _build(fs, retry_total=0)


def _build(fs: Any, **extra: Any) -> BlobServiceClient:
    # a request waits at most the run's bound (PYDISTCP_S3_TIMEOUT, the name users know
    # from S3): a server that takes the connection and never answers is given up then
    bound = watchdog_seconds()
    settings = {"connection_timeout": min(CONNECT_TIMEOUT, bound),
                "read_timeout": min(READ_TIMEOUT, bound), **extra}
    if fs.connection_string:
        return BlobServiceClient.from_connection_string(fs.connection_string, **settings)
    if not fs.account_name:
        raise ValueError("no Azure account: set AZURE_STORAGE_CONNECTION_STRING or "
                         "AZURE_STORAGE_ACCOUNT_NAME (with a key or SAS token)")
    host = getattr(fs, "account_host", None) or f"{fs.account_name}.blob.core.windows.net"
    url = f"https://{host}"
    credential: Any = None
    if fs.account_key:
        credential = {"account_name": fs.account_name, "account_key": fs.account_key}
    elif fs.sas_token:
        credential = fs.sas_token.lstrip("?")
    return BlobServiceClient(url, credential=credential, **settings)


def container_blob(fs: Any, url: str) -> tuple[str, str]:
    """The container and blob name of ``url`` (``az://c/p``, ``abfs://c/p`` or
    ``abfs://c@account.dfs.core.windows.net/p``)."""
    path = fs._strip_protocol(url)
    container, _, name = path.partition("/")
    return container, name


def account_in(url: str) -> str:
    """The account an ``abfs://container@account.dfs.core.windows.net/...`` URL names
    (lower case), or "" where the URL leaves it to the credentials (``az://c/p``)."""
    netloc = url.partition("://")[2].partition("/")[0]
    host = netloc.partition("@")[2]
    return host.partition(".")[0].lower()


def blob(fs: Any, url: str) -> BlobClient:
    container, name = container_blob(fs, url)
    return service(fs).get_blob_client(container, name)


#: The upload id of an empty file staged to keep its mtime: it has no blocks.
EMPTY_UPLOAD = "0" * 32


def blocks_key(upload_id: str) -> str:
    """What of a staging's upload id its block ids carry: an id may end in
    ``.<nanoseconds>``, the mtime its commit keeps (``with_mtime``), never in a block."""
    return upload_id.partition(".")[0]


def with_mtime(upload_id: str, mtime_ns: int) -> str:
    """``upload_id`` carrying the mtime its commit writes as the blob's metadata: the
    staging's text (task result, commit log) takes it to the driver's publish."""
    return f"{blocks_key(upload_id)}.{mtime_ns}"


def mtime_in(upload_id: str) -> int | None:
    """The mtime (nanoseconds) ``upload_id`` carries, or None."""
    kept = upload_id.partition(".")[2]
    return int(kept) if kept.lstrip("-").isdigit() else None


def block_id(upload_id: str, number: int) -> str:
    """The id of block ``number`` of one staging: every id of a blob has one length, and
    the upload id in it tells one staging's blocks from another's on the same blob."""
    return base64.b64encode(f"{blocks_key(upload_id)}-{number:06d}".encode()).decode()


def block_number(upload_id: str, block: str) -> int | None:
    """The number of ``block`` if it is one of ``upload_id``'s blocks, else None."""
    try:
        text = base64.b64decode(block).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    head, _, number = text.rpartition("-")
    return int(number) if head == blocks_key(upload_id) and number.isdigit() else None


def upload_of(block: str) -> str | None:
    """The upload id a block id of ours names, None for another writer's block."""
    try:
        head, _, number = base64.b64decode(block).decode().rpartition("-")
    except (ValueError, UnicodeDecodeError):
        return None
    return head if head and len(number) == 6 and number.isdigit() else None


def uncommitted(client: BlobClient) -> list[Any]:
    """The blob's uncommitted blocks (``id``, ``size``); none when there is no blob."""
    try:
        return list(client.get_block_list("uncommitted")[1])
    except ResourceNotFoundError:
        return []


def committed_exists(client: BlobClient) -> bool:
    """Whether a committed blob is at the name (uncommitted blocks alone are none)."""
    try:
        client.get_blob_properties()
    except ResourceNotFoundError:
        return False
    return True
