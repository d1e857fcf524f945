"""`sackli clean URL_PREFIX` (`sackli.clean`): removes what killed writers
left on a bucket that `sackli recover` does not finish, so that recover,
then clean, leave a prefix with no hidden object and no unfinished upload.

- **Hidden staging** (`<folder>/.<name>.sackli-partial-<pid>-<tag>/`,
  `_bucket_journal`): removed when no write can still need it. A write
  whose publish was decided (its set manifest says "publishing", naming
  the staging's journal) is kept: `sackli recover` finishes it. One whose
  write ended (the manifest says "complete" for its writer; killed while it
  cleaned up) is removed at once. Any other is removed once nothing in it
  was written for `older_than` seconds: a live writer uploads its shards
  there as it goes. A journal this version cannot read is kept and named.
- **Unfinished uploads** (S3 multipart uploads; GCS cannot list its
  resumable sessions, which expire a week after they start): aborted once
  neither started nor sent a part to for `older_than` seconds, if a bag
  writer's: under hidden
  staging, or of a bag file (`.bag`, `.bagz`, and the files beside them:
  `limits.x.bag`, `x.bagz.sackli_set`). Uploads of other names are another
  program's: listed, never aborted.

Nothing else is touched. Ages are the server's times against this
machine's clock: keep `older_than` well above the clocks' difference.
"""

from __future__ import annotations

import re
import time
from typing import NamedTuple

from ._bucket_journal import remove_staging
from ._bucket_recover import decided_state, read_bucket_journal
from ._format import PARTIAL_MARKER
from ._storage import (
    ListedObject, UnfinishedUpload, abort_upload, delete_object, is_remote, list_modified,
    normalize, unfinished_uploads,
)
from ._unfinished import JOURNAL

__all__ = ["DEFAULT_OLDER_THAN", "CleanReport", "Cleaned", "clean"]

DEFAULT_OLDER_THAN = 3600.0
"""Seconds a staging prefix or upload must have been left alone (an hour)."""

_BAG_FILE = re.compile(r"\.bagz?(\.|$)")


class Cleaned(NamedTuple):
    """What `clean` did (or, in a dry run, would do) with one leftover."""

    url: str
    """A staging prefix (ending in "/"), or the object an upload was making."""
    action: str
    """"removed", "aborted" or "kept" ("would remove", "would abort" in a dry run)."""
    detail: str
    """Why."""
    objects: int
    """The objects removed (an upload: 0)."""
    bytes: int
    """The bytes freed (kept: the bytes it holds)."""

    def line(self) -> str:
        """The line `sackli clean` prints."""
        held = f"{self.objects} object(s), {_size(self.bytes)}" if self.objects else _size(self.bytes)
        return f"{self.action} {self.url} ({held}): {self.detail}"


class CleanReport(NamedTuple):
    """Every leftover `clean` found under its prefix, in the order found."""

    entries: list[Cleaned]
    dry_run: bool = False
    """Whether nothing was changed (the entries say what would be)."""

    def summary(self) -> str:
        """The last line `sackli clean` prints."""
        done = len(self.entries) - len(self.kept)
        return (f"{'would free' if self.dry_run else 'freed'} {_size(self.freed_bytes)} in "
                f"{done} leftover(s); kept {len(self.kept)}")

    @property
    def freed_bytes(self) -> int:
        """The bytes removed or aborted (in a dry run: that would be)."""
        return sum(entry.bytes for entry in self.entries if entry.action != "kept")

    @property
    def kept(self) -> list[Cleaned]:
        """The leftovers left in place (each says why)."""
        return [entry for entry in self.entries if entry.action == "kept"]


def clean(url_prefix: str, *, older_than: float = DEFAULT_OLDER_THAN,
          dry_run: bool = False) -> CleanReport:
    """Removes the hidden staging and aborts the unfinished uploads that
    killed sackli writers left under the `gs://` or `s3://` prefix
    `url_prefix` (see the module docstring for what counts), each once left
    alone for `older_than` seconds (staging of a write that ended: at once).
    Run `sackli.recover(url_prefix)` first: staging whose publish was
    decided is kept for it. With `dry_run`, nothing changes; the report says
    what would. ValueError for a local path or a negative `older_than`."""
    if not is_remote(url_prefix):
        raise ValueError(f"{url_prefix}: `sackli clean` is for gs:// and s3:// prefixes; on "
                         f"local disk `sackli recover {url_prefix}` completes unfinished writes")
    if not older_than >= 0:
        raise ValueError(f"older_than must be >= 0 seconds, not {older_than!r}")
    prefix = normalize(url_prefix)
    now = time.time()
    staging: dict[str, list[ListedObject]] = {}
    for listed in list_modified(prefix):
        unit = _staging_of(listed.url)
        if unit is not None:
            staging.setdefault(unit, []).append(listed)
    entries = [_clean_staging(unit, objects, now, older_than, dry_run)
               for unit, objects in sorted(staging.items())]
    entries += [_clean_upload(upload, now, older_than, dry_run)
                for upload in sorted(unfinished_uploads(prefix))]
    return CleanReport(entries, dry_run)


def _staging_of(url: str) -> str | None:
    """The hidden staging `url` is in: its prefix (ending in "/"), or the
    object itself when it is a hidden partial object; None otherwise."""
    scheme, _, rest = url.partition("://")
    parts = rest.split("/")
    for index, part in enumerate(parts[1:], start=1):
        if part.startswith(".") and PARTIAL_MARKER in part:
            return f"{scheme}://" + "/".join(parts[: index + 1]) + (
                "/" if index < len(parts) - 1 else "")
    return None


def _clean_staging(unit: str, objects: list[ListedObject], now: float, older_than: float,
                   dry_run: bool) -> Cleaned:
    size = sum(listed.size for listed in objects)
    idle = now - max(listed.modified for listed in objects)
    journal_url = unit + JOURNAL
    if any(listed.url == journal_url for listed in objects):
        try:
            journal = read_bucket_journal(journal_url)
            state = decided_state(unit, journal)
        except FileNotFoundError:
            state = None  # removed since it was listed
        except ValueError as error:  # a journal or manifest we cannot read: named, left
            return Cleaned(unit, "kept", str(error), len(objects), size)
        if state == "publishing":
            target = unit.rstrip("/").rpartition("/")[0] + "/" + journal["target"]
            return Cleaned(unit, "kept", f"its publish was decided: `sackli recover {target}` "
                           "finishes it", len(objects), size)
        if state == "complete":
            return _remove(unit, objects, size, dry_run, "its write ended (the set it made is "
                           "complete); it was killed while it cleaned up")
    if idle < older_than:
        return Cleaned(unit, "kept", f"written {_duration(idle)} ago, less than "
                       f"{_duration(older_than)}: a writer may still be using it", len(objects), size)
    return _remove(unit, objects, size, dry_run, f"left alone for {_duration(idle)}")


def _remove(unit: str, objects: list[ListedObject], size: int, dry_run: bool,
            why: str) -> Cleaned:
    if not dry_run:
        if unit.endswith("/"):
            remove_staging(unit)
        else:
            delete_object(unit)
    return Cleaned(unit, "would remove" if dry_run else "removed", why, len(objects), size)


def _clean_upload(upload: UnfinishedUpload, now: float, older_than: float,
                  dry_run: bool) -> Cleaned:
    name = upload.url.rpartition("/")[2]
    if _staging_of(upload.url) is None and not _BAG_FILE.search(name):
        return Cleaned(upload.url, "kept", f"an unfinished upload (id {upload.upload_id}) of a "
                       "name no bag writer makes: another program's, left to it", 0, upload.size)
    idle = now - upload.last_active
    if idle < older_than:
        return Cleaned(upload.url, "kept", f"an upload last sent to {_duration(idle)} ago, less "
                       f"than {_duration(older_than)}: a writer may still be sending it", 0,
                       upload.size)
    if not dry_run:
        abort_upload(upload)
    return Cleaned(upload.url, "would abort" if dry_run else "aborted",
                   f"an unfinished upload, last sent to {_duration(idle)} ago", 0, upload.size)


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{seconds / length:.1f} {unit}"
    return f"{seconds:.0f} s"


def _size(size: int) -> str:
    for unit, length in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= length:
            return f"{size / length:.1f} {unit}"
    return f"{size} B"
