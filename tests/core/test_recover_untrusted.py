"""Recovery acts only on its own write (issue 49, §1).

A hidden partial folder may come with a download or sit in a folder that
many people write: recovery treats it as untrusted input. Each test builds
what an attacker would leave, runs recovery (the library and the command
line) and checks that it refuses, naming the entry, and that every file
outside the folder is byte for byte what it was.

The cross-user cases need root (CI runs as root): a second user,
`sackli-other`, makes the links in a sticky, world-writable folder under
/tmp (outside pytest's 0700 tmp root); without root they skip, and the
single-user tests show the same refusals.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import struct
import subprocess
import tempfile

import pytest

import sackli
import sackli.maps
from crash_helpers import sackli_cli
from sackli import _engine

OTHER_USER = "sackli-other"
SECRET = b"export SECRET=1\n"


def _limits(*ends: int) -> bytes:
    return b"".join(struct.pack("<Q", end) for end in ends)


def _partial(folder, name: str, tag: str = "x1"):
    """Makes the hidden folder `.<name>.sackli-partial-<tag>/` in `folder`."""
    path = folder / f".{name}.sackli-partial-{tag}"
    path.mkdir()
    return path


def _interrupted_bag(partial, name: str) -> None:
    """What a killed sackli.Writer of `name` leaves: two records, their limits."""
    (partial / name).write_bytes(b"abcde")
    (partial / f"limits.{name}").write_bytes(_limits(3, 5))


@pytest.fixture
def sentinel(tmp_path):
    """A file outside the folder where recovery runs (`.bashrc`)."""
    home = tmp_path / "home"
    home.mkdir()
    path = home / ".bashrc"
    path.write_bytes(SECRET)
    return path


@pytest.fixture
def download(tmp_path):
    folder = tmp_path / "download"
    folder.mkdir()
    return folder


# --- links, devices and hard links inside the folder ---------------------------


def test_a_records_file_that_is_a_link_is_refused_and_its_target_kept(download, sentinel):
    partial = _partial(download, "data.bagz")
    (partial / "data.bagz").symlink_to(os.path.relpath(sentinel, partial))
    (partial / "limits.data.bagz").write_bytes(b"")
    with pytest.raises(PermissionError, match=r"data\.bagz\.sackli-partial-x1/data\.bagz: a symbolic link"):
        sackli.recover(download / "data.bagz")
    assert sentinel.read_bytes() == SECRET
    assert (partial / "data.bagz").is_symlink() and not (download / "data.bagz").exists()


def test_the_engine_opens_nothing_through_a_link_either(download, sentinel):
    # What closes the race: a name swapped for a link after the check.
    partial = _partial(download, "data.bag")
    (partial / "data.bag").symlink_to(sentinel)
    (partial / "limits.data.bag").write_bytes(b"")
    with pytest.raises(OSError, match="data.bag: is a symbolic link: recovery follows no links"):
        _engine.recover(str(partial / "data.bag"))
    assert sentinel.read_bytes() == SECRET


def test_the_engine_refuses_a_limits_file_that_is_a_link(download, sentinel):
    partial = _partial(download, "data.bag")
    (partial / "data.bag").write_bytes(b"abc")
    (partial / "limits.data.bag").symlink_to(sentinel)
    with pytest.raises(OSError, match="limits.data.bag: is a symbolic link"):
        _engine.recover(str(partial / "data.bag"))
    assert (partial / "data.bag").read_bytes() == b"abc" and sentinel.read_bytes() == SECRET


def test_the_engine_does_not_enter_a_partial_folder_that_is_a_link(download, tmp_path):
    private = tmp_path / "private"
    private.mkdir()
    _interrupted_bag(private, "data.bag")
    link = download / ".data.bag.sackli-partial-x1"
    link.symlink_to(private)
    with pytest.raises(OSError, match="sackli-partial-x1: is a symbolic link"):
        _engine.recover(str(link / "data.bag"))
    assert (private / "data.bag").read_bytes() == b"abcde"


def test_a_hard_link_to_a_file_elsewhere_is_refused(download, sentinel):
    partial = _partial(download, "data.bag")
    os.link(sentinel, partial / "data.bag")
    (partial / "limits.data.bag").write_bytes(b"")
    with pytest.raises(PermissionError, match="data.bag: a file with 2 hard links"):
        sackli.recover(download / "data.bag")
    with pytest.raises(PermissionError, match="data.bag: has 2 hard links"):
        _engine.recover(str(partial / "data.bag"))
    assert sentinel.read_bytes() == SECRET


def test_a_fifo_is_refused_without_waiting_for_a_writer(download):
    partial = _partial(download, "data.bag")
    os.mkfifo(partial / "data.bag")
    (partial / "limits.data.bag").write_bytes(b"")
    with pytest.raises(PermissionError, match="data.bag: not a regular file"):
        sackli.recover(download / "data.bag")
    os.remove(partial / "limits.data.bag")
    os.mkfifo(partial / "limits.data.bag")
    with pytest.raises(OSError, match="is not a regular file"):
        _engine.recover(str(partial / "data.bag"))


def test_a_link_deep_in_a_dataset_write_is_refused(download, sentinel):
    partial = _partial(download, "ds")
    (partial / "sackli-write.json").write_text(json.dumps({
        "kind": "dataset", "target": "ds", "module": "sackli.datasets._recover", "version": 1,
        "spec": {"x": "int"}, "durable": False}))
    bag = partial / ".refs.bag.sackli-partial-y"
    bag.mkdir()
    (bag / "refs.bag").symlink_to(sentinel)
    with pytest.raises(PermissionError, match=r"refs\.bag\.sackli-partial-y/refs\.bag: a symbolic link"):
        sackli.recover(download / "ds")
    assert sentinel.read_bytes() == SECRET and not (download / "ds").exists()


def test_a_map_spill_that_is_a_link_is_refused(download, sentinel):
    partial = _partial(download, "m.mb")
    (partial / "sackli-write.json").write_text(json.dumps({
        "kind": "map", "target": "m.mb", "module": "sackli.maps._recover", "version": 1,
        "compress": None, "spill": "values.spill", "durable": False}))
    (partial / "values.spill").symlink_to(sentinel)
    with pytest.raises(PermissionError, match="values.spill: a symbolic link"):
        sackli.recover(download / "m.mb")
    assert sentinel.read_bytes() == SECRET and not (download / "m.mb").exists()


def test_a_partial_folder_that_is_a_link_is_refused(download, tmp_path):
    private = tmp_path / "private"
    private.mkdir()
    _interrupted_bag(private, "data.bag")
    (download / ".data.bag.sackli-partial-1").symlink_to(private)
    with pytest.raises(PermissionError, match="sackli-partial-1: the hidden folder .* is a symbolic link"):
        sackli.recover(download / "data.bag")
    assert (private / "data.bag").read_bytes() == b"abcde"
    assert not (download / "data.bag").exists()


# --- journals that name another target ----------------------------------------


def test_a_journal_naming_another_file_is_reported_not_acted_on(download):
    notes = download / "notes.txt"
    notes.write_bytes(b"my notes")
    partial = _partial(download, "data.mb")
    (partial / "sackli-write.json").write_text(json.dumps({
        "kind": "map", "target": "notes.txt", "module": "sackli.maps._recover", "version": 1,
        "compress": None, "spill": "values.spill", "durable": False}))
    for path in (download / "data.mb", download / "notes.txt", partial):
        with pytest.raises((ValueError, FileNotFoundError)) as raised:
            sackli.recover(path)
        if isinstance(raised.value, ValueError):
            assert "its journal names the target 'notes.txt'" in str(raised.value)
    assert notes.read_bytes() == b"my notes" and partial.is_dir()


@pytest.mark.parametrize("module", ["os", "sackli._engine", "sackli.datasets._recover"])
def test_a_journal_naming_other_code_is_refused_naming_the_folder(download, module):
    partial = _partial(download, "m.mb")
    (partial / "sackli-write.json").write_text(json.dumps({
        "kind": "map", "target": "m.mb", "module": module, "version": 1, "compress": None,
        "spill": "values.spill", "durable": False}))
    with pytest.raises(ValueError, match=r"m\.mb\.sackli-partial-x1: "):
        sackli.recover(download / "m.mb")
    assert not (download / "m.mb").exists()


def _real_set(folder, count: int) -> dict:
    with sackli.ShardedWriter(str(folder / f"real@{count}.bag"), num_records=count) as writer:
        writer.write_many([b"real%d" % i for i in range(count)])
    return {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}


def _set_journal(partial, target: str, counts: list[int], overwrite: bool) -> None:
    (partial / "sackli-write.json").write_text(json.dumps({
        "kind": "set", "target": target, "mode": "count", "counts": counts, "in_place": False,
        "options": {"limits_placement": "TAIL", "compression": {"none": True}, "atomic": True,
                    "durable": False},
        "overwrite": overwrite}))


def test_a_set_journal_with_overwrite_deletes_no_other_set(download):
    before = _real_set(download, 4)
    partial = _partial(download, "real@2.bag")
    _set_journal(partial, "real@2.bag", [1, 1], overwrite=True)
    with pytest.raises(FileExistsError, match=r"real@4\.bag .*recovery deletes no other set"):
        sackli.recover(download / "real@2.bag")
    after = {path.name: path.read_bytes() for path in download.iterdir() if path.is_file()}
    assert after == before and partial.is_dir()


def test_a_set_journal_of_another_name_is_refused(download):
    before = _real_set(download, 4)
    partial = _partial(download, "stray@2.bag")
    _set_journal(partial, "real@2.bag", [1, 1], overwrite=True)
    with pytest.raises(ValueError, match="names the target 'real@2.bag', not 'stray@2.bag'"):
        sackli.recover(partial)
    after = {path.name: path.read_bytes() for path in download.iterdir() if path.is_file()}
    assert after == before


def test_a_set_journal_dealing_into_other_names_is_refused(download):
    before = _real_set(download, 3)
    partial = _partial(download, "real@2.bag")
    _set_journal(partial, "real@2.bag", [1, 1, 1], overwrite=False)  # would publish real@3
    with pytest.raises(ValueError, match=r"deals its records into \[1, 1, 1\], not into the 2 shards"):
        sackli.recover(download / "real@2.bag")
    after = {path.name: path.read_bytes() for path in download.iterdir() if path.is_file()}
    assert after == before


def test_a_set_journal_without_writer_options_is_a_value_error(download):
    partial = _partial(download, "real@2.bag")
    _set_journal(partial, "real@2.bag", [1, 1], overwrite=False)
    journal = json.loads((partial / "sackli-write.json").read_text())
    del journal["options"]
    (partial / "sackli-write.json").write_text(json.dumps(journal))
    with pytest.raises(ValueError, match="sackli-partial-x1: .*no valid writer options"):
        sackli.recover(download / "real@2.bag")


def test_a_set_journal_with_overwrite_replaces_its_own_names_once_complete(download):
    _real_set(download, 2)
    partial = _partial(download, "real@2.bag")
    _set_journal(partial, "real@2.bag", [1, 1], overwrite=True)
    for index in range(2):
        with sackli.Writer(partial / f"real-0000{index}-of-00002.bag", atomic=False) as writer:
            writer.write(b"new%d" % index)
    assert sackli.recover(download / "real@2.bag").records == 2
    assert list(sackli.Reader(str(download / "real@*.bag"))) == [b"new0", b"new1"]


# --- the command line -------------------------------------------------------------


def test_cli_recover_dir_refuses_naming_the_entry_and_goes_on(download, sentinel):
    bad = _partial(download, "data.bagz")
    (bad / "data.bagz").symlink_to(sentinel)
    (bad / "limits.data.bagz").write_bytes(b"")
    _interrupted_bag(_partial(download, "good.bag"), "good.bag")
    done = sackli_cli("recover", str(download), cwd=download)
    assert done.returncode == 1
    assert "sackli-partial-x1/data.bagz: a symbolic link: not recovered" in done.stderr
    assert "good.bag: recovered 2 record(s)" in done.stdout
    assert sentinel.read_bytes() == SECRET


def test_cli_info_says_a_refused_folder_will_not_be_recovered(download, sentinel):
    with sackli.Writer(download / "data.bagz") as writer:
        writer.write(b"x")
    bad = _partial(download, "data.bagz")
    (bad / "data.bagz").symlink_to(sentinel)
    done = sackli_cli("info", str(download / "data.bagz"), cwd=download)
    assert done.returncode == 0, done.stderr
    assert "a hidden folder that sackli will not recover" in done.stderr
    assert "complete it with" not in done.stderr


def test_cli_recover_escapes_control_characters_in_names(download):
    name = "evil\x1b[2J\x07.bag"
    _interrupted_bag(_partial(download, name), name)
    done = sackli_cli("recover", str(download), cwd=download)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "evil\\x1b[2J\\x07.bag: recovered 2 record(s)" in done.stdout
    bad = _partial(download, name, tag="x2")
    (bad / name).symlink_to("/etc/hostname")
    done = sackli_cli("recover", str(download / name), cwd=download)
    assert done.returncode == 1 and "\x1b" not in done.stderr and "evil\\x1b[2J" in done.stderr


# --- real interrupted writes still recover --------------------------------------


def test_a_real_interrupted_bag_still_recovers(download):
    _interrupted_bag(_partial(download, "data.bag"), "data.bag")
    assert sackli.recover(download / "data.bag").records == 2
    assert list(sackli.Reader(download / "data.bag")) == [b"abc", b"de"]
    assert os.listdir(download) == ["data.bag"]


# --- other users: a shared, sticky folder ----------------------------------------


@pytest.fixture(scope="module")
def other_user() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        pytest.skip("needs root: it makes a second user (sackli-other) to act as another user")
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
                   capture_output=True, check=False)  # fails harmlessly when it exists
    return pwd.getpwnam(OTHER_USER)


@pytest.fixture
def shared():
    """A sticky, world-writable folder under /tmp (as /tmp itself is)."""
    folder = tempfile.mkdtemp(prefix="sackli-shared-", dir="/tmp")
    os.chmod(folder, 0o1777)
    yield folder
    shutil.rmtree(folder)


def _as(user: pwd.struct_passwd, *command: str) -> None:
    subprocess.run(command, user=user.pw_uid, group=user.pw_gid, check=True, timeout=30)


def test_another_users_link_in_a_sticky_folder_is_not_followed_by_writers(
        other_user, shared, sentinel):
    link = os.path.join(shared, "out.bag")
    _as(other_user, "ln", "-s", str(sentinel), link)
    with pytest.raises(PermissionError, match="out.bag: a symbolic link owned by another user"):
        sackli.Writer(link)
    with pytest.raises(PermissionError, match="out.bag: a symbolic link owned by another user"):
        sackli.Writer(link, atomic=False)
    with pytest.raises(PermissionError, match="out.bag: a symbolic link owned by another user"):
        sackli.maps.write(link, [(1, b"x")])
    assert sentinel.read_bytes() == SECRET
    assert [name for name in os.listdir(shared)] == ["out.bag"]


def test_a_link_of_the_folders_owner_or_ones_own_is_followed(other_user, shared, tmp_path):
    os.chown(shared, other_user.pw_uid, other_user.pw_gid)
    target = tmp_path / "mine.bag"
    target.write_bytes(b"")
    _as(other_user, "ln", "-s", str(target), os.path.join(shared, "owners.bag"))
    os.symlink(target, os.path.join(shared, "own.bag"))
    for name in ("owners.bag", "own.bag"):
        with sackli.Writer(os.path.join(shared, name)) as writer:
            writer.write(name.encode())
        assert list(sackli.Reader(target)) == [name.encode()]


def test_another_users_link_to_a_private_folder_is_refused_by_recover_dir(
        other_user, shared, tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    _interrupted_bag(private, "data.bag")
    _as(other_user, "ln", "-s", str(private), os.path.join(shared, ".data.bag.sackli-partial-1"))
    done = sackli_cli("recover", shared, cwd=tmp_path)
    assert done.returncode == 1
    assert "sackli-partial-1: the hidden folder of an unfinished write is a symbolic link" \
        in done.stderr
    assert (private / "data.bag").read_bytes() == b"abcde"
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    assert not os.path.lexists(os.path.join(shared, "data.bag"))


def test_another_users_hard_link_in_their_partial_folder_is_refused(other_user, shared):
    # Only where the kernel lets another user link the victim's file
    # (fs.protected_hardlinks=0); the victim's own file here is world-writable.
    victim = os.path.join(shared, "victim.bag")
    with open(victim, "wb") as file:
        file.write(SECRET)
    os.chmod(victim, 0o666)
    partial = os.path.join(shared, ".data.bag.sackli-partial-2")
    _as(other_user, "mkdir", partial)
    linked = subprocess.run(["ln", victim, os.path.join(partial, "data.bag")],
                            user=other_user.pw_uid, group=other_user.pw_gid, capture_output=True)
    if linked.returncode != 0:
        pytest.skip("fs.protected_hardlinks keeps another user from linking the file")
    _as(other_user, "touch", os.path.join(partial, "limits.data.bag"))
    with pytest.raises(PermissionError, match="data.bag: a file with 2 hard links"):
        sackli.recover(os.path.join(shared, "data.bag"))
    with open(victim, "rb") as file:
        assert file.read() == SECRET

