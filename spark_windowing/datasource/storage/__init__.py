"""State-location I/O through ``pyarrow.fs``: local paths, ``s3://``, ``gs://``, ``abfss://``,
``hdfs://`` by the same code.

What the state protocol asks of storage is only what an object store gives: a whole object
becomes visible at once (one PUT), a read returns a complete object or "not found", and a name
written once is read back as written. No rename, no directory and no listing is needed to read
state (listing is used only to delete garbage, ``store.collect_garbage``). On a local filesystem
a write goes to a temporary file that is renamed into place, for the same all-or-nothing effect.

Object-store endpoint and credentials come from the environment, the way each cloud's tools
read them (``store_endpoints``): for S3 ``AWS_ENDPOINT_URL`` (e.g. ``http://127.0.0.1:9000`` for an
S3-compatible server), ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``; for GCS
``STORAGE_EMULATOR_HOST`` or application default credentials; for Azure
``AZURE_STORAGE_CONNECTION_STRING``, or the account with ``AZURE_STORAGE_ACCOUNT_KEY`` /
``AZURE_STORAGE_SAS_TOKEN`` / ``DefaultAzureCredential``. On a cluster give them to the executors
too (``spark.executorEnv.AWS_...``). ``deltalake`` reads the same S3 variables. Exclusive creates
(shard claims) go through ``conditional_writes``.
"""

from __future__ import annotations

import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import pyarrow.fs as pafs

from spark_windowing.datasource.storage import conditional_writes, endpoints

#: One filesystem client per store configuration and process (``_store_key``): creating an S3
#: client costs more than a small GET.
_FILESYSTEMS: dict[tuple, pafs.FileSystem] = {}
OBJECT_STORE_SCHEMES = ("s3", "gs", *endpoints.AZURE_SCHEMES)


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path within it) for a URI or a local path: the one resolver of the plugin.

    A local path (made absolute), ``file:///p`` or ``file:/p`` (Hadoop's spelling) -> the local
    filesystem; ``s3://``, ``gs://`` and ``abfs[s]://`` -> a client shared per store
    configuration, which comes from the environment (``_object_store``, ``store_endpoints``); any
    other URI, and one with a query string, as ``pyarrow.fs`` resolves it."""
    if uri.startswith("file:"):
        local = uri[len("file://"):] if uri.startswith("file://") else uri[len("file:"):]
        return pafs.LocalFileSystem(), local
    if "://" not in uri:
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    parsed = urlparse(uri)
    azure = endpoints.parse_azure(uri) if parsed.scheme in endpoints.AZURE_SCHEMES else None
    if parsed.scheme not in OBJECT_STORE_SCHEMES or parsed.query or \
            (parsed.scheme in endpoints.AZURE_SCHEMES and azure is None):
        return pafs.FileSystem.from_uri(uri)
    key = _store_key(parsed.scheme, parsed.netloc, azure)
    fs = _FILESYSTEMS.get(key)
    if fs is None:
        fs = _FILESYSTEMS[key] = _object_store(key)
    if azure is not None:
        return fs, f"{azure.container}/{azure.path}".rstrip("/")
    return fs, f"{parsed.netloc}{parsed.path}".rstrip("/")


def _store_key(scheme: str, bucket: str, azure: endpoints.AzurePath | None) -> tuple:
    """What tells one store configuration from another: the endpoint (and for Azure the account
    and its credentials) as the environment gives them now."""
    if scheme == "s3":
        return ("s3", bucket, endpoints.s3_endpoint(), endpoints.s3_region())
    if scheme == "gs":
        return ("gs", bucket, endpoints.gcs_emulator())
    return ("az", endpoints.azure_account(azure.account))


def _object_store(key: tuple) -> pafs.FileSystem:
    """The ``pyarrow.fs`` client of a store configuration (``_store_key``).

    S3: a small object is written with one PUT (``allow_delayed_open``; the default is a
    three-request multipart upload), with up to 10 attempts and exponential back-off (~25 s in
    all): a store that refuses requests for a few seconds (503 Slow Down, a restart) is waited
    out, not a failed task or driver. GCS: against ``STORAGE_EMULATOR_HOST`` without credentials
    when it is set. Azure: the account, endpoint and credentials ``store_endpoints`` finds."""
    if key[0] == "s3":
        kw: dict = {}
        if key[2]:
            parts = urlparse(key[2])
            kw = {"endpoint_override": parts.netloc or parts.path, "scheme": parts.scheme or "https"}
        return pafs.S3FileSystem(allow_delayed_open=True, region=key[3],
                                 retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=10), **kw)
    if key[0] == "gs":
        if key[2]:
            parts = urlparse(key[2])
            return pafs.GcsFileSystem(anonymous=True, scheme=parts.scheme, endpoint_override=parts.netloc)
        return pafs.GcsFileSystem()
    return pafs.AzureFileSystem(**endpoints.pyarrow_azure_options(key[1]))


def is_local(fs: pafs.FileSystem) -> bool:
    return isinstance(fs, pafs.LocalFileSystem)


def selector(root: str) -> pafs.FileSelector:
    return pafs.FileSelector(root, recursive=False, allow_not_found=False)


def join_uri(original: str, root: str, path: str) -> str:
    """Map a path listed under ``root`` back to the URI form of ``original``."""
    if "://" not in original:
        return path
    scheme, rest = original.split("://", 1)
    netloc = rest.split("/", 1)[0]
    if "@" in netloc and scheme in endpoints.AZURE_SCHEMES:   # <container>@<account>.<host>
        container, host = netloc.split("@", 1)
        return f"{scheme}://{container}@{host}/{path[len(container):].lstrip('/')}"
    return f"{scheme}://{path}"


def read_bytes(uri: str, *, missing_ok: bool = False) -> bytes | None:
    fs, path = filesystem(uri)
    try:
        with fs.open_input_stream(path) as f:
            return f.read()
    except FileNotFoundError:
        if missing_ok:
            return None
        raise
    except OSError as e:
        if missing_ok and "not found" in str(e).lower():
            return None
        raise


#: Objects read at once by ``read_many`` on an object store (the driver reading every shard's report).
READ_THREADS = 32


def read_many(uris: list[str], *, missing_ok: bool = False) -> list[bytes | None]:
    """``read_bytes`` of every URI, in order. On an object store the requests go out
    ``READ_THREADS`` at a time (each read is a HEAD and a GET: the latency, not the bytes, is the
    cost), so reading ``n`` small objects takes about ``n / READ_THREADS`` round trips."""
    if len(uris) <= 1 or is_local(filesystem(uris[0])[0]):
        return [read_bytes(u, missing_ok=missing_ok) for u in uris]
    with ThreadPoolExecutor(max_workers=min(READ_THREADS, len(uris))) as pool:
        return list(pool.map(lambda u: read_bytes(u, missing_ok=missing_ok), uris))


def read_range(uri: str, offset: int, length: int) -> bytes:
    """``length`` bytes at ``offset`` (random access; on object stores a HEAD and one ranged GET)."""
    fs, path = filesystem(uri)
    with fs.open_input_file(path) as f:   # an object store: a HEAD (the size), then one ranged GET
        return f.read_at(length, offset)


def exists(uri: str) -> bool:
    fs, path = filesystem(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def stamp(uri: str) -> tuple[int, int] | None:
    """(size, modification time in ns) of the file at ``uri`` (one stat, or one HEAD request on an
    object store); None when there is none. Two files written at the same path at different
    times are told apart by it: what tells a table from one deleted and created anew."""
    fs, path = filesystem(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        return None
    mtime = info.mtime_ns if info.mtime_ns is not None else 0
    return int(info.size or 0), int(mtime)


def write_atomic(uri: str, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` so that readers see the old file or the whole new one, never a part.

    ``durable`` also flushes the bytes to disk before publishing them (state snapshots); small
    files that are rewritten on replay anyway (reports) can skip it."""
    fs, path = filesystem(uri)
    parent = path.rsplit("/", 1)[0]
    if is_local(fs):
        fs.create_dir(parent, recursive=True)
        tmp = f"{parent}/.tmp-{uuid.uuid4().hex}"
        with fs.open_output_stream(tmp) as f:
            f.write(data)
        if durable:
            with open(tmp, "rb+") as fh:  # make the bytes durable before the rename publishes them
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    else:  # an object store: one PUT is all-or-nothing, and there are no directories to create
        with fs.open_output_stream(path) as f:
            f.write(data)


def exclusive_create_available(uri: str) -> bool:
    """Whether ``create_exclusive`` works for ``uri``: local paths; ``s3://``, ``gs://`` and
    ``abfs[s]://`` with the store's client installed (the ``s3``, ``gcs``, ``azure`` extras:
    ``pyarrow.fs`` cannot send a conditional write; ``conditional_writes.supported``)."""
    if is_local(filesystem(uri)[0]):
        return True
    return conditional_writes.supported(uri)


def create_exclusive(uri: str, data: bytes) -> bool:
    """Create ``uri`` holding ``data`` unless it exists (then False), atomically: of concurrent
    callers exactly one gets True. Locally an ``O_EXCL`` create; on an object store its
    conditional write (``conditional_writes``: S3 ``If-None-Match: *``, GCS
    ``ifGenerationMatch=0``, Azure ``If-None-Match: *``). Not flushed to disk: claims need not
    outlive a crash. Raises ``RuntimeError`` where it is not available (``exclusive_create_available``)."""
    fs, path = filesystem(uri)
    if is_local(fs):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return True
    if not exclusive_create_available(uri):
        raise RuntimeError(f"{uri}: an exclusive create needs a local path, or s3://, gs:// or "
                           "abfss://<container>[@<account>.dfs.core.windows.net]/ with the store's client "
                           "installed (pip install 'spark-windowing[s3]', '[gcs]' or '[azure]')")
    return conditional_writes.create(uri, data)


def publish_exclusive(uri: str, data: bytes) -> bool:
    """Publish ``uri`` holding all of ``data`` unless it exists (then False): a reader sees no file
    or the whole file, and of concurrent callers exactly one gets True (a Delta log entry's
    put-if-absent). Locally the bytes go to a temporary file, made durable, then hard-linked to
    ``uri`` (``link`` fails when the name exists, as delta-rs's rename-no-replace); on an object
    store one conditional PUT (``create_exclusive``). ``exclusive_create_available`` tells where
    it works."""
    fs, path = filesystem(uri)
    if not is_local(fs):
        return create_exclusive(uri, data)
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = f"{parent}/.tmp-{uuid.uuid4().hex}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def list_dir(uri: str) -> list[pafs.FileInfo]:
    fs, path = filesystem(uri)
    try:
        return fs.get_file_info(pafs.FileSelector(path, recursive=False, allow_not_found=True))
    except FileNotFoundError:
        return []


def delete(uri: str, *, recursive: bool = False) -> None:
    fs, path = filesystem(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.Directory and recursive:
        fs.delete_dir(path)
    elif info.type == pafs.FileType.File:
        fs.delete_file(path)
