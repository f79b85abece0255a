"""Small GCS objects read from one thread, pipelined on kept connections (executor).

Each object read through Google's SDK costs the client 2-3 ms of CPU, where rclone's Go
client sends the same GET: GCS -> local of 20,000 objects of 64 B on fake-gcs-server
took 57.2 s against rclone's 10.35 s (5.5x, 2026-12-04, ``bench_stores.py``). Here
each object is one media GET of its listed generation,
``/download/storage/v1/b/BUCKET/o/NAME?alt=media&generation=G`` (the URL the SDK
itself downloads from), written by hand and sent with the others through
``distcp.storage.http.pipelined``, as S3's small objects are
(``distcp.storage.s3.inflight``).

An answer is taken only when it is a ``200`` whose ``x-goog-generation`` is the one
asked for and whose bytes are the stored ones (no ``Content-Encoding``, stored as
``identity``: GCS would otherwise decompress on the way). Anything else, and every
object whose listed version is an ETag rather than a generation, gives None: the
caller reads it its usual way (``GcsStorage.read_version``, through the SDK), which
knows every retry and error.

The requests go where the SDK's client sends, with what it sends (``gcs/endpoint.py``:
not at all where the environment names a proxy); a token that expires meanwhile is
answered 401, and those objects go the usual way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from distcp.storage.gcs import endpoint
from distcp.storage.http.pipelined import Request, request
from distcp.storage.http.wire import Answer

#: GETs pipelined on each of the endpoint's kept connections, as S3's.
GET_DEPTH = 4


def fetch(options: dict[str, Any], wanted: Sequence[tuple[str, str]]
          ) -> Iterator[tuple[int, bytes | None]] | None:
    """Each ``(bucket/name, generation)`` of ``wanted`` read with one GET of that
    generation: yields ``(index, bytes)`` as the answers come, every index once, None
    where this way did not read it (module docstring). None at once where this way
    cannot send at all (``endpoint.endpoint``)."""
    at = endpoint.endpoint(options)
    if at is None:
        return None
    prefix = f"{at.root}/download/storage/v1"

    def requests() -> Iterator[Request]:
        for index, (path, generation) in enumerate(wanted):
            yield index, request(
                "GET", at.netloc, f"{prefix}{endpoint.name(path)}?alt=media"
                f"&generation={generation}{at.paying()}",
                at.headers) if generation.isdigit() else None

    def read() -> Iterator[tuple[int, bytes | None]]:
        for index, answer in endpoint.send(at, len(wanted), requests(), GET_DEPTH):
            yield index, answer.data if answer is not None \
                and _stored(answer, wanted[index][1]) else None

    return read()


def _stored(answer: Answer, generation: str) -> bool:
    """Whether ``answer`` holds the stored bytes of ``generation``."""
    got = answer.headers
    return answer.status == 200 and got.get("x-goog-generation") == generation \
        and got.get("content-encoding", "identity") == "identity" \
        and got.get("x-goog-stored-content-encoding", "identity") == "identity"
