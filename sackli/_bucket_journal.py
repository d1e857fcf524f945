"""The journal of a shard-set write on a bucket, and the publish it makes
repeatable (roll forward).

A set on gs:// or s3:// is staged as hidden objects in one prefix beside
it, `<folder>/.<name@N.ext>.sackli-partial-<pid>-<tag>/` (`staging_prefix`),
and copied onto its names at `close()`. That prefix also holds the write's
journal, `sackli-write.json` (the same name and "kind" as a local set's
journal, `_set_journal`, with "where": "bucket"):

    {"kind": "set", "where": "bucket", "target": "name@N.ext", "overwrite": bool,
     "writer": <id, also in the set manifest>, "state": "staging" | "staged",
     "objects": [{"staged": <name in the prefix>, "final": <name in the folder>,
                  "size": bytes, "identity": ETag or generation, "records": n}],
     "absent": [<names in the folder the publish deletes (stale limits)>]}

It is written "staging" before the first upload, and "staged" (listing
every object with its size and identity) once every staged object is
uploaded, companions (a row set's schema) included. Then the set manifest
says "publishing", naming this journal: that is the decision point. A
write killed before it rolls back (`sackli recover` deletes the prefix:
the folder reads as before); one killed after it rolls forward
(`publish_staged`: the copies, the manifest "complete", the prefix
removed, the older sets replaced), exactly as `close()` goes on.
"""

from __future__ import annotations

import errno
import json
import os
import time
import uuid
from typing import Any, Callable

from ._consistency import SetManifest
from ._format import LIMITS_PREFIX, PARTIAL_MARKER, limits_path_for
from ._set_conflicts import remove_other_sets
from ._storage import (
    MAX_PARALLEL_REQUESTS, copy_object, delete_objects, in_parallel, list_objects, stat_object,
    write_object,
)
from ._unfinished import JOURNAL, folder_name_of

__all__ = ["BucketSetJournal", "StagedChanged", "publish_staged", "staging_prefix"]

_MAX_JOURNAL_BYTES = 1 << 20


class StagedChanged(OSError):
    """A staged object is missing, or is not what the journal recorded:
    rolling forward would publish something else than the write staged."""


def staging_prefix(spec: str) -> str:
    """A fresh hidden prefix beside the set `spec` for its staged objects
    (the set's name in it, glob characters percent-encoded, as locally)."""
    folder, _, name = spec.rpartition("/")
    return f"{folder}/.{folder_name_of(name)}{PARTIAL_MARKER}{os.getpid()}-{uuid.uuid4().hex[:12]}/"


class BucketSetJournal:
    """The staging prefix and journal of one shard-set write on a bucket
    (see the module docstring). `begin()` before the first upload,
    `stage(...)` once every shard is uploaded, `remove()` at the end (or on
    an abort before the decision)."""

    def __init__(self, spec: str, overwrite: bool) -> None:
        self.spec = spec
        self.prefix = staging_prefix(spec)
        self.url = self.prefix + JOURNAL
        self.writer = f"pid {os.getpid()} {uuid.uuid4().hex[:12]}"
        self._document: dict[str, Any] = {
            "kind": "set", "where": "bucket", "target": spec.rpartition("/")[2],
            "overwrite": overwrite, "writer": self.writer, "state": "staging",
            "started": _now(), "objects": [], "absent": []}

    @property
    def document(self) -> dict[str, Any]:
        """The journal as last written."""
        return self._document

    def begin(self) -> None:
        """Writes the journal "staging" (before anything is uploaded)."""
        self._write()

    def stage(self, objects: list[tuple[str, str, int]], companions: list[tuple[str, bytes]],
              absent: list[str]) -> None:
        """Uploads each companion (final URL, content) into the prefix, then
        writes the journal "staged": every (staged URL, final URL, records)
        of `objects` and every companion with its size and identity; the
        final URLs of `absent` are deleted by the publish."""
        staged = list(objects)
        for final, content in companions:
            hidden = self.prefix + "companion." + final.rpartition("/")[2]
            write_object(hidden, content)
            staged.append((hidden, final, 0))
        stats = in_parallel([lambda url=url: stat_object(url) for url, _, _ in staged],
                            MAX_PARALLEL_REQUESTS)
        self._document["objects"] = [
            {"staged": url[len(self.prefix):], "final": final.rpartition("/")[2],
             "size": stat.size, "identity": stat.identity, "records": records}
            for (url, final, records), stat in zip(staged, stats)]
        self._document["absent"] = [url.rpartition("/")[2] for url in absent]
        self._document["state"] = "staged"
        self._write()

    def manifest(self) -> SetManifest:
        """The set's manifest, written by this write (the journal's writer id)."""
        return SetManifest(finals(self.prefix, self._document), self.writer)

    def _write(self) -> None:
        write_object(self.url, json.dumps(self._document, indent=1).encode())

    def remove(self) -> None:
        """Deletes every object in the prefix, the journal last."""
        remove_staging(self.prefix)


def finals(prefix: str, journal: dict[str, Any]) -> list[str]:
    """The final URLs of a journal's shards, in order (no companion, no
    limits object), in the folder of `prefix`."""
    folder = prefix.rstrip("/").rpartition("/")[0]
    return [f"{folder}/{entry['final']}" for entry in journal["objects"]
            if not entry["staged"].startswith("companion.")
            and not entry["final"].startswith(LIMITS_PREFIX)]


def remove_staging(prefix: str) -> None:
    """Deletes every object under `prefix`, its journal last (a journal
    left names nothing that is gone but what a roll back deletes anyway)."""
    urls = [url for url, _ in list_objects(prefix)]
    journal = prefix + JOURNAL
    delete_objects([url for url in urls if url != journal])
    delete_objects([journal])


def publish_staged(prefix: str, journal: dict[str, Any], manifest: SetManifest,
                   on_copied: Callable[[str], None] = lambda url: None) -> list[str]:
    """Rolls the staged write forward, as `close()` goes on after the
    manifest says "publishing": copies every staged object onto its final
    name (each checked first against the journal's size and identity, each
    copy's size after), deletes `absent` names, writes the manifest
    "complete", removes the prefix, then (with `overwrite`) the other sets
    of the name. Repeatable: every step may be done again. Returns the
    shard URLs. StagedChanged when a staged object is missing or changed
    (nothing is copied then)."""
    folder = prefix.rstrip("/").rpartition("/")[0]
    entries = journal["objects"]
    _check_staged(prefix, entries)
    # Companions, then each shard's limits object before its records
    # object: a reader finds a records object only once its limits are there.
    order = sorted(entries, key=lambda entry: (not entry["staged"].startswith("companion."),
                                               not entry["final"].startswith(LIMITS_PREFIX)))
    for entry in order:
        final = f"{folder}/{entry['final']}"
        on_copied(final)  # before: a copy may fail half-way
        copy_object(prefix + entry["staged"], final)
        size = stat_object(final).size
        if size != entry["size"]:
            raise StagedChanged(errno.EIO, f"{final}: its copy has {size} bytes, the staged "
                                f"object {entry['size']}", final)
    delete_objects(f"{folder}/{name}" for name in journal.get("absent", []))
    shards = finals(prefix, journal)
    manifest.complete([f"{folder}/{entry['final']}" for entry in entries
                       if not entry["staged"].startswith("companion.")])
    remove_staging(prefix)
    if journal.get("overwrite"):
        remove_other_sets(f"{folder}/{journal['target']}", len(shards))
    return shards


def _check_staged(prefix: str, entries: list[dict[str, Any]]) -> None:
    def check(entry: dict[str, Any]) -> None:
        url = prefix + entry["staged"]
        try:
            stat = stat_object(url)
        except FileNotFoundError:
            raise StagedChanged(errno.ENOENT, f"{url}: staged, but gone", url) from None
        if (stat.size, stat.identity) != (entry["size"], entry["identity"]):
            raise StagedChanged(
                errno.ESTALE, f"{url}: changed since it was staged (it was {entry['size']} "
                f"bytes, {entry['identity']}; it is {stat.size} bytes, {stat.identity})", url)

    in_parallel([lambda entry=entry: check(entry) for entry in entries], MAX_PARALLEL_REQUESTS)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
