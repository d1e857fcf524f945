"""Staged files: where a file writer (the engine's bag writer) writes a
file until it is published, as its destination decides
(`WriteDestination.stage_file`).

A local file is written by the writer itself at its path: the writer
stages it under a temporary name and renames it, and a write cut short
stays for recovery, so there is nothing to do here. An object streams into
an upload as it is written; the local disk holds only the small files the
writer keeps beside it (a bag's limits), in a spool folder of their own.
The object appears when the upload is committed on `publish`, so no reader
ever sees a half-written one, and a write that fails or is discarded leaves
nothing (no object, no unfinished upload).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from typing import Callable, Protocol

from ._objects import open_upload as _open_upload, put_file
from ._settings import current_settings, using
from ._upload import OpenUpload, Upload
from ._urls import base_name

__all__ = ["LocalStagedFile", "StagedFile", "UploadStagedFile"]

_COPY_BYTES = 1 << 20

Tag = Callable[[str], "dict[str, str]"]
"""The metadata of a file published beside an object, given the identity
of the object's committed version."""


class Abandonable(Protocol):
    """A writer that can stop and keep what it wrote."""

    def abandon(self) -> None: ...


class StagedFile:
    """Where a writer of `path` writes it: at `local_path` (its name as the
    target's, so suffix detection sees the same), with the bytes going to
    `stream` instead when that is not None (`url` then names the object)."""

    path: str
    local_path: str
    stream: Upload | None
    url: str
    keeps_unfinished: bool
    """Whether what the writer wrote stays for recovery when it is
    abandoned (else the write is discarded: nothing is kept)."""

    def publish(self, beside: list[tuple[str, str]], tag: Tag | None = None) -> None:
        """After the writer finished (and renamed what it wrote locally):
        makes the file appear at `path`, then each (local file, name) of
        `beside` at its name (with `tag`'s metadata). Locally the writer's
        renames did it all: each local file is at its name already."""
        raise NotImplementedError

    def discard(self) -> None:
        """Deletes what is staged here (the writer deletes its own files)."""
        raise NotImplementedError

    def abandon(self, writer: Abandonable, discard: Callable[[], None]) -> None:
        """Stops `writer` without publishing: locally what it wrote stays for
        recovery (`writer.abandon()`: what a crash after a flush leaves); an
        upload is discarded (`discard`: a bucket keeps no unfinished write)."""
        raise NotImplementedError


class LocalStagedFile(StagedFile):
    """A local file, staged and renamed by its writer."""

    keeps_unfinished = True

    def __init__(self, path: str) -> None:
        self.path = self.local_path = path
        self.stream = None
        self.url = ""

    def publish(self, beside: list[tuple[str, str]], tag: Tag | None = None) -> None:
        # The writer wrote each file at its own name, and renamed it.
        assert all(local == name for local, name in beside), beside

    def discard(self) -> None:
        pass

    def abandon(self, writer: Abandonable, discard: Callable[[], None]) -> None:
        writer.abandon()


class UploadStagedFile(StagedFile):
    """An object streamed into an upload; the files beside it wait in a
    local spool folder. `open_upload` opens the streams (the storage
    layer's, or for Beam, ones configured by the pipeline's options)."""

    keeps_unfinished = False

    def __init__(self, url: str, open_upload: OpenUpload | None = None) -> None:
        self.path = self.url = url
        name = base_name(url)
        if not name:
            raise IsADirectoryError(f"{url}: a bag needs an object name, not a folder")
        self._open_upload = open_upload or _open_upload
        # The storage settings in effect at open, for the uploads of publish
        # (which may run elsewhere: another thread, outside the caller's block).
        self._settings = current_settings()
        self._folder = tempfile.mkdtemp(prefix="sackli-spool-")
        self.local_path = os.path.join(self._folder, name)
        self.stream = self._open_upload(url)
        # A writer dropped without publish or discard leaves no upload behind.
        self._finalizer = weakref.finalize(self, _abandon, self.stream, self._folder)

    def publish(self, beside: list[tuple[str, str]], tag: Tag | None = None) -> None:
        """Completes the upload, then uploads each file of `beside` (with
        `tag`'s metadata, naming the object's version: see
        `sackli._consistency`). The object goes first: an upload that fails
        changes nothing. Deletes the spool folder; on failure, aborts the
        upload too."""
        try:
            with using(self._settings):
                self._publish(beside, tag)
        finally:
            self.discard()

    def _publish(self, beside: list[tuple[str, str]], tag: Tag | None) -> None:
        assert self.stream is not None
        self.stream.commit()
        for local_path, url in beside:
            if tag is not None:
                version = self.stream.identity  # set by every store's commit
                with open(local_path, "rb") as file:
                    put_file(url, file, tag(version))
            else:
                self._upload_file(local_path, url)

    def _upload_file(self, local_path: str, url: str) -> None:
        upload = self._open_upload(url)
        try:
            with open(local_path, "rb") as source:
                while chunk := source.read(_COPY_BYTES):
                    upload.write(chunk)
            upload.commit()
        finally:
            upload.abort()  # a no-op once committed

    def discard(self) -> None:
        """Aborts the upload (unless committed) and deletes the spool folder."""
        self._finalizer()

    def abandon(self, writer: Abandonable, discard: Callable[[], None]) -> None:
        discard()


def _abandon(stream: Upload, folder: str) -> None:
    stream.abort()
    shutil.rmtree(folder, ignore_errors=True)
