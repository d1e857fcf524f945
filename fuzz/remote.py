"""A local S3 server for the remote read paths: moto's server
(`python -m moto.server`) on 127.0.0.1, started once per fuzz run. Mutants
are uploaded under `s3://sackli-fuzz/<mutant>/` and read by the children
through sackli's s3:// support (boto3), as remote bags are in production."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time

__all__ = ["S3Server"]

BUCKET = "sackli-fuzz"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.log = tempfile.NamedTemporaryFile(prefix="sackli-fuzz-moto-", suffix=".log", delete=False)
        self._client = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """What a child needs in its environment to reach the server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
            "SACKLI_REMOTE_ATTEMPTS": "3", "SACKLI_REMOTE_DEADLINE": "10",
        }

    def start(self) -> "S3Server":
        for _ in range(3):
            self.port = _free_port()
            self.process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                        self.client().create_bucket(Bucket=BUCKET)
                        return self
                except OSError:
                    time.sleep(0.1)
            self.stop()
        raise RuntimeError(f"could not start moto's S3 server (log: {self.log.name})")

    def client(self):
        if self._client is None:
            import boto3

            self._client = boto3.session.Session().client(
                "s3", endpoint_url=self.endpoint, region_name="us-east-1",
                aws_access_key_id="testing", aws_secret_access_key="testing")
        return self._client

    def upload_folder(self, folder: str, prefix: str) -> str:
        """Uploads every file of `folder` (not sub-folders: a directory in a
        mutant has no object) under `prefix`; returns the s3:// URL prefix."""
        client = self.client()
        self.delete_prefix(prefix)
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    client.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}", Body=f.read())
        return f"s3://{BUCKET}/{prefix}"

    def delete_prefix(self, prefix: str) -> None:
        client = self.client()
        listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/")
        keys = [{"Key": item["Key"]} for item in listed.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=BUCKET, Delete={"Objects": keys})

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
