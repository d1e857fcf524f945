"""moto's S3 server behind the tests' counting proxy, for the benchmarks that
read from S3 (remote_read.py, remote_cache.py, beam_tfrecord.py
--remote-ranges). The proxy (tests/remote_servers.py's FaultProxy) adds
`proxy.latency` seconds to every request and counts requests and response
bytes by kind; tests/storage/test_latency_proxy.py checks both."""

from __future__ import annotations

import contextlib
import os
import pathlib
import sys
from typing import Iterator

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
from remote_servers import FaultProxy, MotoServer  # noqa: E402

from sackli import _storage  # noqa: E402


@contextlib.contextmanager
def serve_s3() -> Iterator[tuple[MotoServer, FaultProxy]]:
    """Starts moto's S3 server and a FaultProxy in front of it, points
    sackli's S3 client at the proxy (through the environment), and stops
    both on exit, putting the environment back. Yields (server, proxy):
    create buckets through `server.url` (not counted), read through the
    proxy (counted)."""
    saved = dict(os.environ)
    server = MotoServer()
    try:
        server.start()
        proxy = FaultProxy("s3", server.url).start()
        try:
            os.environ.update(AWS_ENDPOINT_URL=proxy.url, AWS_ACCESS_KEY_ID="bench",
                              AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
            _storage.reset_clients()
            yield server, proxy
        finally:
            proxy.stop()
    finally:
        server.close()
        os.environ.clear()
        os.environ.update(saved)
        _storage.reset_clients()
