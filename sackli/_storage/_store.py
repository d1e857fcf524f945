"""What every remote back-end offers the engine and the writers."""

from __future__ import annotations

from typing import Any, Iterator

from ._upload import Upload
from ._urls import RemotePath

__all__ = ["Store"]


class Store:
    """A back-end: sizes, ranged reads, listings, uploads (streamed with
    `open_upload`), server-side copies and deletions of objects.

    Subclasses raise FileNotFoundError / PermissionError (with the URL) for
    missing objects and refused credentials, and retry transient failures.
    """

    def reset(self) -> None:
        """Drops any cached client: the next request reads the configuration."""
        raise NotImplementedError

    def size(self, path: RemotePath) -> int:
        """The object's size in bytes (FileNotFoundError when missing)."""
        raise NotImplementedError

    def exists(self, path: RemotePath) -> bool:
        """Whether the object exists."""
        try:
            self.size(path)
        except FileNotFoundError:
            return False
        return True

    def read(self, path: RemotePath, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length) of the object, in one request."""
        raise NotImplementedError

    def read_whole(self, path: RemotePath) -> bytes:
        """The whole object (FileNotFoundError when missing): here its size
        and then its bytes; back-ends that can, in one request."""
        size = self.size(path)
        return self.read(path, 0, size) if size else b""

    def list(self, path: RemotePath) -> Iterator[tuple[str, int]]:
        """(url, size) of every object whose key starts with `path.key`."""
        raise NotImplementedError

    def open_upload(self, path: RemotePath, client: Any = None) -> Upload:
        """A stream that uploads the object as it is written; with `client`,
        through that SDK client instead of the store's own."""
        raise NotImplementedError

    def copy(self, source: RemotePath, target: RemotePath) -> None:
        """Copies an object on the server (no bytes pass through us);
        `target` appears whole. FileNotFoundError when `source` is missing."""
        raise NotImplementedError

    def delete(self, path: RemotePath) -> None:
        """Deletes the object; a missing object is not an error."""
        raise NotImplementedError
