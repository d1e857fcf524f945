"""Write destinations: what differs between writing into this machine's
file systems and uploading to a bucket, in one object chosen where a path
enters (`write_destination`), so that writers call its methods instead of
asking which store they write to.

Locally a write is staged under a hidden name on the target's file system
(a temporary file, or a partial folder holding a journal), renamed into
place when finished (fsynced first when durable), and what a write cut
short leaves stays there to be recovered. On a bucket an object appears
whole when its upload commits: nothing is renamed, no folder is made, and
nothing of an unfinished write is kept. The operations here are generic
(stage, publish, discard, occupied); what a bag, a dataset or a map puts
in them stays with their writers.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import uuid
from typing import BinaryIO, Iterator

from ._folders import make_unique_folder, remove_folder
from ._local import LocalStore, sync_folders
from ._objects import atomic_output, object_exists, reset_clients
from ._staged import LocalStagedFile, StagedFile, UploadStagedFile
from ._traits import MAX_PARALLEL_REQUESTS
from ._upload import OpenUpload
from ._urls import is_remote

__all__ = ["LocalDestination", "UploadDestination", "WriteDestination", "write_destination"]

_LOCAL = LocalStore()
# A staged output's buffer: large writes (a map's values) go out in fewer calls.
_OUTPUT_BUFFER = 256 << 10


def write_destination(path: str) -> "WriteDestination":
    """Where a write of `path` (a file, a folder, a shard spec) goes: a
    `LocalDestination` for a path of this machine, an `UploadDestination`
    for a `gs://` / `s3://` URL. Decided once, where the path enters."""
    return UploadDestination(path) if is_remote(path) else LocalDestination(path)


class WriteDestination:
    """What a writer of `path` asks of its store (see the module doc)."""

    keeps_unfinished: bool
    """Whether a write cut short (a crash, a writer dropped unclosed) leaves
    what it wrote, with a journal, for `sackli.recover`; where not, nothing
    of it is kept and there is nothing to recover."""
    grows_in_place: bool
    """Whether a file can be written at its own name as it grows (a bag
    with `atomic=False`); an object exists only once uploaded whole."""
    parallel_opens: int
    """How many files of the destination to open or close at once: more
    than one only where each waits on the network (`parallel_requests`)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def at(self, path: str) -> "WriteDestination":
        """The destination of another path of the same store (a shard of a
        set, a file of a folder), decided with this one."""
        return type(self)(path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"

    def occupied(self, marker: str | None = None) -> bool:
        """Whether `path` is taken, so that a write that must not replace
        anything is refused: locally when anything has the name; on a
        bucket when the object `marker` inside it (what a finished folder
        writes last) exists, and never without a marker (an object is
        replaced whole)."""
        raise NotImplementedError

    def check_folder(self, name: object) -> None:
        """FileNotFoundError naming `name` (the path as the caller gave it)
        when the folder that must hold `path` is missing; a bucket has no
        folders to miss."""
        raise NotImplementedError

    def stage_file(self, open_upload: OpenUpload | None = None) -> StagedFile:
        """Where a file writer writes `path` until it is published (see
        `StagedFile`): locally the path itself, which the writer stages and
        renames on its own; on a bucket a stream into its upload, opened by
        `open_upload` (by default the storage layer's)."""
        raise NotImplementedError

    def staging_folder(self, hidden_prefix: str) -> str:
        """Where a write of the folder `path` puts its files until it is
        published: locally a new folder `<hidden_prefix><random>` (its
        parents made; mode 0777 less the umask); on a bucket `path` itself,
        whose objects each appear whole (the caller writes a marker last)."""
        raise NotImplementedError

    def publish_folder(self, staged: str, *, durable: bool, journal: str | None = None) -> None:
        """Puts the finished `staging_folder` in place: locally renamed onto
        `path` (FileExistsError, and nothing moved, when `path` was created
        meanwhile), then the file `journal` in it removed (after the rename:
        a crash then leaves no finished write in a hidden folder without its
        journal), then its parent fsynced when `durable`. On a bucket the
        objects are already in place."""
        raise NotImplementedError

    def discard_folder(self, staged: str) -> None:
        """Deletes a `staging_folder` that will not be published (locally;
        on a bucket the objects already committed stay: without the marker
        no reader takes them for a folder)."""
        raise NotImplementedError

    def scratch_path(self, beside: str) -> str:
        """Where this process writes a scratch file that it reads back
        before publishing: locally `beside` (a name beside the target, on
        its file system); for an upload a fresh hidden name in this
        machine's temporary folder with the same ending (nothing is written
        beside an object but what is published)."""
        raise NotImplementedError

    @contextlib.contextmanager
    def output(self, staged: str | None = None, *, durable: bool = False) -> Iterator[BinaryIO]:
        """A binary file that becomes `path` whole when the block ends
        without error: locally written at `staged` (a name on the target's
        file system, e.g. in a journaled partial folder; a hidden name
        beside the target when None) and renamed onto it (a symbolic link is
        written through), fsynced first and the folder after when
        `durable`; on a bucket an upload committed then. On error nothing
        appears, and nothing is left."""
        raise NotImplementedError
        yield  # pragma: no cover - a generator, for the type checker

    def before_cleanup(self) -> None:
        """Prepares the clean-up of a failed write: a connection that failed
        may be out of step (answers off by one), so an upload's clean-up
        goes out on fresh connections; a local one needs nothing."""
        raise NotImplementedError


class LocalDestination(WriteDestination):
    """A path of this machine's file systems."""

    keeps_unfinished = True
    grows_in_place = True
    parallel_opens = 1

    def occupied(self, marker: str | None = None) -> bool:
        return _LOCAL.exists(self.path)

    def check_folder(self, name: object) -> None:
        folder = os.path.dirname(self.path)
        if folder and not os.path.isdir(folder):
            raise FileNotFoundError(errno.ENOENT, f"{name}: the folder does not exist", folder)

    def stage_file(self, open_upload: OpenUpload | None = None) -> StagedFile:
        return LocalStagedFile(self.path)

    def staging_folder(self, hidden_prefix: str) -> str:
        os.makedirs(os.path.dirname(hidden_prefix), exist_ok=True)
        return make_unique_folder(hidden_prefix)

    def publish_folder(self, staged: str, *, durable: bool, journal: str | None = None) -> None:
        if _LOCAL.exists(self.path):
            raise FileExistsError(f"{self.path}: created by someone else meanwhile")
        os.rename(staged, self.path)
        if journal is not None:
            os.remove(os.path.join(self.path, journal))
        if durable:
            sync_folders([self.path])

    def discard_folder(self, staged: str) -> None:
        remove_folder(staged)

    def scratch_path(self, beside: str) -> str:
        return beside

    @contextlib.contextmanager
    def output(self, staged: str | None = None, *, durable: bool = False) -> Iterator[BinaryIO]:
        with _LOCAL.writing(self.path, durable=durable, staged=staged,
                            buffering=_OUTPUT_BUFFER) as file:
            yield file

    def before_cleanup(self) -> None:
        pass


class UploadDestination(WriteDestination):
    """A `gs://` / `s3://` object or prefix: objects uploaded whole."""

    keeps_unfinished = False
    grows_in_place = False
    parallel_opens = MAX_PARALLEL_REQUESTS

    def occupied(self, marker: str | None = None) -> bool:
        return marker is not None and object_exists(f"{self.path}/{marker}")

    def check_folder(self, name: object) -> None:
        pass

    def stage_file(self, open_upload: OpenUpload | None = None) -> StagedFile:
        return UploadStagedFile(self.path, open_upload)

    def staging_folder(self, hidden_prefix: str) -> str:
        return self.path

    def publish_folder(self, staged: str, *, durable: bool, journal: str | None = None) -> None:
        pass

    def discard_folder(self, staged: str) -> None:
        pass

    def scratch_path(self, beside: str) -> str:
        ending = os.path.splitext(beside)[1]
        return os.path.join(tempfile.gettempdir(),
                            f".sackli-spool-{os.getpid()}-{uuid.uuid4().hex[:12]}{ending}")

    @contextlib.contextmanager
    def output(self, staged: str | None = None, *, durable: bool = False) -> Iterator[BinaryIO]:
        # An object is committed durably by its store anyway.
        with atomic_output(self.path) as file:
            yield file

    def before_cleanup(self) -> None:
        reset_clients()
