"""State-location I/O through ``pyarrow.fs``: local paths now, ``s3://``, ``gs://``, ``abfss://``,
``hdfs://`` by the same code. Writes are atomic (temp file + rename) where the filesystem allows;
on object stores a single PUT is atomic by itself.
"""

from __future__ import annotations

import os
import uuid

import pyarrow.fs as pafs


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path within it) for a URI or a local path."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    if uri.startswith("file://"):
        return pafs.LocalFileSystem(), uri[len("file://"):]
    return pafs.FileSystem.from_uri(uri)


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


def read_range(uri: str, offset: int, length: int) -> bytes:
    """``length`` bytes at ``offset`` (random access; one ranged GET on object stores)."""
    fs, path = filesystem(uri)
    with fs.open_input_file(path) as f:
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
    fs.create_dir(parent, recursive=True)
    if isinstance(fs, pafs.LocalFileSystem):
        tmp = f"{parent}/.tmp-{uuid.uuid4().hex}"
        with fs.open_output_stream(tmp) as f:
            f.write(data)
        if durable:
            with open(tmp, "rb+") as fh:  # make the bytes durable before the rename publishes them
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    else:
        with fs.open_output_stream(path) as f:
            f.write(data)


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
