"""Remote writes: a bag is written to a local spool file and uploaded when
it is complete, so no reader ever sees a half-written object."""

from __future__ import annotations

import os
import shutil
import tempfile

from .._format import limits_path_for
from ._urls import parse

__all__ = ["Spool"]


class Spool:
    """A local folder holding the file written for `url` until `publish()`.

    The spool file keeps the object's name, so compression detection by
    suffix sees the same name as for a local file.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        name = parse(url, object_name=False).key.rpartition("/")[2]
        if not name:
            raise IsADirectoryError(f"{url}: a bag needs an object name, not a folder")
        self._folder = tempfile.mkdtemp(prefix="sackli-spool-")
        self.local_path = os.path.join(self._folder, name)

    def publish(self, with_limits_file: bool) -> None:
        """Uploads the spooled file (and first its `limits.` file), then
        deletes the spool."""
        from . import upload  # the package's dispatcher by scheme

        try:
            if with_limits_file:
                upload(limits_path_for(self.local_path), limits_path_for(self.url))
            upload(self.local_path, self.url)
        finally:
            self.discard()

    def discard(self) -> None:
        """Deletes the spool without uploading."""
        shutil.rmtree(self._folder, ignore_errors=True)
