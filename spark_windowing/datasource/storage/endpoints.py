"""Where an object store is and how to sign in to it, from the environment, the way each cloud's
own tools read it. Both clients of a store read it here, so they see the same store: the
``pyarrow.fs`` filesystem (all state I/O, ``storage.filesystem``) and the client that sends
conditional writes (shard claims, ``conditional_writes``).

* ``s3://`` (S3 and S3-compatible servers): ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``,
  ``AWS_REGION`` / ``AWS_DEFAULT_REGION``; credentials as every AWS client finds them.
* ``gs://``: ``STORAGE_EMULATOR_HOST`` (``http://host:port``, as ``google-cloud-storage`` and
  fake-gcs-server take it; then no credentials are sent), else application default credentials
  (``GOOGLE_APPLICATION_CREDENTIALS``, the metadata server, ``gcloud auth application-default login``).
* ``abfss://`` / ``abfs://`` (Azure Blob Storage, also with a hierarchical namespace):
  ``AZURE_STORAGE_CONNECTION_STRING`` (account, key or SAS, and endpoint, e.g. Azurite's), else
  the account named by the URI (``abfss://<container>@<account>.dfs.core.windows.net/<path>``) or
  by ``AZURE_STORAGE_ACCOUNT_NAME`` (``abfss://<container>/<path>``) with ``AZURE_STORAGE_ACCOUNT_KEY``
  (or ``AZURE_STORAGE_KEY``, the ``az`` CLI's name) or ``AZURE_STORAGE_SAS_TOKEN``, else
  ``DefaultAzureCredential`` (environment, workload or managed identity, ``az login``), which is
  also what ``pyarrow.fs.AzureFileSystem`` uses by default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

AZURE_SCHEMES = ("abfs", "abfss")

#: Azurite's documented development account (``UseDevelopmentStorage=true``).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def s3_endpoint() -> str | None:
    """The S3 endpoint URL from the environment, or None (AWS)."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")


def s3_region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def gcs_emulator() -> str | None:
    """``STORAGE_EMULATOR_HOST`` with a scheme (``http://`` when it names none), or None."""
    host = os.environ.get("STORAGE_EMULATOR_HOST")
    if not host:
        return None
    return host if "://" in host else f"http://{host}"


@dataclass(frozen=True)
class AzureAccount:
    """A storage account and how to reach it: ``blob_endpoint`` is the service URL
    (``https://<name>.blob.core.windows.net``, or an emulator's ``http://host:port/<name>``);
    ``key`` or ``sas_token`` sign requests, neither means ``DefaultAzureCredential``."""
    name: str
    blob_endpoint: str
    key: str | None = None
    sas_token: str | None = None


@dataclass(frozen=True)
class AzurePath:
    """An ``abfs[s]://`` URI taken apart: the account it names (None: from the environment), the
    container, and the path in it (no leading ``/``)."""
    account: str | None
    container: str
    path: str


def parse_azure(uri: str) -> AzurePath | None:
    """``abfs[s]://<container>@<account>.<host>/<path>`` (the Hadoop ABFS form) or
    ``abfs[s]://<container>/<path>``; None for any other form (left to ``pyarrow.fs``).

    >>> parse_azure("abfss://lake@acct.dfs.core.windows.net/state/q1")
    AzurePath(account='acct', container='lake', path='state/q1')
    >>> parse_azure("abfss://lake/state/q1")
    AzurePath(account=None, container='lake', path='state/q1')
    >>> parse_azure("abfs://acct.blob.core.windows.net/lake/q1") is None   # pyarrow's own form
    True
    """
    parsed = urlparse(uri)
    if parsed.scheme not in AZURE_SCHEMES or parsed.query or not parsed.netloc:
        return None
    path = parsed.path.strip("/")
    if "@" in parsed.netloc:
        container, host = parsed.netloc.split("@", 1)
        return AzurePath(host.split(".", 1)[0], container, path) if "." in host and container else None
    return None if "." in parsed.netloc or ":" in parsed.netloc else AzurePath(None, parsed.netloc, path)


def _connection_string(raw: str) -> dict[str, str]:
    fields = {}
    for part in raw.split(";"):
        name, sep, value = part.partition("=")
        if sep:
            fields[name.strip()] = value.strip()
    return fields


def azure_account(named: str | None, environ: Mapping[str, str] | None = None) -> AzureAccount:
    """The account to use for a URI naming account ``named`` (None: it names none), from the
    environment (``environ``, default ``os.environ``; module docstring). Raises ``ValueError``
    when no account is given anywhere, or the connection string is for another account than the
    URI names.

    >>> env = {"AZURE_STORAGE_CONNECTION_STRING": "UseDevelopmentStorage=true"}
    >>> azure_account("devstoreaccount1", env).blob_endpoint
    'http://127.0.0.1:10000/devstoreaccount1'
    >>> azure_account("other", env)
    Traceback (most recent call last):
    ValueError: AZURE_STORAGE_CONNECTION_STRING is for account 'devstoreaccount1', the URI names 'other'
    >>> azure_account(None, {"AZURE_STORAGE_ACCOUNT_NAME": "acct", "AZURE_STORAGE_KEY": "k"})
    AzureAccount(name='acct', blob_endpoint='https://acct.blob.core.windows.net', key='k', sas_token=None)
    """
    env = os.environ if environ is None else environ
    raw = env.get("AZURE_STORAGE_CONNECTION_STRING")
    if raw:
        fields = _connection_string(raw)
        if fields.get("UseDevelopmentStorage", "").lower() == "true":
            fields = {"AccountName": AZURITE_ACCOUNT, "AccountKey": AZURITE_KEY,
                      "BlobEndpoint": f"http://127.0.0.1:10000/{AZURITE_ACCOUNT}"}
        name = fields.get("AccountName") or named
        if not name or (named and named != name):
            raise ValueError(f"AZURE_STORAGE_CONNECTION_STRING is for account {name!r}, the URI names {named!r}")
        protocol = fields.get("DefaultEndpointsProtocol", "https")
        suffix = fields.get("EndpointSuffix", "core.windows.net")
        endpoint = fields.get("BlobEndpoint") or f"{protocol}://{name}.blob.{suffix}"
        return AzureAccount(name, endpoint.rstrip("/"), fields.get("AccountKey"),
                            fields.get("SharedAccessSignature"))
    name = named or env.get("AZURE_STORAGE_ACCOUNT_NAME")
    if not name:
        raise ValueError("an abfss://<container>/<path> URI needs the account: AZURE_STORAGE_ACCOUNT_NAME, "
                         "AZURE_STORAGE_CONNECTION_STRING, or abfss://<container>@<account>.dfs.core.windows.net/")
    key = env.get("AZURE_STORAGE_ACCOUNT_KEY") or env.get("AZURE_STORAGE_KEY")
    sas = None if key else env.get("AZURE_STORAGE_SAS_TOKEN")
    return AzureAccount(name, f"https://{name}.blob.core.windows.net", key, sas)


def pyarrow_azure_options(account: AzureAccount) -> dict:
    """Keyword arguments of ``pyarrow.fs.AzureFileSystem`` for ``account``: an endpoint at
    ``<name>.<domain>`` becomes the authority ``.<domain>`` (pyarrow puts the account in front),
    any other (an emulator's ``host:port/<name>``) is used as it is, path-style.

    >>> opts = pyarrow_azure_options(AzureAccount("acct", "https://acct.blob.core.windows.net"))
    >>> opts["blob_storage_authority"], opts["dfs_storage_authority"], "account_key" in opts
    ('.blob.core.windows.net', '.dfs.core.windows.net', False)
    >>> pyarrow_azure_options(AzureAccount("dev", "http://127.0.0.1:10000/dev", key="k"))["blob_storage_authority"]
    '127.0.0.1:10000'
    """
    ep = urlparse(account.blob_endpoint)
    kw: dict = {"account_name": account.name, "blob_storage_scheme": ep.scheme, "dfs_storage_scheme": ep.scheme}
    if ep.netloc.startswith(f"{account.name}."):
        domain = ep.netloc[len(account.name):]
        kw.update(blob_storage_authority=domain, dfs_storage_authority=domain.replace(".blob.", ".dfs.", 1))
    else:
        kw.update(blob_storage_authority=ep.netloc, dfs_storage_authority=ep.netloc)
    if account.key:
        kw["account_key"] = account.key
    elif account.sas_token:
        kw["sas_token"] = account.sas_token.lstrip("?")
    return kw
