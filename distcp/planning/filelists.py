"""Lists of source files the user has: ``--files-from`` and ``--files-from-manifest`` (driver).

Pure parsing: text lines or a manifest's bytes in, ``FilesFromEntry`` values out (a path
relative to the source root, with the size, mtime and ETag the manifest knows). No
filesystem is touched here; ``distcp.planning.filesfrom`` opens the lists and asks the
source about what a list leaves unknown.

Two inputs:

- ``--files-from``: one path a line, rclone's rules: surrounding whitespace trimmed,
  blank lines and lines starting with ``#`` or ``;`` skipped, a leading ``/`` means the
  source root; a path that climbs above the root (``..``) is refused, naming its line.
- ``--files-from-manifest``: an S3 Inventory-like report, CSV (gzip'd or not; no header
  row means the columns ``bucket,key[,size,last_modified_date,e_tag]``, a header row
  names them; keys URL-encoded, as Inventory writes CSV keys) or Parquet (columns
  ``bucket``, ``key`` and optionally ``size``, ``last_modified_date``, ``e_tag``). A row
  names ``<bucket>/<key>``, which must lie under the source; an empty bucket makes the
  key relative to the source root.

Both also come out as Arrow record batches of one schema (``files_from_schema()``), the
shape a later distributed listing or planning join takes as a DataFrame.
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any
from urllib.parse import unquote_plus

from distcp.errors import ConfigurationError

#: Column names (lower case, without ``_`` and spaces) -> our field. Inventory spells
#: them ``Bucket, Key, Size, LastModifiedDate, ETag`` in its manifest and
#: ``bucket, key, size, last_modified_date, e_tag`` in Parquet.
COLUMNS = {"bucket": "bucket", "key": "key", "size": "size", "lastmodifieddate": "mtime",
           "lastmodified": "mtime", "mtime": "mtime", "etag": "etag"}
#: A CSV without a header row: S3 Inventory's order when it lists these fields only.
POSITIONAL = ("bucket", "key", "size", "mtime", "etag")
#: Rows handed to pyarrow's readers per batch.
BATCH_ROWS = 65536


@dataclass(frozen=True, slots=True)
class FilesFromEntry:
    """One entry of a list: a path relative to the source root, and what the list
    says about the file (None: unknown, the source is asked)."""

    path: str
    #: Where the entry is, for messages: ``line 3`` or ``row 3``.
    where: str
    size: int | None = None
    mtime: float | None = None
    etag: str | None = None

    @property
    def known(self) -> bool:
        """The list gives size and mtime: planning needs no request to the source."""
        return self.size is not None and self.mtime is not None


def files_from_schema() -> Any:
    """The Arrow schema of a list, as ``as_batches`` writes it."""
    import pyarrow as pa

    return pa.schema([("path", pa.string()), ("where", pa.string()), ("size", pa.int64()),
                      ("mtime", pa.float64()), ("etag", pa.string())])


def as_batches(paths: Iterable[FilesFromEntry], rows: int = BATCH_ROWS) -> Iterator[Any]:
    """The entries as Arrow record batches of ``files_from_schema()``, ``rows`` at a time:
    what a Spark job takes (``createDataFrame`` of a table, or ``mapInArrow``)."""
    import pyarrow as pa

    schema = files_from_schema()
    chunk: list[FilesFromEntry] = []
    for p in paths:
        chunk.append(p)
        if len(chunk) == rows:
            yield _batch(pa, schema, chunk)
            chunk = []
    if chunk:
        yield _batch(pa, schema, chunk)


def _batch(pa: Any, schema: Any, chunk: Sequence[FilesFromEntry]) -> Any:
    columns = [[getattr(p, name) for p in chunk] for name in schema.names]
    return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in
                                       zip(columns, schema, strict=True)], schema=schema)


def from_batches(batches: Iterable[Any]) -> Iterator[FilesFromEntry]:
    """The entries of batches of ``files_from_schema()`` (the inverse of ``as_batches``)."""
    for batch in batches:
        for row in batch.to_pylist():
            yield FilesFromEntry(**row)


# --- --files-from ---------------------------------------------------------------------

def parse_lines(lines: Iterable[str], name: str) -> Iterator[FilesFromEntry]:
    """The paths of a ``--files-from`` list, first occurrence only, in list order.

    ``name`` is how errors name the list (``--files-from list.txt``)."""
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text[0] in "#;":
            continue
        path = normalise(text, f"{name} line {number}")
        if path not in seen:
            seen.add(path)
            yield FilesFromEntry(path, f"line {number}")


def normalise(text: str, where: str) -> str:
    """``/a/./b//c`` -> ``a/b/c``; ``a/../b`` -> ``b``; a path above the root (or the
    root itself) is a ConfigurationError naming ``where``."""
    parts: list[str] = []
    for part in text.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise ConfigurationError(f"{where}: {text!r} climbs above the source root "
                                         "('..'); list paths relative to SRC")
            parts.pop()
            continue
        parts.append(part)
    if not parts:
        raise ConfigurationError(f"{where}: {text!r} names the source root itself, not a "
                                 "file")
    return "/".join(parts)


# --- --files-from-manifest ------------------------------------------------------------

def manifest_format(head: bytes) -> str:
    """``parquet``, ``csv.gz``, ``json`` (an Inventory ``manifest.json``) or ``csv``, from
    the first bytes of the manifest."""
    if head.lstrip().startswith(b"{"):
        return "json"
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"\x1f\x8b"):
        return "csv.gz"
    return "csv"


def parse_manifest(stream: IO[bytes], name: str, root: str,
                   columns: Sequence[str] | None = None,
                   seen: set[str] | None = None) -> Iterator[FilesFromEntry]:
    """The entries of a manifest read from the seekable binary ``stream``.

    ``root`` is the source root as a path of its filesystem (``bucket/prefix`` on S3,
    ``/data/src`` locally). ``columns``: a CSV's column names when they are known from
    elsewhere (an Inventory ``manifest.json``'s ``fileSchema``). Duplicates are kept
    once (``seen``: across several files of one report)."""
    head = stream.read(4)
    stream.seek(0)
    kind = manifest_format(head)
    if kind == "json":
        raise ConfigurationError(f"{name}: an Inventory manifest.json lists data files; "
                                 "read it with inventory_files")
    names = column_names(columns) if columns is not None else None
    if columns is not None and names is None:
        raise ConfigurationError(f"{name}: fileSchema {', '.join(columns)} has no Bucket "
                                 "and Key")
    rows = _parquet_rows(stream, name) if kind == "parquet" else \
        _csv_rows(gzip.GzipFile(fileobj=stream) if kind == "csv.gz" else stream, name, names)
    prefix = root.strip("/")
    seen = set() if seen is None else seen
    for where, row in rows:
        entry = manifest_entry(row, prefix, f"{name} {where}", where)
        if entry.path not in seen:
            seen.add(entry.path)
            yield entry


def manifest_entry(row: dict[str, Any], prefix: str, shown: str, where: str) -> FilesFromEntry:
    """One manifest row (bucket, key, size, mtime, etag as read) -> a FilesFromEntry."""
    bucket, key = row.get("bucket") or "", row.get("key") or ""
    if not key:
        raise ConfigurationError(f"{shown}: no key")
    if bucket:
        full = f"{bucket}/{key}"
        if prefix and not full.startswith(prefix + "/"):
            raise ConfigurationError(f"{shown}: {full} is not under the source {prefix}; "
                                     "give SRC as the bucket (or prefix) the manifest lists")
        path = strict_key(full[len(prefix) + 1:] if prefix else full, shown)
    else:
        path = normalise(key, shown)
    return FilesFromEntry(path, where, _size(row.get("size"), shown),
                          _mtime(row.get("mtime"), shown), _etag(row.get("etag")))


def strict_key(rel: str, shown: str) -> str:
    """An object key as a relative path, unchanged: a key with an empty, ``.`` or ``..``
    part names an object no path can name (``a//b`` is not ``a/b``), so it is refused."""
    if any(part in ("", ".", "..") for part in rel.split("/")):
        raise ConfigurationError(f"{shown}: key {rel!r} has an empty, '.' or '..' part; no "
                                 "destination path can hold it")
    return rel


def _size(value: Any, shown: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        size = int(value)
    except (TypeError, ValueError):
        raise ConfigurationError(
            f"{shown}: size {value!r} is not a number (a CSV without a header row has the "
            "columns bucket,key,size,last_modified_date,e_tag; add a header row naming "
            "yours)") from None
    if size < 0:
        raise ConfigurationError(f"{shown}: negative size {size}")
    return size


def _mtime(value: Any, shown: str) -> float | None:
    """Epoch seconds from a timestamp, a number, or ISO 8601 text (``...T03:04:05.000Z``);
    a time without a zone is UTC, as Inventory's are."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return _utc(value).timestamp()
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return _utc(datetime.fromisoformat(str(value).strip())).timestamp()
    except ValueError:
        raise ConfigurationError(f"{shown}: last_modified_date {value!r} is not a time "
                                 "(ISO 8601 such as 2024-05-01T12:00:00.000Z, or epoch "
                                 "seconds)") from None


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _etag(value: Any) -> str | None:
    """In quotes, as S3 sends it in headers and listings (Inventory writes it bare)."""
    if value is None or value == "":
        return None
    text = str(value).strip()
    return text if text.startswith('"') else f'"{text}"'


def column_names(header: Sequence[str]) -> list[str] | None:
    """Our field for each cell of a header row, or None when the row is data."""
    names = [COLUMNS.get(cell.strip().lower().replace("_", "").replace(" ", ""), "")
             for cell in header]
    return names if "bucket" in names and "key" in names else None


def _csv_rows(stream: IO[bytes] | gzip.GzipFile, name: str, known: list[str] | None = None
              ) -> Iterator[tuple[str, dict[str, Any]]]:
    """(``line N``, row) of a CSV manifest; the first line decides header or data (unless
    the columns are ``known``), pyarrow reads the rest as text (never as numbers: a key
    ``007`` stays ``007``)."""
    first = stream.readline()
    if not first.strip():
        return
    cells = next(csv.reader([first.decode("utf-8")]))
    number = 1
    header = column_names(cells) if known is None else None
    names: list[str] = known if known is not None else header or \
        [*POSITIONAL, *("",) * len(cells)][:len(cells)]  # no header: Inventory's order
    if header is None:  # the first line is a row
        if len(cells) < 2 or len(cells) != len(names):
            raise ConfigurationError(f"{name} line 1: {len(cells)} column(s), expected "
                                     f"{max(len(names), 2) if known else 'bucket,key[,...]'}")
        yield "line 1", _decoded(dict(zip(names, cells, strict=True)))
    for batch in _arrow_csv(stream, len(names), name):
        for row in batch.to_pylist():
            number += 1
            values = dict(zip(names, row.values(), strict=True))
            yield f"line {number}", _decoded(values)


def _arrow_csv(stream: IO[bytes] | gzip.GzipFile, width: int, name: str) -> Iterator[Any]:
    import pyarrow as pa
    from pyarrow import csv as pacsv

    columns = [f"c{i}" for i in range(width)]
    try:
        reader = pacsv.open_csv(
            stream, read_options=pacsv.ReadOptions(column_names=columns,
                                                   block_size=1 << 20),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(columns, pa.string()), strings_can_be_null=False))
        yield from reader
    except pa.ArrowInvalid as exc:
        if str(exc).startswith("Empty CSV file"):  # the first line was the only one
            return
        raise ConfigurationError(f"{name}: not a manifest CSV of {width} columns: "
                                 f"{str(exc).splitlines()[0]}") from None


def _decoded(values: dict[str, Any]) -> dict[str, Any]:
    """CSV keys are URL-encoded by Inventory (``+`` for a space, ``%2B`` for ``+``)."""
    values.pop("", None)
    if values.get("key"):
        values["key"] = unquote_plus(values["key"])
    return values


def _parquet_rows(stream: IO[bytes], name: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(``row N``, row) of a Parquet manifest: its columns by name; keys verbatim."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(stream)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ConfigurationError(f"{name}: not a Parquet file: {exc}") from None
    wanted = {column: COLUMNS.get(column.lower().replace("_", ""), "") for column in
              parquet.schema_arrow.names}
    wanted = {column: field for column, field in wanted.items() if field}
    if "key" not in wanted.values():
        raise ConfigurationError(f"{name}: no 'key' column (a manifest has bucket, key and "
                                 "optionally size, last_modified_date, e_tag)")
    number = 0
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=list(wanted)):
        for row in batch.to_pylist():
            number += 1
            yield f"row {number}", {wanted[c]: v for c, v in row.items()}


def inventory_files(document: bytes, name: str) -> tuple[list[str], list[str] | None]:
    """The data files an S3 Inventory ``manifest.json`` lists (as ``s3://`` URLs) and,
    for CSV, its column names (``fileSchema``: a CSV report has no header row)."""
    import json

    try:
        doc = json.loads(document)
        fmt = str(doc["fileFormat"]).upper()
        bucket = str(doc["destinationBucket"]).rsplit(":", 1)[-1]
        keys = [str(f["key"]) for f in doc["files"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError(f"{name}: not an S3 Inventory manifest.json ({exc!r} "
                                 "missing or malformed)") from None
    if fmt not in ("CSV", "PARQUET"):
        raise ConfigurationError(f"{name}: {fmt} inventory reports are not read; "
                                 "configure the inventory as CSV or Parquet")
    columns = [c.strip() for c in str(doc.get("fileSchema", "")).split(",")] \
        if fmt == "CSV" else None
    return [f"s3://{bucket}/{key}" for key in keys], columns


def read_text(data: bytes) -> io.StringIO:
    """A list's bytes as text lines: UTF-8, with undecodable bytes kept (surrogateescape)
    so that a local file name in another encoding still names its file."""
    return io.StringIO(data.decode("utf-8", "surrogateescape"))
