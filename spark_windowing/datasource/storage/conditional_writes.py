"""Create-if-absent on object stores, which ``pyarrow.fs`` cannot send: through each store's own
Python client, imported only when used, with one client per store configuration and process.

Each ``create_*`` function writes ``data`` to a key unless the key exists, in one request the
store decides atomically: of concurrent callers exactly one gets True, the others False, and
the object keeps the winner's bytes. A request the client retries (a timeout, a 503) may find
its own first attempt's object and answer False; callers that must know tell that case by the
object's content (``affinity.claim_shard_conditional`` does).

* S3 (``s3`` extra, ``botocore``): a PUT with ``If-None-Match: *``; 412, or 409 for a concurrent
  conditional write, means the key exists.
* GCS (``gcs`` extra, ``google-cloud-storage``): an upload with the precondition
  ``ifGenerationMatch=0`` (no live generation of the object); 412 means it exists.
* Azure Blob Storage (``azure`` extra, ``azure-storage-blob``; ``azure-identity`` for
  ``DefaultAzureCredential``): a Put Blob with ``If-None-Match: *``; 409 (``BlobAlreadyExists``)
  or 412 means it exists.

Endpoints and credentials come from ``store_endpoints``, as for the ``pyarrow.fs`` filesystem
that does the rest of the I/O.
"""

from __future__ import annotations

import importlib
from urllib.parse import urlparse

from spark_windowing.datasource.storage import endpoints

#: The module each scheme's client needs (extras ``s3``, ``gcs``, ``azure``), and azure-identity's.
CLIENT_MODULES = {"s3": "botocore", "gs": "google.cloud.storage", "abfs": "azure.storage.blob",
                  "abfss": "azure.storage.blob", "azure-identity": "azure.identity"}

_CLIENTS: dict[tuple, object] = {}


def client_installed(scheme: str) -> bool:
    """Whether the client for ``scheme``'s conditional writes can be imported (imports it)."""
    module = CLIENT_MODULES.get(scheme)
    if module is None:
        return False
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def supported(uri: str) -> bool:
    """Whether ``create`` works for ``uri``: an ``s3://`` or ``gs://`` URI, or an ``abfs[s]://``
    one of the forms ``endpoints.parse_azure`` reads, with the store's client installed
    (for an Azure account without a key or SAS token also ``azure-identity``)."""
    scheme = urlparse(uri).scheme
    if scheme not in endpoints.AZURE_SCHEMES:
        return client_installed(scheme)
    where = endpoints.parse_azure(uri)
    if where is None or not client_installed(scheme):
        return False
    account = endpoints.azure_account(where.account)
    return bool(account.key or account.sas_token) or client_installed("azure-identity")


def create(uri: str, data: bytes) -> bool:
    """Create ``uri`` holding ``data`` unless it exists (then False), by its store's conditional
    write (module docstring). ``uri`` must be ``supported``."""
    parsed = urlparse(uri)
    if parsed.scheme == "s3":
        return create_s3(parsed.netloc, parsed.path.lstrip("/"), data)
    if parsed.scheme == "gs":
        return create_gcs(parsed.netloc, parsed.path.lstrip("/"), data)
    where = endpoints.parse_azure(uri)
    if where is None:
        raise ValueError(f"{uri}: no conditional write for this URI")
    return create_azure(where.account, where.container, where.path, data)


def create_s3(bucket: str, key: str, data: bytes) -> bool:
    """A PUT with ``If-None-Match: *`` through ``botocore``."""
    from botocore.exceptions import ClientError
    try:
        _s3_client().put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        return True
    except ClientError as e:  # 412: the key exists; 409: a concurrent conditional write to it won
        if e.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict") or \
                e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") in (409, 412):
            return False
        raise


def create_gcs(bucket: str, key: str, data: bytes) -> bool:
    """An upload with ``ifGenerationMatch=0`` through ``google-cloud-storage`` (retried on
    transient errors: a request with a generation precondition is idempotent)."""
    from google.api_core.exceptions import PreconditionFailed
    try:
        _gcs_client().bucket(bucket).blob(key).upload_from_string(data, if_generation_match=0)
        return True
    except PreconditionFailed:
        return False


def create_azure(account: str | None, container: str, key: str, data: bytes) -> bool:
    """A Put Blob with ``If-None-Match: *`` (``overwrite=False``) through ``azure-storage-blob``."""
    from azure.core.exceptions import ResourceExistsError, ResourceModifiedError
    blob = _azure_client(account).get_blob_client(container, key)
    try:
        blob.upload_blob(data, overwrite=False)
        return True
    except (ResourceExistsError, ResourceModifiedError):   # 409 BlobAlreadyExists, 412 ConditionNotMet
        return False


def _s3_client():
    """A botocore S3 client configured like ``storage``'s pyarrow one (endpoint, region,
    credentials from the environment); retries like it (standard mode, 10 attempts)."""
    import botocore.config
    import botocore.session
    endpoint, region = endpoints.s3_endpoint(), endpoints.s3_region()
    client = _CLIENTS.get(("s3", endpoint, region))
    if client is None:
        config = botocore.config.Config(retries={"mode": "standard", "max_attempts": 10},
                                        s3={"addressing_style": "path"} if endpoint else None)
        client = _CLIENTS[("s3", endpoint, region)] = botocore.session.get_session().create_client(
            "s3", region_name=region, endpoint_url=endpoint, config=config)
    return client


def _gcs_client():
    """A ``google.cloud.storage.Client``: against ``STORAGE_EMULATOR_HOST`` when set (the client
    reads it itself and then signs nothing), else with application default credentials."""
    from google.cloud import storage
    emulator = endpoints.gcs_emulator()
    client = _CLIENTS.get(("gs", emulator))
    if client is None:
        if emulator:
            from google.auth.credentials import AnonymousCredentials
            client = storage.Client(project="emulator", credentials=AnonymousCredentials(),
                                    client_options={"api_endpoint": emulator})
        else:
            client = storage.Client()
        _CLIENTS[("gs", emulator)] = client
    return client


def _azure_client(named: str | None):
    """A ``BlobServiceClient`` for the account ``endpoints.azure_account`` finds."""
    account = endpoints.azure_account(named)
    client = _CLIENTS.get(("az", account))
    if client is None:
        from azure.storage.blob import BlobServiceClient
        if account.key:
            credential = {"account_name": account.name, "account_key": account.key}
        elif account.sas_token:
            credential = account.sas_token
        else:
            from azure.identity import DefaultAzureCredential
            credential = DefaultAzureCredential()
        client = _CLIENTS[("az", account)] = BlobServiceClient(account.blob_endpoint, credential=credential)
    return client
