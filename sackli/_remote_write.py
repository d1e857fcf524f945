"""Remote writes: the records stream into an upload as they are written; the
local disk holds only the bag's limits (8 bytes a record), in a temporary
folder. The object appears when the upload is committed on close, so no
reader ever sees a half-written one, and a write that fails or is discarded
leaves nothing (no object, no unfinished upload)."""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref

from ._consistency import limits_metadata
from ._format import limits_path_for
from ._storage import OpenUpload, Upload, base_name, current_settings, put_file, using

__all__ = ["RemoteWrite"]

_COPY_BYTES = 1 << 20


class RemoteWrite:
    """The upload of `url` and the local folder for the engine's writer.

    The engine writes at `local_path` (a file that never fills: the records
    go to `records`, an `Upload`); it keeps the limits beside it. The local
    name is the object's, so compression detection by suffix sees the same
    name as for a local file. `open_upload` opens the streams (the storage
    layer's, or for Beam, ones configured by the pipeline's options; then
    `tag_limits=False`: the limits go through them too, without metadata).
    """

    def __init__(self, url: str, open_upload: OpenUpload, tag_limits: bool = True) -> None:
        self.url = url
        # Whether a SEPARATE limits object names the version of its records
        # (only for sackli's own objects: not for Beam's temporary objects,
        # which Beam renames by copying).
        self._tag_limits = tag_limits
        name = base_name(url)
        if not name:
            raise IsADirectoryError(f"{url}: a bag needs an object name, not a folder")
        self._open_upload = open_upload
        # The storage settings in effect at open, for the uploads of publish
        # (which may run elsewhere: another thread, outside the caller's block).
        self._settings = current_settings()
        self._folder = tempfile.mkdtemp(prefix="sackli-spool-")
        self.local_path = os.path.join(self._folder, name)
        self.records: Upload = open_upload(url)
        # A writer dropped without close or discard leaves no upload behind.
        self._finalizer = weakref.finalize(self, _abandon, self.records, self._folder)

    def publish(self, with_limits_file: bool) -> None:
        """After the engine closed (and published locally, which renames a
        SEPARATE limits file onto `limits.<name>` here): completes the
        records' upload, then uploads that limits file, its metadata naming
        the records object's version (see `sackli._consistency`). The
        records go first: an upload that fails changes nothing, and a
        reader of a bag whose limits upload failed after its records
        changed sees the mismatch. Deletes the folder; on failure, aborts
        the upload too."""
        try:
            with using(self._settings):
                self._publish(with_limits_file)
        finally:
            self.discard()

    def _publish(self, with_limits_file: bool) -> None:
        self.records.commit()
        if with_limits_file and self._tag_limits:
            version = self.records.identity  # set by every store's commit
            with open(limits_path_for(self.local_path), "rb") as limits:
                put_file(limits_path_for(self.url), limits, limits_metadata(self.url, version))
        elif with_limits_file:
            self._upload_file(limits_path_for(self.local_path), limits_path_for(self.url))

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
        """Aborts the upload (unless committed) and deletes the folder."""
        self._finalizer()


def _abandon(records: Upload, folder: str) -> None:
    records.abort()
    shutil.rmtree(folder, ignore_errors=True)
