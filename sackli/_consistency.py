"""Making bags of several objects on a bucket consistent, or their mixture
detectable.

Object stores replace one object atomically, never several. A bag with
SEPARATE placement is two objects (`x` and `limits.x`), a shard set is N
(and their limits, and a schema file beside a row set), so a writer that
dies, fails or is merely slower than a reader can leave a mixture: new
records with old limits, some new shards and some old. sackli makes every
such mixture an error for its readers:

- **SEPARATE bags.** The writer commits the records object first, then the
  limits object, whose metadata names the records object and the version
  it describes (`sackli-records-object`, `sackli-records-version`: S3's
  ETag, GCS's generation). A reader that opens both checks that they
  match. An upload that fails before the records commit changes nothing.
- **Shard sets.** Beside `name@N.ext` the writer keeps a manifest,
  `name-of-0000N.ext.sackli_set` (JSON). Before it touches any object of
  the set it writes the manifest in state "publishing"; after the last one
  it writes it in state "complete", naming the version of every object of
  the set. A reader that opens every shard of a set checks the manifest,
  when there is one: state complete, and every object it opened at the
  version named. A set without a manifest (written by bagz, or by an older
  sackli, or on local disk) is read as it is.

Readers that do not know these conventions (bagz) see the objects as they
are: during a publish, or after an interrupted one, they can read a mixture.
"""

from __future__ import annotations

import functools
import json
import re
import time
from typing import Any, Iterable, Mapping

from . import _storage
from ._engine import CorruptionError
from ._format import LIMITS_PREFIX

__all__ = [
    "OpenCheck", "RECORDS_OBJECT_KEY", "RECORDS_VERSION_KEY", "SetManifest", "check_opened",
    "limits_metadata", "manifest_url", "read_manifest",
]

RECORDS_OBJECT_KEY = "sackli-records-object"
RECORDS_VERSION_KEY = "sackli-records-version"
MANIFEST_SUFFIX = ".sackli_set"
_FORMAT = "sackli-shard-set/1"
_SHARD = re.compile(r"^(?P<base>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})(?P<suffix>[^/]*)$")


def limits_metadata(records_url: str, version: str) -> dict[str, str]:
    """The metadata of a limits object describing version `version` of the
    records object `records_url`."""
    remote = _storage.parse(records_url)
    return {RECORDS_OBJECT_KEY: f"{remote.bucket}/{remote.key}", RECORDS_VERSION_KEY: version}


def manifest_url(shard_url: str) -> str | None:
    """The manifest of the set a shard URL belongs to; None for a name that
    is not a shard's (`name-0000i-of-0000N.ext`), and for a local path
    (a set on local disk is published by renames, without a manifest)."""
    shard = _bucket_shard(shard_url)
    return None if shard is None else _manifest_in(*shard)


def _bucket_shard(url: str) -> tuple[str, re.Match] | None:
    """(folder, match of `_SHARD`) of a shard URL on a bucket; None for a
    name that is not a shard's, and for a local path: only sets on buckets
    have manifests."""
    if not _storage.by_upload(url):
        return None
    folder, _, name = url.rpartition("/")
    match = _SHARD.match(name)
    return None if match is None else (folder, match)


def _manifest_in(folder: str, shard: re.Match) -> str:
    """The manifest URL of the set of a shard name matched by `_SHARD`."""
    return f"{folder}/{shard['base']}-of-{shard['count']}{shard['suffix']}{MANIFEST_SUFFIX}"


def _split(url: str) -> tuple[str, str]:
    folder, _, name = url.rpartition("/")
    return folder, name


# --- Reading ------------------------------------------------------------------------


def check_opened(paths: Iterable[str], opened: Mapping[str, Any]) -> None:
    """Raises sackli.CorruptionError when the remote objects a reader opened
    (`opened`: URL -> RemoteObject, with `identity` and `metadata`) do not
    belong together: a SEPARATE limits object written for another version
    of its records, or a shard set whose manifest says it is being
    published, or names other versions."""
    OpenCheck(paths, prefetch=False).check(opened)


class OpenCheck:
    """`check_opened` in two steps, so that the manifests' requests overlap
    the opening of the shards: made before the objects open, it starts
    reading the manifest of every complete set among `paths` (on the
    storage layer's pool); `check(opened)` then checks them as
    `check_opened` does.

    The order does not matter: a manifest names the version of every object
    of its set, and the check is that each opened object is at that
    version, whenever either was read."""

    def __init__(self, paths: Iterable[str], prefetch: bool = True) -> None:
        self._sets = _complete_sets(paths)
        self._manifests = {
            url: _storage.Prefetch(functools.partial(read_manifest, url)) if prefetch else None
            for url in self._sets}

    def check(self, opened: Mapping[str, Any]) -> None:
        """Raises as `check_opened` does."""
        if not opened:
            return
        _check_limits_pairs(opened)
        for url, shards in self._sets.items():
            manifest = self._manifests[url]
            _check_set(url, shards, opened,
                       read_manifest(url) if manifest is None else manifest.result())


def _check_limits_pairs(opened: Mapping[str, Any]) -> None:
    for url, limits in opened.items():
        folder, name = _split(url)
        described = limits.metadata.get(RECORDS_OBJECT_KEY)
        if not name.startswith(LIMITS_PREFIX) or described is None:
            continue
        records = opened.get(f"{folder}/{name[len(LIMITS_PREFIX):]}")
        if records is None:
            continue
        remote = _storage.parse(records.url)
        if described != f"{remote.bucket}/{remote.key}":
            continue  # a copy made under another name: the manifest of its set speaks
        version = limits.metadata.get(RECORDS_VERSION_KEY)
        if version != records.identity:
            raise CorruptionError(
                f"{records.url}: its limits object {url} was written for another version of it "
                f"({version}, the object is {records.identity}): a write of this bag is in "
                "progress, or failed or was interrupted after committing the records; "
                "write the bag again")


def _complete_sets(paths: Iterable[str]) -> dict[str, list[str]]:
    """Manifest URL -> shard URLs, for every set all of whose shards are in
    `paths` (a reader of one shard alone does not check its set)."""
    sets: dict[str, list[str]] = {}
    indices: dict[str, set[int]] = {}
    counts: dict[str, int] = {}
    for path in paths:
        url = _storage.normalize(path)
        shard = _bucket_shard(url)
        if shard is None:
            continue
        match = shard[1]
        manifest = _manifest_in(*shard)
        sets.setdefault(manifest, []).append(url)
        indices.setdefault(manifest, set()).add(int(match["index"]))
        counts[manifest] = int(match["count"])
    return {manifest: shards for manifest, shards in sets.items()
            if indices[manifest] == set(range(counts[manifest]))}


def read_manifest(url: str) -> dict | None:
    """The manifest at `url`; None when there is none; CorruptionError when
    it is not one."""
    try:
        data = _storage.read_object(url)
    except FileNotFoundError:
        return None
    try:
        manifest = json.loads(data)
        if manifest.get("format") != _FORMAT or not isinstance(manifest.get("objects"), dict):
            raise ValueError("not a sackli shard-set manifest")
        return manifest
    except ValueError as error:
        raise CorruptionError(f"{url}: unreadable shard-set manifest ({error})") from None


def _check_set(manifest_url_: str, shards: list[str], opened: Mapping[str, Any],
               manifest: dict | None) -> None:
    if manifest is None:
        return  # written without one (bagz, an older sackli)
    folder, name = _split(manifest_url_)
    base, _, rest = name[: -len(MANIFEST_SUFFIX)].rpartition("-of-")
    spec = f"{folder}/{base}@{int(rest[:5])}{rest[5:]}"
    if manifest.get("state") != "complete":
        raise CorruptionError(
            f"{spec}: a write of this shard set is being published, or was interrupted "
            f"(its manifest {manifest_url_} says {manifest.get('state')!r}, since "
            f"{manifest.get('written', '?')}): some shards may be new and others old. "
            + (f"Wait for the writer, or finish its publish with `sackli recover {spec}`"
               if manifest.get("journal") else "Wait for the writer, or write the set again"))
    objects = manifest["objects"]
    members = set()
    for shard in shards:
        name = _split(shard)[1]
        members.update((f"{folder}/{name}", f"{folder}/{LIMITS_PREFIX}{name}"))
    for url in members & opened.keys():
        name = _split(url)[1]
        version = objects.get(name)
        identity = opened[url].identity
        if version != identity:
            found = "is not part of it" if version is None else f"is {identity}, not {version}"
            raise CorruptionError(
                f"{spec}: the set mixes objects of different writes: {url} {found} as "
                f"its manifest {manifest_url_} says; write the set again")


# --- Writing ------------------------------------------------------------------------


class SetManifest:
    """The manifest of a shard set being published on a bucket (see the
    module docstring). `begin()` before the first object of the set
    changes, `complete(files)` after the last; `roll_back()` after a
    failure before any object changed puts the old manifest back."""

    def __init__(self, paths: list[str], writer: str) -> None:
        url = manifest_url(_storage.normalize(paths[0]))
        assert url is not None, paths[0]
        self.url = url
        self._writer = writer
        self._old: bytes | None = None
        self._begun = False

    @classmethod
    def of_set(cls, paths: list[str], writer: str) -> "SetManifest | None":
        """The manifest of the shard set `paths` when it has one (on a
        bucket); None for a set on local disk, published by renames."""
        if manifest_url(_storage.normalize(paths[0])) is None:
            return None
        return cls(paths, writer)

    def begin(self, journal: str | None = None) -> None:
        """Marks the set as being published (keeps the old manifest);
        `journal`: the URL of the write's journal (`_bucket_journal`), which
        `sackli recover` rolls forward from."""
        try:
            self._old = _storage.read_object(self.url)
        except FileNotFoundError:
            self._old = None
        self._begun = True
        self._write("publishing", {}, journal)

    def complete(self, files: Iterable[str]) -> None:
        """Names the version of every file of the set, now published."""
        urls = list(files)
        stats = _storage.in_parallel([functools.partial(_storage.stat_object, url) for url in urls],
                                     _storage.MAX_PARALLEL_REQUESTS)
        self._write("complete", {_split(url)[1]: stat.identity for url, stat in zip(urls, stats)})

    def _write(self, state: str, objects: dict[str, str], journal: str | None = None) -> None:
        document = {"format": _FORMAT, "state": state, "writer": self._writer,
                    "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "objects": objects}
        if journal is not None:
            document["journal"] = journal
        _storage.write_object(self.url, json.dumps(document, indent=1, sort_keys=True).encode())

    def roll_back(self) -> None:
        """Puts back the manifest the set had before `begin()` (or none)."""
        if not self._begun:
            return
        if self._old is None:
            _storage.delete_object(self.url)
        else:
            _storage.write_object(self.url, self._old)

    def remove(self) -> None:
        """Deletes the manifest (after a failed write removed the set's new
        objects: what is left has missing shards, which readers report)."""
        _storage.delete_object(self.url)
