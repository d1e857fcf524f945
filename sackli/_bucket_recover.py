"""`sackli recover` on gs:// and s3://: every interrupted shard-set write
found by its journal (`_bucket_journal`) rolls forward when its publish was
decided (the set manifest says "publishing" or "complete" for this write),
back otherwise (its staging prefix deleted: the folder reads as before the
write, the older set or nothing), or neither when a staged object is gone
or changed since it was staged (nothing is changed then).

A journal on a bucket is read as untrusted input: one whose target is not
the name its prefix carries, or whose names leave the folder, is reported,
never acted on.
"""

from __future__ import annotations

import errno
import json
import re
import urllib.parse
from typing import Any, NamedTuple

from ._bucket_journal import StagedChanged, finals, publish_staged, remove_staging
from ._consistency import MANIFEST_SUFFIX, SetManifest, manifest_url, read_manifest
from ._engine import CorruptionError
from ._format import LIMITS_PREFIX, PARTIAL_MARKER
from ._shard_spec import shard_name, split_shard_entry
from ._storage import delete_object, list_objects, read_object, stat_object
from ._unfinished import JOURNAL, folder_name_of

__all__ = ["BucketRecovery", "decided_state", "missing_error", "read_bucket_journal",
           "recover_bucket_writes"]

_MAX_JOURNAL_BYTES = 1 << 20
_OWN_NAME = re.compile(r"[^/]+")


class BucketRecovery(NamedTuple):
    """What `sackli recover` did with one interrupted write on a bucket."""

    target: str
    """The URL the write was making (`s3://b/out/set@4.bag`)."""
    outcome: str
    """"rolled forward", "rolled back" or "neither"."""
    detail: str
    """Why neither, or what was done."""
    records: int
    """Records of the set rolled forward (0 otherwise)."""

    def line(self) -> str:
        """The line `sackli recover` prints."""
        return f"{self.target}: {self.outcome} ({self.detail})"


def recover_bucket_writes(url: str) -> list[BucketRecovery]:
    """Recovers every interrupted write of `url`: a shard spec
    (`name@N.ext`, `name@*.ext`) or a prefix ending in "/" (every write
    under it). One BucketRecovery each, in the order of their journals,
    then one for each manifest left "publishing" by a write whose staging
    is gone (`_undo_orphaned_manifest`)."""
    done = [_recover_one(journal_url) for journal_url in _journals(url)]
    orphans = [found for found in _manifests(url) if _orphaned(found)]
    return done + [_undo_orphaned_manifest(found) for found in orphans]


def _journals(url: str) -> list[str]:
    """The journal URLs of the writes `url` names."""
    if url.endswith("/"):
        return [found for found, _ in list_objects(url) if _is_journal(found)]
    folder, _, name = url.rpartition("/")
    sharded = split_shard_entry(name)
    if sharded is None:
        return []
    base, _, suffix = sharded
    # Every write of `base@<count or *>suffix` is in a prefix starting so.
    listed = list_objects(f"{folder}/.{folder_name_of(base)}@")
    return [found for found, _ in listed
            if _is_journal(found) and found.rpartition("/")[0].rpartition("/")[0] == folder
            and _could_make(_named_target(found), name)]


def _manifests(url: str) -> list[str]:
    """The set manifests `url` names: the one of `name@N.ext`, every one of
    `name@*.ext`, every one under a prefix ending in "/"."""
    if url.endswith("/"):
        return [found for found, _ in list_objects(url) if found.endswith(MANIFEST_SUFFIX)]
    folder, _, name = url.rpartition("/")
    sharded = split_shard_entry(name)
    if sharded is None:
        return []
    base, count, suffix = sharded
    if count != "*":
        found = manifest_url(f"{folder}/{shard_name(base, 0, int(count), suffix)}")
        return [found] if found is not None else []
    pattern = re.compile(re.escape(f"{folder}/{base}-of-") + r"\d{5}"
                         + re.escape(suffix + MANIFEST_SUFFIX))
    return [found for found, _ in list_objects(f"{folder}/{base}-of-")
            if pattern.fullmatch(found)]


def _orphaned(url: str) -> bool:
    """Whether the manifest at `url` says "publishing" for a write whose
    journal is gone: an abort removed the staging but could not put the
    manifest back (a write decided keeps its journal until the manifest
    says "complete"). Only a journal in the manifest's own folder counts."""
    try:
        manifest = read_manifest(url)
    except CorruptionError:
        return False  # not ours to change: readers report it
    if manifest is None or manifest.get("state") != "publishing":
        return False
    journal = manifest.get("journal")
    folder = url.rpartition("/")[0]
    if not isinstance(journal, str) or journal.rpartition("/")[0].rpartition("/")[0] != folder \
            or not _is_journal(journal):
        return False  # a write without staging (its shards may be mixed): not undone here
    try:
        stat_object(journal)
    except FileNotFoundError:
        return True
    return False


def _undo_orphaned_manifest(url: str) -> BucketRecovery:
    """Deletes a manifest `_orphaned` found: nothing of its write reached
    the set's names (copies begin only after the decision, and a decided
    write keeps its journal), so the set reads as before the write."""
    folder, _, name = url.rpartition("/")
    base, _, rest = name[: -len(MANIFEST_SUFFIX)].rpartition("-of-")
    target = f"{folder}/{base}@{int(rest[:5])}{rest[5:]}"
    delete_object(url)
    return BucketRecovery(target, "rolled back",
                          f"its write was undone, but its manifest {url} still said "
                          "'publishing'; removed it: the set reads as before the write", 0)


def _is_journal(url: str) -> bool:
    prefix, _, name = url.rpartition("/")
    return name == JOURNAL and PARTIAL_MARKER in prefix.rpartition("/")[2]


def _named_target(journal_url: str) -> str:
    """The target the journal's prefix is named for (still encoded)."""
    entry = journal_url.rpartition("/")[0].rpartition("/")[2]
    return entry[1:entry.rindex(PARTIAL_MARKER)]


def _could_make(encoded: str, name: str) -> bool:
    """Whether a write of the (encoded) target `encoded` makes the set `name`."""
    made, wanted = split_shard_entry(urllib.parse.unquote(encoded)), split_shard_entry(name)
    if made is None or wanted is None or made[::2] != wanted[::2]:
        return False
    return "*" in (made[1], wanted[1]) or made[1] == wanted[1]


def _recover_one(journal_url: str) -> BucketRecovery:
    prefix = journal_url.rpartition("/")[0] + "/"
    folder = prefix.rstrip("/").rpartition("/")[0]
    try:
        journal = read_bucket_journal(journal_url)
    except ValueError as error:
        return BucketRecovery(f"{folder}/{_named_target(journal_url)}", "neither", str(error), 0)
    target = f"{folder}/{journal['target']}"
    if journal.get("state") != "staged" or decided_state(prefix, journal) is None:
        remove_staging(prefix)
        return BucketRecovery(target, "rolled back", f"nothing was published; removed {prefix}", 0)
    manifest = SetManifest(finals(prefix, journal), journal["writer"])
    try:
        shards = publish_staged(prefix, journal, manifest)
    except StagedChanged as error:
        return BucketRecovery(target, "neither", f"{error.strerror}; the set is left as it is: "
                              "write it again", 0)
    records = sum(entry.get("records", 0) for entry in journal["objects"])
    return BucketRecovery(target, "rolled forward",
                          f"published {len(shards)} shard(s), {records} record(s)", records)


def decided_state(prefix: str, journal: dict[str, Any]) -> str | None:
    """What the set's manifest says of the journal's write: "publishing"
    (decided, not finished), "complete" (finished), or None (not decided:
    no manifest, or another writer's)."""
    shards = finals(prefix, journal)
    url = manifest_url(shards[0]) if shards else None
    if url is None:
        return None
    manifest = read_manifest(url)
    if manifest is None or manifest.get("writer") != journal["writer"]:
        return None
    state = manifest.get("state")
    return state if state in ("publishing", "complete") else None


def read_bucket_journal(url: str) -> dict[str, Any]:
    """The journal at `url`, checked: ValueError when it is not one this
    sackli wrote, names another target than its prefix's, or names objects
    outside its folder."""
    data = read_object(url)
    try:
        if len(data) > _MAX_JOURNAL_BYTES:
            raise ValueError("too large")
        journal = json.loads(data)
        if not isinstance(journal, dict) or journal.get("kind") != "set" \
                or journal.get("where") != "bucket":
            raise ValueError("not a bucket shard-set journal")
        target = journal.get("target")
        if not isinstance(target, str) or folder_name_of(target) != _named_target(url):
            raise ValueError(f"it names the target {target!r}, not the one its prefix is "
                             "named for")
        if not isinstance(journal.get("writer"), str):
            raise ValueError("no writer")
        base, _, suffix = split_shard_entry(target) or ("", "", "")
        for entry in journal.get("objects", []):
            if not all(isinstance(entry.get(key), str) and _OWN_NAME.fullmatch(entry[key])
                       and entry[key] not in (".", "..") for key in ("staged", "final")):
                raise ValueError(f"an object outside its prefix: {entry!r}")
        for name in [entry["final"] for entry in journal.get("objects", [])] + list(
                journal.get("absent", [])):
            if not _of_set(name, base, suffix):
                raise ValueError(f"a name that is not of the set: {name!r}")
    except (ValueError, TypeError, AttributeError) as error:
        raise ValueError(f"{url}: not a journal this version of sackli can recover from "
                         f"({error}); look inside, then delete its prefix") from None
    return journal


def _of_set(name: Any, base: str, suffix: str) -> bool:
    """Whether `name` is a file of the set `base@...suffix` (a shard, its
    limits object, a file about the set such as its schema): the only
    names a journal may publish or delete."""
    if not isinstance(name, str) or not _OWN_NAME.fullmatch(name) or not base:
        return False
    name = name.removeprefix(LIMITS_PREFIX)
    return name.startswith(base + "-") and (name.endswith(suffix) or f"{suffix}." in name)


def missing_error(url: str) -> FileNotFoundError:
    """The error for a URL with no interrupted write to recover."""
    folder, _, name = url.rpartition("/")
    return FileNotFoundError(
        errno.ENOENT, f"{url}: nothing to recover: no journal of an unfinished write of it "
        f"(under {folder}/.{folder_name_of(name)}{PARTIAL_MARKER}*/) (the write completed, "
        "was rolled back, or never started)", url)
