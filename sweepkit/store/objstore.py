"""A warehouse whose Parquet lives in an object store (``s3://bucket/prefix``, ``gs://bucket/prefix``).

The DuckDB file, the locks and the pending manifests stay in the local warehouse folder; only the Parquet
files go to the store, through pyarrow's file systems. Object stores have no atomic rename, so a run's
files are written straight under their final prefix ``<uri>/parquet/<table>/run_id=<id>/`` and become
visible only in the DuckDB transaction that inserts their ``run_files`` rows (the same transaction as a
local run's): until then no view names them, and a run that fails, is interrupted or is killed leaves
nothing visible (its prefix is deleted then, or by the next writer's clean-up).

``run_files.path`` holds the object's full URI (a local file's path stays relative to the root). DuckDB
reads the objects through Arrow: each table's committed files are one ``pyarrow.dataset`` registered in the
reading connection (DuckDB's ``httpfs`` extension is not needed, nor loaded).

S3 settings come from the standard AWS environment variables: ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL`` (an S3-compatible server), ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_REGION`` or ``AWS_DEFAULT_REGION``; unset credentials fall back to the AWS
SDK's own chain (profile, instance role). ``gs://`` uses Google's default credentials.

References:
  pyarrow file systems: https://arrow.apache.org/docs/python/filesystems.html
  DuckDB's Arrow scans: https://duckdb.org/docs/stable/guides/python/sql_on_arrow
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from functools import lru_cache

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from sweepkit.errors import InputError

SCHEMES = ("s3", "gs")
ALLOWED = ("s3://bucket[/prefix] or gs://bucket[/prefix] (bucket: 3-63 lower-case letters, digits, '.', '-'; "
           "prefix: folders of letters, digits, '.', '_', '-', '='); a shared folder needs no URI: put the "
           "whole warehouse there with --warehouse")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_SEGMENT = re.compile(r"^[A-Za-z0-9._=-]+$")
_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION")


@dataclass(frozen=True)
class Location:
    """Where a warehouse's Parquet lives in an object store.

    Attributes:
      uri: the location, normalised (``s3://bucket/prefix``, no trailing ``/``).
      scheme: ``s3`` or ``gs``.  bucket: the bucket.  prefix: the folder inside it (``""`` for its top).

    Example:
      >>> loc = parse_uri("s3://lab-results/sweeps/")
      >>> loc.uri, loc.path("parquet", "decode")
      ('s3://lab-results/sweeps', 'lab-results/sweeps/parquet/decode')
    """

    uri: str
    scheme: str
    bucket: str
    prefix: str

    def path(self, *parts: str) -> str:
        """The file system path (``bucket/prefix/part/...``) pyarrow's file system takes."""
        return posixpath.join(self.bucket, self.prefix, *parts) if self.prefix else posixpath.join(self.bucket, *parts)

    def uri_of(self, fs_path: str) -> str:
        """The URI of a file system path inside this location."""
        return f"{self.scheme}://{fs_path}"

    def filesystem(self) -> pafs.FileSystem:
        """The pyarrow file system (one per process and environment: connections are reused)."""
        return _filesystem(self.scheme, tuple(os.environ.get(k) for k in _ENV))


def is_uri(text: str) -> bool:
    """Whether ``text`` names an object (``s3://...``, ``gs://...``) rather than a local path.

    Example:
      >>> is_uri("s3://b/x.parquet"), is_uri("parquet/decode/run_id=r/part-0-0000.parquet")
      (True, False)
    """
    return text.split("://", 1)[0] in SCHEMES and "://" in text


def parse_uri(text: str, field: str = "--parquet-uri") -> Location:
    """Check and normalise an object-store location.

    Raises:
      InputError: not ``s3://`` or ``gs://``, a bad bucket name, or a bad prefix.

    Example:
      >>> parse_uri("http://x")  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ...
      sweepkit.errors.InputError: --parquet-uri = 'http://x' is not allowed; expected s3://bucket[/prefix] ...
    """
    scheme, sep, rest = str(text).partition("://")
    bucket, _, prefix = rest.partition("/")
    segments = [s for s in prefix.split("/")]
    if segments and segments[-1] == "":
        segments = segments[:-1]
    ok = (sep and scheme in SCHEMES and _BUCKET.match(bucket) and ".." not in bucket
          and all(_SEGMENT.match(s) and s not in (".", "..") for s in segments))
    if not ok:
        raise InputError(f"{field} = {text!r} is not allowed; expected {ALLOWED}")
    prefix = "/".join(segments)
    return Location(f"{scheme}://{bucket}" + (f"/{prefix}" if prefix else ""), scheme, bucket, prefix)


def split(uri: str) -> tuple[pafs.FileSystem, str]:
    """An object's file system and its path in it (``s3://b/p/x`` -> (S3FileSystem, ``b/p/x``))."""
    scheme, _, rest = uri.partition("://")
    return _filesystem(scheme, tuple(os.environ.get(k) for k in _ENV)), rest


@lru_cache(maxsize=8)
def _filesystem(scheme: str, env: tuple[str | None, ...]) -> pafs.FileSystem:
    if scheme == "gs":
        return pafs.GcsFileSystem()
    values = dict(zip(_ENV, env))
    kwargs: dict = {}
    endpoint = values["AWS_ENDPOINT_URL_S3"] or values["AWS_ENDPOINT_URL"]
    if endpoint:
        kind, _, host = endpoint.partition("://")
        kwargs.update(endpoint_override=host.rstrip("/") if host else endpoint, scheme=kind if host else "https")
    if values["AWS_ACCESS_KEY_ID"] and values["AWS_SECRET_ACCESS_KEY"]:
        kwargs.update(access_key=values["AWS_ACCESS_KEY_ID"], secret_key=values["AWS_SECRET_ACCESS_KEY"],
                      session_token=values["AWS_SESSION_TOKEN"])
    region = values["AWS_REGION"] or values["AWS_DEFAULT_REGION"]
    if region:
        kwargs["region"] = region
    return pafs.S3FileSystem(**kwargs)


def check_reachable(loc: Location) -> None:
    """Fail early, before any work, when the bucket does not exist.

    Raises:
      InputError: the bucket is not there.  OSError: the store cannot be reached (endpoint, credentials).
    """
    info = loc.filesystem().get_file_info(loc.bucket)
    if info.type == pafs.FileType.NotFound:
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "the default endpoint"
        raise InputError(f"--parquet-uri = {loc.uri!r} is not allowed; bucket {loc.bucket!r} does not exist at "
                         f"{endpoint} (create it first)")


def run_ids(loc: Location, folder: str) -> dict[str, list[str]]:
    """The run folders under ``<uri>/<folder>/``: ``parquet`` -> {run id: its table folders' paths}, or
    ``pending`` -> {run id: [its folder's path]}."""
    fs = loc.filesystem()
    base = loc.path(folder)
    out: dict[str, list[str]] = {}
    for entry in fs.get_file_info(pafs.FileSelector(base, allow_not_found=True)):
        if entry.type != pafs.FileType.Directory:
            continue
        if folder == "pending":
            out.setdefault(entry.base_name, []).append(entry.path)
            continue
        for run in fs.get_file_info(pafs.FileSelector(entry.path, allow_not_found=True)):
            if run.type == pafs.FileType.Directory and run.base_name.startswith("run_id="):
                out.setdefault(run.base_name[len("run_id="):], []).append(run.path)
    return out


def delete_prefix(fs: pafs.FileSystem, path: str) -> None:
    """Delete every object under ``path`` (nothing there: nothing to do)."""
    try:
        fs.delete_dir(path)
    except FileNotFoundError:
        pass


def dataset(uris: list[str]) -> ds.Dataset:
    """One table's committed objects as a pyarrow dataset with ``run_id`` from the ``run_id=<id>`` folders.

    The schema is the union of the files' schemas (a column missing from a file reads as null), as DuckDB's
    ``read_parquet(..., union_by_name = true)`` does for local files.

    Raises:
      ValueError: the objects are not under one table folder of one store.
    """
    fs, first = split(uris[0])
    paths = [split(u)[1] for u in uris]
    base = posixpath.dirname(posixpath.dirname(first))
    if any(posixpath.dirname(posixpath.dirname(p)) != base or not u.startswith(uris[0].split("://")[0])
           for u, p in zip(uris, paths)):
        raise ValueError(f"the committed files of one table are not under one folder: {uris[0]} ... ")
    part = ds.partitioning(pa.schema([("run_id", pa.string())]), flavor="hive")
    schema = None
    if len(paths) > 1:
        import pyarrow.parquet as pq

        schema = pa.unify_schemas([pq.read_schema(p, filesystem=fs) for p in paths] + [part.schema])
    return ds.dataset(paths, filesystem=fs, format="parquet", partitioning=part, partition_base_dir=base,
                      schema=schema)


def stored_uri(con) -> str | None:
    """The Parquet location a warehouse's committed runs use: its URI, ``""`` for the local folder, or None
    while it has no run (from an open DuckDB connection to the warehouse file, or one without the tables)."""
    has = con.execute("select count(*) from duckdb_tables() where database_name = current_database() and "
                      "table_name in ('runs', 'warehouse_meta')").fetchall()[0][0] == 2
    if not has or not con.execute("select count(*) from runs").fetchall()[0][0]:
        return None
    row = con.execute("select value from warehouse_meta where key = 'parquet_uri'").fetchall()
    return row[0][0] if row else ""


def resolve(given: Location | str | None, stored: str | None, root) -> Location | None:
    """The location runs write to: ``stored`` (the committed runs'), which ``given`` must match, or
    ``given`` while there is no run; None: the local folder.

    Raises:
      InputError: ``given`` differs from where the committed runs are.
    """
    if isinstance(given, str):
        given = parse_uri(given)
    if stored is None:
        return given
    if given is not None:
        check_same(given, stored, root)
    return parse_uri(stored, "warehouse_meta.parquet_uri") if stored else None


def check_same(loc: Location | None, stored: str | None, root) -> None:
    """Refuse to commit a run whose Parquet is elsewhere than the committed runs' (``stored``; None: no run).

    Raises:
      InputError: the locations differ.
    """
    if stored is None or stored == (loc.uri if loc else ""):
        return
    where = repr(stored) if stored else f"its folder {root}/parquet"
    mine = f"--parquet-uri = {loc.uri!r}" if loc else "a run into the warehouse folder"
    raise InputError(f"{mine} is not allowed; the committed runs of warehouse {root} keep "
                     f"their Parquet in {where}, and a warehouse keeps it in one place (omit --parquet-uri, "
                     "or use another --warehouse)")


def register(con, table: str, uris: list[str]) -> str:
    """Register one table's committed objects in a DuckDB connection as an Arrow dataset (DuckDB scans it
    with projection and filter pushdown, ``run_id`` partitions pruned); returns the name to select from."""
    source = f"_parquet_{table}"
    con.register(source, dataset(uris))
    return source


def unreadable(table: str, uris: list[str]) -> str:
    """Why a view persisted in the DuckDB file cannot read an object-store table (it fails with this line)."""
    where = uris[0].rsplit("/parquet/", 1)[0]
    return (f"warehouse: table {table}: its Parquet is in {where}, which the views stored in the DuckDB file do "
            "not read; read it through sweepkit (`sweepkit sql`, `sweepkit query`, `Warehouse().connect()`), "
            "or read_parquet the paths in run_files with a DuckDB that loads httpfs")
