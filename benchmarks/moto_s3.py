"""moto's S3 server behind the tests' counting proxy, for the benchmarks that
read from S3 (remote_read.py, beam_tfrecord.py --remote-ranges)."""

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
    both on exit. Yields (server, proxy): create buckets through
    `server.url` (not counted), read through the proxy (counted)."""
    server = MotoServer()
    server.start()
    proxy = FaultProxy("s3", server.url).start()
    os.environ.update(AWS_ENDPOINT_URL=proxy.url, AWS_ACCESS_KEY_ID="bench",
                      AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    _storage.reset_clients()
    try:
        yield server, proxy
    finally:
        proxy.stop()
        server.close()
