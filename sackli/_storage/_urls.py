"""Remote paths: `gs://bucket/key` and `s3://bucket/key`.

A leading slash is accepted (`/gs://b/k`), and so is the single slash that
pathlib leaves (`pathlib.Path('/gs://b') / 'x'` is `/gs:/b/x`), so pathlib
can build remote paths.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["RemotePath", "base_name", "canonical_path", "is_remote", "normalize", "parse",
           "remote_path"]

SCHEMES = ("gs", "s3")
_REMOTE = re.compile(r"^/?(gs|s3):/+")
_SCHEME = re.compile(r"^/?([a-zA-Z][a-zA-Z0-9+.-]*):/")


class RemotePath(NamedTuple):
    """A parsed remote path."""

    scheme: str
    bucket: str
    key: str

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.bucket}/{self.key}"


def normalize(path: str) -> str:
    """`path` with a remote prefix spelled `gs://` / `s3://`; others as given."""
    match = _REMOTE.match(path)
    return f"{match.group(1)}://{path[match.end():]}" if match else path


def is_remote(path: str) -> bool:
    """Whether `path` names a `gs://` or `s3://` object (any spelling)."""
    return ":" in path and _REMOTE.match(path) is not None


def parse(path: str, object_name: bool = True) -> RemotePath:
    """The scheme, bucket and key of a remote path. ValueError without a
    bucket, or, when `object_name`, without an object name (a key that is
    empty or ends with '/')."""
    url = normalize(path)
    scheme, _, rest = url.partition("://")
    bucket, _, key = rest.partition("/")
    if scheme not in SCHEMES or not bucket:
        raise ValueError(f"{path!r} is not a gs://bucket/key or s3://bucket/key path")
    if object_name and (not key or key.endswith("/")):
        raise ValueError(f"{path!r} names a bucket or folder, not an object (gs://bucket/key, s3://bucket/key)")
    return RemotePath(scheme, bucket, key)


def remote_path(path: str) -> RemotePath | None:
    """The scheme, bucket and key of a remote object path, or None for a
    local path: the one test that tells them apart and parses. ValueError
    for a remote path that names no object (see `parse`)."""
    return parse(path) if is_remote(path) else None


def canonical_path(path: str) -> str:
    """A path as sackli's stores take it: a `gs://` / `s3://` URL in its
    canonical spelling (`/gs://b/k` and pathlib's `/gs:/b/k` are accepted),
    a local path as given.

    Raises ValueError for URLs of storage sackli cannot reach.
    """
    if is_remote(path):
        return normalize(path)
    scheme = _SCHEME.match(path)
    if scheme:
        raise ValueError(
            f"{path}: '{scheme.group(1)}:' paths are not supported; sackli reads and "
            "writes local files (plain or 'posix:' paths), gs:// and s3:// objects"
        )
    return path


def base_name(path: str) -> str:
    """The last component of a path or URL: of a remote URL's key ('' for a
    bucket or a folder), of what follows any other `scheme://`."""
    key = parse(path, object_name=False).key if is_remote(path) else path.partition("://")[2]
    return key.rpartition("/")[2]
