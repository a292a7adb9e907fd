"""State-location I/O through ``pyarrow.fs``: local paths, ``s3://``, ``gs://``, ``abfss://``,
``hdfs://`` by the same code.

What the state protocol asks of storage is only what an object store gives: a whole object
becomes visible at once (one PUT), a read returns a complete object or "not found", and a name
written once is read back as written. No rename, no directory and no listing is needed to read
state (listing is used only to delete garbage, ``store.collect_garbage``). On a local filesystem
a write goes to a temporary file that is renamed into place, for the same all-or-nothing effect.

Object-store endpoint and credentials come from the environment, as for every AWS client:
``AWS_ENDPOINT_URL`` (e.g. ``http://127.0.0.1:9000`` for an S3-compatible server),
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``; on a cluster give them to the
executors too (``spark.executorEnv.AWS_...``). ``deltalake`` reads the same variables.
"""

from __future__ import annotations

import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import pyarrow.fs as pafs

#: One filesystem client per (scheme, bucket, endpoint) and process: creating an S3 client costs
#: more than a small GET.
_FILESYSTEMS: dict[tuple[str, str, str | None], pafs.FileSystem] = {}


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path within it) for a URI or a local path: the one resolver of the plugin.

    A local path (made absolute), ``file:///p`` or ``file:/p`` (Hadoop's spelling) -> the local
    filesystem; ``s3://`` and ``gs://`` -> a client shared per bucket and endpoint (see
    ``_object_store``); any other URI as ``pyarrow.fs`` resolves it."""
    if uri.startswith("file:"):
        local = uri[len("file://"):] if uri.startswith("file://") else uri[len("file:"):]
        return pafs.LocalFileSystem(), local
    if "://" not in uri:
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    parsed = urlparse(uri)
    if parsed.scheme not in ("s3", "gs") or parsed.query:
        return pafs.FileSystem.from_uri(uri)
    key = (parsed.scheme, parsed.netloc, os.environ.get("AWS_ENDPOINT_URL"))
    fs = _FILESYSTEMS.get(key)
    if fs is None:
        fs = _FILESYSTEMS[key] = _object_store(parsed.scheme, uri)
    return fs, f"{parsed.netloc}{parsed.path}".rstrip("/")


def _object_store(scheme: str, uri: str) -> pafs.FileSystem:
    """An S3 client that writes a small object with one PUT (``allow_delayed_open``; the default
    is a three-request multipart upload) and takes region, endpoint and credentials from the
    environment; other schemes as ``pyarrow`` resolves them."""
    if scheme == "s3":
        kw: dict = {}
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            parts = urlparse(endpoint)
            kw = {"endpoint_override": parts.netloc or parts.path, "scheme": parts.scheme or "https"}
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        # up to 10 attempts, exponential back-off (~25 s in all): a store that refuses requests
        # for a few seconds (503 Slow Down, a restart) is waited out, not a failed task or driver
        return pafs.S3FileSystem(allow_delayed_open=True, region=region,
                                 retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=10), **kw)
    return pafs.FileSystem.from_uri(uri)[0]


def is_local(fs: pafs.FileSystem) -> bool:
    return isinstance(fs, pafs.LocalFileSystem)


def selector(root: str) -> pafs.FileSelector:
    return pafs.FileSelector(root, recursive=False, allow_not_found=False)


def join_uri(original: str, root: str, path: str) -> str:
    """Map a path listed under ``root`` back to the URI form of ``original``."""
    if "://" not in original:
        return path
    scheme = original.split("://", 1)[0]
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


#: botocore S3 clients per (endpoint, region) and process, for conditional writes.
_S3_CLIENTS: dict[tuple[str | None, str], object] = {}


def exclusive_create_available(uri: str) -> bool:
    """Whether ``create_exclusive`` works for ``uri``: local paths, and ``s3://`` with ``botocore``
    installed (the ``s3`` extra; ``pyarrow.fs`` cannot send a conditional write)."""
    if is_local(filesystem(uri)[0]):
        return True
    if not uri.startswith("s3://"):
        return False
    try:
        import botocore  # noqa: F401
    except ImportError:
        return False
    return True


def create_exclusive(uri: str, data: bytes) -> bool:
    """Create ``uri`` holding ``data`` unless it exists (then False), atomically: of concurrent
    callers exactly one gets True. Locally an ``O_EXCL`` create; on S3 a conditional PUT
    (``If-None-Match: *``, through ``botocore``: S3, and S3-compatible stores that implement
    conditional writes, answer 412 when the key exists). Not flushed to disk: claims need not
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
        raise RuntimeError(f"{uri}: an exclusive create needs a local path, or s3:// with botocore installed "
                           "(pip install 'spark-windowing[s3]')")
    from botocore.exceptions import ClientError
    bucket, _, key = uri[len("s3://"):].partition("/")
    try:
        _s3_client().put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        return True
    except ClientError as e:  # 412: the key exists; 409: a concurrent conditional write to it won
        if e.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict") or \
                e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") in (409, 412):
            return False
        raise


def _s3_client():
    """A botocore S3 client configured from the environment like ``_object_store``'s (endpoint,
    region, credentials), one per process; retries like it (standard mode, 10 attempts)."""
    import botocore.config
    import botocore.session
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    client = _S3_CLIENTS.get((endpoint, region))
    if client is None:
        config = botocore.config.Config(retries={"mode": "standard", "max_attempts": 10},
                                        s3={"addressing_style": "path"} if endpoint else None)
        client = _S3_CLIENTS[(endpoint, region)] = botocore.session.get_session().create_client(
            "s3", region_name=region, endpoint_url=endpoint, config=config)
    return client


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
