"""Who can read and write the read cache (issue 49 §2, docs/cache.md): the
folders and files sackli creates are its user's alone whatever the umask; a
folder another user owns or can write is refused unless a shared cache is
asked for; nothing is written through a link planted where `usage`, its
lock, a temporary or the secret goes; an entry forged from public facts
(what a HEAD shows) with good CRCs is never served. On moto's S3 through
the tests' proxy."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import threading
import uuid

import pytest

import sackli
from sackli import _engine
from sackli._storage import _read_cache, parse, stat_object
from remote_helpers import Remote, servers, write_bag  # loaded through conftest.py

FIXTURES = (servers,)
BLOCK = 4096
OTHER_USER = "sackli-other"
VICTIM = b"the user's own file\n"


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(_read_cache, "BLOCK_BYTES", BLOCK)
    for name in (_read_cache.ENV_DIR, _read_cache.ENV_MAX_BYTES, "SACKLI_SHARED_CACHE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def store(servers):
    remote = Remote("s3", servers, f"cache-security-{uuid.uuid4().hex[:8]}/")
    remote.proxy.reset_faults()
    remote.proxy.reset_counts()
    return remote


@pytest.fixture
def bag(store):
    """(url, records) of a small bag spanning a few blocks."""
    data = [bytes([i]) * (300 + 40 * i) for i in range(40)]
    url = store.url("bag.bag")
    write_bag(url, data)
    return url, data


@contextlib.contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def modes_under(folder) -> dict[str, int]:
    """{path relative to `folder`: permission bits} of all under it."""
    out = {}
    for root, folders, files in os.walk(folder):
        for name in folders + files:
            path = os.path.join(root, name)
            out[os.path.relpath(path, folder)] = stat.S_IMODE(os.lstat(path).st_mode)
    return out


def planted(folder, mode: int = 0o777) -> str:
    """A cache folder as someone else could leave it for the user: there
    first, writable by everyone."""
    os.makedirs(folder)
    os.chmod(folder, mode)
    return str(folder)


def victim_file(tmp_path) -> str:
    path = tmp_path / "precious.txt"
    path.write_bytes(VICTIM)
    return str(path)


@pytest.mark.parametrize("mask", [0o022, 0o000], ids=["umask-022", "umask-000"])
def test_what_sackli_creates_is_private_whatever_the_umask(bag, tmp_path, mask):
    url, data = bag
    folder = tmp_path / "made" / "by" / "sackli"  # three levels created
    with umask(mask):
        assert list(sackli.Reader(url, cache_dir=folder, cache_max_bytes=1 << 20)) == data
    found = modes_under(tmp_path / "made")
    entries = [path for path in found if "-" in os.path.basename(path)]
    assert len(entries) > 3
    for path, mode in found.items():
        kind = "folder" if os.path.isdir(tmp_path / "made" / path) else "file"
        assert mode == (0o700 if kind == "folder" else 0o600), (path, oct(mode))
    assert stat.S_IMODE(os.stat(tmp_path / "made").st_mode) == 0o700
    assert {"by/sackli/v1/usage", "by/sackli/v1/secret"} <= set(found)


@pytest.mark.parametrize("mode, who", [(0o777, "its group and others"), (0o1777, "its group and others"),
                                       (0o770, "its group"), (0o757, "others")],
                         ids=["0777", "1777", "0770", "0757"])
def test_a_folder_others_can_write_is_refused(bag, tmp_path, mode, who):
    url, _ = bag
    folder = planted(tmp_path / "planted", mode)
    with pytest.raises(PermissionError) as raised:
        sackli.Reader(url, cache_dir=folder)
    message = str(raised.value)
    assert folder in message and f"can be written by {who}" in message
    assert f"mode {mode:04o}" in message
    assert "shared_cache=True" in message and "SACKLI_SHARED_CACHE=1" in message
    assert os.listdir(folder) == []  # nothing written there


def test_a_layout_folder_others_can_write_is_refused(bag, tmp_path):
    url, _ = bag
    folder = tmp_path / "mine"
    os.makedirs(folder / "v1")
    os.chmod(folder, 0o700)
    os.chmod(folder / "v1", 0o777)
    with pytest.raises(PermissionError, match=f"{folder}/v1 can be written by"):
        sackli.Reader(url, cache_dir=folder)
    (folder / "v1").rmdir()
    os.symlink(tmp_path, folder / "v1")  # a link is not followed
    with pytest.raises(NotADirectoryError, match=f"{folder}/v1 is not a folder"):
        sackli.Reader(url, cache_dir=folder)


def _other_user() -> int:
    """The uid of a second user (made when missing), or a skip."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to give a folder to another user (CI runs as root)")
    if shutil.which("useradd") is None:
        pytest.skip("needs useradd, to make a second user")
    made = subprocess.run(["useradd", "--no-create-home", OTHER_USER], capture_output=True)
    if made.returncode not in (0, 9):  # 9: the user exists
        pytest.skip(f"useradd failed: {made.stderr.decode().strip()}")
    import pwd
    return pwd.getpwnam(OTHER_USER).pw_uid


def test_a_folder_another_user_owns_is_refused(bag, tmp_path):
    url, data = bag
    uid = _other_user()
    folder = planted(tmp_path / "theirs", 0o755)
    os.chown(folder, uid, -1)
    with pytest.raises(PermissionError) as raised:
        sackli.Reader(url, cache_dir=folder)
    assert f"{folder} is owned by {OTHER_USER} (uid {uid})" in str(raised.value)
    assert "mode 0755" in str(raised.value)
    # Shared on purpose: used.
    assert list(sackli.Reader(url, cache_dir=folder, shared_cache=True)) == data


def test_a_planted_usage_link_is_refused_then_never_followed(bag, tmp_path):
    # Issue 49, row 1: a world-writable folder made first by someone else,
    # with `v1/usage` a link to one of the user's files.
    url, data = bag
    victim = victim_file(tmp_path)
    folder = planted(tmp_path / "planted")
    os.mkdir(os.path.join(folder, "v1"), 0o777)
    os.chmod(os.path.join(folder, "v1"), 0o777)
    os.symlink(victim, os.path.join(folder, "v1", "usage"))
    with pytest.raises(PermissionError, match="can be written by its group and others"):
        sackli.Reader(url, cache_dir=folder)
    # Used as a shared cache all the same: the link is replaced, not written through.
    reader = sackli.Reader(url, cache_dir=folder, shared_cache=True)
    assert list(reader) == data
    assert open(victim, "rb").read() == VICTIM
    usage = os.path.join(folder, "v1", "usage")
    assert stat.S_ISREG(os.lstat(usage).st_mode) and int(open(usage).read()) > 0


def _fetch_one(cache, payload: bytes, name: str = "object") -> bytes:
    """Block 0 of an object of one block, through `cache` (fetched, kept)."""
    key = cache.object_key(parse(f"s3://bucket/{name}"), "etag", len(payload))
    return cache.read(key, len(payload), 0, len(payload),
                      lambda ranges: [payload[o:o + n] for o, n in ranges])


@pytest.mark.parametrize("where", ["usage", "temporary", "secret"])
def test_links_where_the_cache_writes_are_never_followed(tmp_path, where):
    victim = victim_file(tmp_path)
    folder = str(tmp_path / "cache")
    cache = _read_cache.ReadCache(folder, 1 << 20)
    root = os.path.join(folder, "v1")
    payload = os.urandom(3000)
    key = cache.object_key(parse("s3://bucket/object"), "etag", len(payload))
    entry = cache.entry_path(key, 0)
    os.makedirs(os.path.dirname(entry), exist_ok=True)
    if where == "usage":
        os.unlink(os.path.join(root, "usage"))
        os.symlink(victim, os.path.join(root, "usage"))
    elif where == "temporary":  # this thread's temporary name, in the entry's folder
        # (after a first entry: the count known, no eviction, which would
        # delete temporaries first)
        assert _fetch_one(cache, b"first", "another") == b"first"
        name = f"{_read_cache._TEMPORARY}{os.getpid()}-{threading.get_ident()}"
        os.symlink(victim, os.path.join(os.path.dirname(entry), name))
    else:
        os.unlink(os.path.join(root, "secret"))
        os.symlink(victim, os.path.join(root, "secret"))
        cache = _read_cache.ReadCache(folder, 1 << 20 | 1)  # opens (and makes) the secret
    assert _fetch_one(cache, payload) == payload
    assert open(victim, "rb").read() == VICTIM
    path = os.path.join(root, where) if where != "temporary" else entry
    assert stat.S_ISREG(os.lstat(path).st_mode)
    assert not [name for name in os.listdir(os.path.dirname(entry)) if name.startswith(".tmp-")]
    # And served from the cache afterwards.
    assert cache.entries.read(key, 0, len(payload), 0, len(payload)) == payload


@pytest.mark.parametrize("shared", [False, True], ids=["private", "shared"])
def test_an_entry_forged_from_public_facts_is_never_served(bag, store, tmp_path, shared):
    # Issue 49, row 2: an entry at the right name, for the right key (the
    # SHA-256 of what a HEAD shows: bucket, key, ETag, size), block and
    # length, with good CRCs, made by someone without the cache's secret.
    url, data = bag
    folder = tmp_path / "cache"
    if shared:
        planted(folder)  # shared on purpose: others can write it
    options = sackli.Reader.Options(cache_dir=folder, cache_max_bytes=1 << 20,
                                    shared_cache=shared)
    cache = _read_cache.read_cache(str(folder), 1 << 20, shared)
    facts = stat_object(url)
    key = cache.object_key(parse(url), facts.identity, facts.size)
    forger = _engine.BlockCache(str(tmp_path), os.urandom(16), 1)
    forged = bytes(BLOCK)
    path = cache.entry_path(key, 0)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as file:
        file.write(forger.encode_header(key, 0, forged) + forged)
    store.proxy.reset_counts()
    reader = sackli.Reader(url, options)
    assert reader[5] == data[5] and list(reader) == data
    assert store.proxy.counts.get("GET", 0) > 0  # fetched: the forgery was a miss
    # ... and replaced by the real block.
    assert open(path, "rb").read()[-BLOCK:] != forged
    assert cache.entries.read(key, 0, BLOCK, 0, 10) is not None


def test_a_cache_made_by_an_older_sackli_is_made_private(bag, tmp_path):
    # Folders 0755 and entries 0644 (made under umask 022): its layout
    # folder is closed to others when the user opens it.
    url, data = bag
    folder = tmp_path / "old"
    os.makedirs(folder / "v1" / "3f")
    for path in (folder, folder / "v1", folder / "v1" / "3f"):
        os.chmod(path, 0o755)
    (folder / "v1" / "usage").write_bytes(b"0\n")
    os.chmod(folder / "v1" / "usage", 0o644)
    assert list(sackli.Reader(url, cache_dir=folder)) == data
    assert stat.S_IMODE(os.stat(folder / "v1").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(folder / "v1" / "usage").st_mode) == 0o600


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_shared_cache_shares_with_the_folders_group(bag, tmp_path, monkeypatch, how):
    url, data = bag
    folder = tmp_path / "team"
    os.mkdir(folder)
    os.chmod(folder, 0o2770)  # as `install -d -m 2770 -g team` makes it
    if how == "environment":
        monkeypatch.setenv("SACKLI_SHARED_CACHE", "1")
        options = sackli.Reader.Options(cache_dir=folder)
    else:
        options = sackli.Reader.Options(cache_dir=folder, shared_cache=True)
    with umask(0o077):
        assert list(sackli.Reader(url, options)) == data
    found = modes_under(folder)
    assert found.pop("v1/secret") == 0o640
    for path, mode in found.items():
        if os.path.isdir(folder / path):
            assert mode == 0o2770, (path, oct(mode))
        else:
            assert mode == 0o660, (path, oct(mode))


def test_the_sharing_setting_is_checked(bag, tmp_path, monkeypatch):
    url, _ = bag
    with pytest.raises(TypeError, match="shared_cache must be True or False, not 1"):
        sackli.Reader.Options(shared_cache=1)
    monkeypatch.setenv("SACKLI_SHARED_CACHE", "maybe")
    with pytest.raises(ValueError, match="SACKLI_SHARED_CACHE must be 1 or 0"):
        sackli.Reader(url, cache_dir=tmp_path / "c")
    monkeypatch.setenv("SACKLI_SHARED_CACHE", "0")
    planted(tmp_path / "open")
    with pytest.raises(PermissionError):
        sackli.Reader(url, cache_dir=tmp_path / "open")


def test_the_engine_takes_only_a_secret_of_its_size(tmp_path):
    with pytest.raises(ValueError, match="a cache secret is 16 bytes, not 3"):
        _engine.BlockCache(str(tmp_path), b"abc", 1)
    assert _engine.BlockCache.SECRET_BYTES == 16 and _engine.BlockCache.FORMAT == 3


def test_a_cache_whose_secret_cannot_be_made_warns_and_reads_on(bag, store, tmp_path):
    url, data = bag
    folder = tmp_path / "cache"
    os.makedirs(folder / "v1" / "secret")  # a folder where the secret goes
    os.chmod(folder, 0o700)
    with pytest.warns(RuntimeWarning, match="cannot keep fetched bytes"):
        reader = sackli.Reader(url, cache_dir=folder)
        assert list(reader) == data
    assert os.path.isdir(folder / "v1" / "secret")
