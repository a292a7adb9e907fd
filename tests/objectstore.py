"""A real S3-API server on localhost for the tests, and a counting, fault-injecting proxy in front.

``S3Server`` runs moto's standalone server (``python -m moto.server``, the ``moto[server]`` test
dependency) as its own process on 127.0.0.1 and a free port. Clients never talk to it directly:
``FaultProxy`` (a small HTTP proxy in the test process, also on 127.0.0.1 and a free port)
forwards every request to it and

* counts the requests by kind (GET, HEAD, PUT, LIST, DELETE, POST) and object key, so a test can
  measure what a micro-batch costs on the store;
* records whether a PUT was conditional (``If-None-Match: *``);
* refuses every request with ``503 Slow Down`` during a window a test opens (``refuse_for``),
  the way an overloaded or briefly unreachable store answers;
* holds requests for a while when asked (``delay``), so a test can catch tasks mid-work.

``env`` is what a client (pyarrow, deltalake, Spark's executors) needs in its environment:
``AWS_ENDPOINT_URL`` (the proxy), credentials, region, ``AWS_ALLOW_HTTP``.
"""

from __future__ import annotations

import http.client
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

BUCKET = "lake"
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
               "transfer-encoding", "upgrade"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, log: str, timeout: float = 60) -> None:
    """Until ``url`` answers at all (an HTTP error status counts: the server is up); fails at once
    when the process has ended, with the end of its log."""
    deadline = time.time() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                with open(log, "rb") as f:
                    tail = f.read()[-2000:].decode(errors="replace")
                raise RuntimeError(f"the server did not start: {tail}") from None
            time.sleep(0.05)


class ServerProcess:
    """A test server: ``argv`` as a process of its own (its output to ``log_path``), waited for
    until ``ready_url`` answers; ``stop`` ends it (terminate, then kill after 10 s)."""

    def __init__(self, argv: list[str], log_path: str, ready_url: str) -> None:
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                     cwd=os.path.dirname(log_path))
        try:
            _wait_http(ready_url, self.proc, log_path)
        except RuntimeError:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


class S3Server:
    """moto's S3 server process (state in memory, gone when the process stops)."""

    def __init__(self, log_path: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = ServerProcess([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     log_path, self.url + "/moto-api/")

    def stop(self) -> None:
        self.process.stop()


@dataclass(frozen=True)
class Request:
    kind: str          # GET, HEAD, PUT, LIST, DELETE, POST
    key: str           # object key (for LIST: the listed prefix)
    conditional: bool  # a PUT with If-None-Match: *
    status: int


def _kind(method: str, path: str, query: str) -> tuple[str, str]:
    parts = unquote(path).lstrip("/").split("/", 1)
    key = parts[1] if len(parts) > 1 else ""
    q = parse_qs(query)
    if method == "GET" and not key:
        return "LIST", q.get("prefix", [""])[0]
    return method, key


class _ProxyServer:
    """The proxy itself (run in its own process, ``python tests/objectstore.py proxy ...``: a
    client library that blocks the interpreter while it waits for the store must not stop it).
    Each forwarded request is appended to ``log_path`` as ``kind<TAB>key<TAB>conditional<TAB>status``;
    ``GET /__fault__/refuse?seconds=N`` opens a refusal window."""

    def __init__(self, upstream_port: int, log_path: str) -> None:
        self.upstream_port = upstream_port
        self._log = open(log_path, "a", buffering=1)
        self._lock = threading.Lock()
        self._refuse_until = 0.0
        self._delay = 0.0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _handle(self) -> None:
                body = self._body()
                split = urlsplit(self.path)
                if split.path.startswith("/__fault__/"):
                    seconds = float(parse_qs(split.query)["seconds"][0])
                    if split.path == "/__fault__/refuse":
                        proxy._refuse_until = time.time() + seconds
                    else:
                        proxy._delay = seconds
                    self.send_response(200)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                kind, key = _kind(self.command, split.path, split.query)
                if proxy._delay:
                    time.sleep(proxy._delay)
                if time.time() < proxy._refuse_until:
                    with proxy._lock:
                        proxy._log.write(f"REFUSED\t{key}\t0\t503\n")
                    payload = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                               b'<Message>Please reduce your request rate.</Message></Error>')
                    self.send_response(503)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                    return
                conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=120)
                try:
                    headers = {k: v for k, v in self.headers.items()
                               if k.lower() not in _HOP_BY_HOP and k.lower() != "content-length"}
                    chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
                    if chunked:   # keep the framing: the server decodes aws-chunked bodies only then
                        headers["Transfer-Encoding"] = "chunked"
                        conn.request(self.command, self.path, body=iter([body] if body else []), headers=headers,
                                     encode_chunked=True)
                    else:
                        if body is not None:
                            headers["Content-Length"] = str(len(body))
                        conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                conditional = int(self.headers.get("If-None-Match") == "*")
                with proxy._lock:
                    proxy._log.write(f"{kind}\t{key}\t{conditional}\t{resp.status}\n")
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in _HOP_BY_HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                length = resp.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _body(self) -> bytes | None:
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    out = bytearray()
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline().strip():   # trailers
                                pass
                            return bytes(out)
                        out += self.rfile.read(size)
                        self.rfile.readline()
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else None

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]


class FaultProxy:
    """The proxy process (``_ProxyServer``) and what a test asks of it: request records
    (``mark``/``since``) and refusal windows (``refuse_for``)."""

    def __init__(self, upstream_port: int, workdir: str) -> None:
        self.log_path = os.path.join(workdir, "requests.tsv")
        port_file = os.path.join(workdir, "proxy.port")
        open(self.log_path, "w").close()
        self._out = open(os.path.join(workdir, "proxy.log"), "ab")
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "proxy", str(upstream_port),
                                      self.log_path, port_file], stdout=self._out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.time() + 30
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"the S3 proxy did not start (see {workdir}/proxy.log)")
            time.sleep(0.05)
        self.port = int(open(port_file).read())
        self.url = f"http://127.0.0.1:{self.port}"

    def refuse_for(self, seconds: float) -> None:
        """Answer every request with 503 Slow Down for the next ``seconds``."""
        urllib.request.urlopen(f"{self.url}/__fault__/refuse?seconds={seconds}", timeout=10).read()

    def delay(self, seconds: float) -> None:
        """Hold every request ``seconds`` before forwarding it (0: no more): a slow store, and a
        way to catch tasks in the middle of their work."""
        urllib.request.urlopen(f"{self.url}/__fault__/delay?seconds={seconds}", timeout=10).read()

    def _records(self) -> list[Request]:
        out = []
        with open(self.log_path) as f:
            for line in f:
                if line.endswith("\n"):
                    kind, key, conditional, status = line[:-1].split("\t")
                    out.append(Request(kind, key, conditional == "1", int(status)))
        return out

    def mark(self) -> int:
        return len(self._records())

    def since(self, mark: int, prefix: str = "") -> list[Request]:
        return [r for r in self._records()[mark:] if r.key.startswith(prefix)]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self._out.close()


def count(requests: list[Request], pattern: str = "") -> Counter:
    """Requests by kind, of keys matching the regular expression ``pattern``."""
    rx = re.compile(pattern)
    return Counter(r.kind for r in requests if rx.search(r.key))


class ObjectStore:
    """moto behind the proxy, with one bucket; ``env`` for clients; ``uri(path)`` in it."""

    def __init__(self, workdir: str) -> None:
        os.makedirs(workdir, exist_ok=True)
        self.server = S3Server(os.path.join(workdir, "moto.log"))
        self.proxy = FaultProxy(self.server.port, workdir)
        self.env = {"AWS_ENDPOINT_URL": self.proxy.url, "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
                    "AWS_ALLOW_HTTP": "true", "AWS_EC2_METADATA_DISABLED": "true"}
        req = urllib.request.Request(f"{self.server.url}/{BUCKET}", method="PUT")
        urllib.request.urlopen(req, timeout=30).read()

    def uri(self, path: str) -> str:
        return f"s3://{BUCKET}/{path.lstrip('/')}"

    def stop(self) -> None:
        self.proxy.stop()
        self.server.stop()


if __name__ == "__main__" and sys.argv[1:2] == ["proxy"]:
    _server = _ProxyServer(int(sys.argv[2]), sys.argv[3])
    with open(sys.argv[4] + ".tmp", "w") as _f:
        _f.write(str(_server.port))
    os.replace(sys.argv[4] + ".tmp", sys.argv[4])
    _server.server.serve_forever()
