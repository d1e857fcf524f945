"""The read cache's folder on disk, made and opened so that it stays its
user's own (docs/cache.md, "Who can read and write a cache").

A private cache (the default) must be a folder its user owns that nobody
else can write; every folder sackli creates in it is 0700 and every file
0600, whatever the umask. Anything else is refused with a `PermissionError`
naming the folder, its owner and mode, and the opt-in: a shared cache
(`shared_cache=True`, `SACKLI_SHARED_CACHE=1`), whose folders and files
take the group's permissions of the cache folder (and its setgid bit), and
never give anything to others.

Every file the cache writes (`usage`, its lock; temporaries; the secret) is
opened without following a symbolic link, temporaries only when they are
new (`O_EXCL`): a link planted where one of them goes is removed, never
written through.

`v1/secret` holds the cache's secret (16 random bytes), which seals every
entry's header (native/bagz/block_cache.h): an entry made by someone who
cannot read it is a miss, never served.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import secrets
import stat
import threading

__all__ = ["ENV_SHARED", "FolderModes", "RefusedFolder", "create_new", "make_secret", "open_file",
           "open_layout", "open_subfolder", "read_secret", "shared_from_environment"]

ENV_SHARED = "SACKLI_SHARED_CACHE"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")
SECRET = "secret"
SECRET_BYTES = 16
# Whoever opens an existing cache's secret may not have made it.
_TEMPORARY_SECRET = ".tmp-secret-"
_NOFOLLOW = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_OPT_IN = (f"pass shared_cache=True (sackli.Reader.Options) or set {ENV_SHARED}=1 to use it as "
           "a cache shared with them (docs/cache.md)")


class RefusedFolder(PermissionError):
    """A private cache in a folder (or with a secret) that is not the
    user's alone."""


def shared_from_environment() -> bool:
    """Whether `SACKLI_SHARED_CACHE` asks for a shared cache (1/true/yes/on;
    unset, empty or 0/false/no/off: private); ValueError otherwise."""
    text = os.environ.get(ENV_SHARED, "").strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{ENV_SHARED} must be 1 or 0 (or true/false), not {text!r}")


@dataclasses.dataclass(frozen=True)
class FolderModes:
    """The modes of what a cache creates: folders, files (`usage`,
    entries, temporaries) and its secret."""

    folder: int = 0o700
    file: int = 0o600
    secret: int = 0o600

    @classmethod
    def shared_as(cls, folder_mode: int) -> "FolderModes":
        """A shared cache's modes: the owner's, plus what the group has on
        the cache folder (`folder_mode`), and its setgid bit so that new
        folders keep the folder's group. Others get nothing."""
        group = folder_mode & 0o070
        return cls(folder=0o700 | group | (folder_mode & stat.S_ISGID),
                   file=0o600 | (group & 0o060), secret=0o600 | (group & 0o040))


def open_layout(cache_dir: str, layout: str, shared: bool) -> FolderModes:
    """Makes (every missing level 0700) or checks the cache folder
    `cache_dir` and its layout folder `layout` inside it; returns the modes
    of what the cache creates. PermissionError for a private cache in a
    folder another user owns or that others can write; NotADirectoryError
    when either is not a folder."""
    if not os.path.lexists(cache_dir):
        _make_folders(cache_dir, FolderModes.folder)
    status = os.stat(cache_dir)  # a link to a folder is fine: the folder is checked
    if not stat.S_ISDIR(status.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, f"cache_dir {cache_dir} is not a folder",
                                 cache_dir)
    modes = FolderModes.shared_as(status.st_mode) if shared else FolderModes()
    if not shared:
        _check_private(cache_dir, status)
    root = os.path.join(cache_dir, layout)
    try:
        _make_folder(root, modes.folder)
    except FileExistsError:
        pass
    status = os.lstat(root)
    if not stat.S_ISDIR(status.st_mode):  # a link too: not followed
        raise NotADirectoryError(errno.ENOTDIR, f"sackli read cache {root} is not a folder "
                                 "(a link or a file): delete it, or use another cache_dir", root)
    if not shared:
        _check_private(root, status)
        if stat.S_IMODE(status.st_mode) != modes.folder:
            os.chmod(root, modes.folder)  # made by an older sackli, under the umask
    return modes


def _check_private(folder: str, status: os.stat_result) -> None:
    """Refuses a folder for a private cache unless this user owns it and
    nobody else can write it."""
    uid = os.geteuid()
    mode = stat.S_IMODE(status.st_mode)
    if status.st_uid == uid and not mode & 0o022:
        return
    owner = _user_name(status.st_uid)
    problem = (f"is owned by {owner}" if status.st_uid != uid else
               "can be written by " + " and ".join(
                   who for who, bit in (("its group", 0o020), ("others", 0o002)) if mode & bit))
    raise RefusedFolder(
        errno.EACCES,
        f"sackli read cache {folder} {problem} (owner {owner}, mode {mode:04o}): a private "
        f"cache must be yours alone, since whoever can write it chooses what your reads return; "
        f"use a folder of your own, or {_OPT_IN}", folder)


def _user_name(uid: int) -> str:
    try:
        import pwd
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _make_folders(path: str, mode: int) -> None:
    """Creates `path` and every missing folder above it, each with `mode`
    whatever the umask (folders that exist are left as they are)."""
    parent = os.path.dirname(path.rstrip(os.sep))
    if parent and parent != path and not os.path.lexists(parent):
        _make_folders(parent, mode)
    try:
        _make_folder(path, mode)
    except FileExistsError:
        pass


def _make_folder(path: str, mode: int) -> None:
    """Creates one folder with exactly `mode` (FileExistsError if there)."""
    os.mkdir(path, mode)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
    try:
        os.fchmod(fd, mode)  # whatever the umask
    finally:
        os.close(fd)


def open_subfolder(root: str, name: str, modes: FolderModes) -> int:
    """A descriptor of the folder `name` in `root`, created when missing; a
    link or file there (not made by sackli) is replaced by a folder."""
    path = os.path.join(root, name)
    for _ in range(3):
        try:
            return os.open(path, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
        except FileNotFoundError:
            try:
                _make_folder(path, modes.folder)
            except FileExistsError:
                pass
        except OSError as error:
            if error.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            os.unlink(path)  # a link or a file: not a folder sackli made
    raise OSError(errno.EAGAIN, f"sackli read cache: {path} keeps changing", path)


def open_file(path: str, modes: FolderModes) -> int:
    """Opens (creating it with `modes.file`) the regular file `path` for
    reading and writing, never through a link: one there is removed."""
    for _ in range(3):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, modes.file)
        except OSError as error:
            if error.errno not in (errno.ELOOP, errno.EMLINK):
                raise
            os.unlink(path)  # a link (O_NOFOLLOW): not ours
            continue
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, f"sackli read cache {path} is not a file", path)
        if status.st_uid == os.geteuid() and stat.S_IMODE(status.st_mode) != modes.file:
            os.fchmod(fd, modes.file)  # new (the umask) or made by an older sackli
        return fd
    raise OSError(errno.EAGAIN, f"sackli read cache: {path} keeps changing", path)


def create_new(name: str, mode: int, dir_fd: int | None = None) -> int:
    """Creates the file `name` (in the folder `dir_fd`) for writing, with
    exactly `mode`: only as a new file (`O_EXCL`: a link is never followed).
    Something left there (a crashed writer's temporary, a planted link) is
    deleted first: its name is this thread's."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
    try:
        fd = os.open(name, flags, mode, dir_fd=dir_fd)
    except FileExistsError:
        os.unlink(name, dir_fd=dir_fd)
        fd = os.open(name, flags, mode, dir_fd=dir_fd)
    try:
        os.fchmod(fd, mode)  # whatever the umask
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_secret(root: str, shared: bool) -> bytes | None:
    """The cache's secret (`<root>/secret`); None when it is missing,
    malformed or a link (then `make_secret` makes one)."""
    try:
        fd = os.open(os.path.join(root, SECRET), os.O_RDONLY | _NOFOLLOW)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ELOOP, errno.EMLINK):
            return None
        raise
    try:
        status = os.fstat(fd)
        secret = os.pread(fd, SECRET_BYTES + 1, 0)
    finally:
        os.close(fd)
    if not shared and status.st_uid != os.geteuid():
        _check_private(os.path.join(root, SECRET), status)
    return secret if stat.S_ISREG(status.st_mode) and len(secret) == SECRET_BYTES else None


def make_secret(root: str, modes: FolderModes, shared: bool) -> bytes:
    """The cache's secret, made when `read_secret` finds none (entries
    sealed with a lost one are misses). The caller holds the cache's lock,
    so that one is made at a time."""
    secret = read_secret(root, shared)
    if secret is not None:
        return secret  # made by another process meanwhile
    secret = secrets.token_bytes(SECRET_BYTES)
    temporary = os.path.join(root, f"{_TEMPORARY_SECRET}{os.getpid()}-{threading.get_ident()}")
    fd = create_new(temporary, modes.secret)
    try:
        os.write(fd, secret)
    finally:
        os.close(fd)
    os.replace(temporary, os.path.join(root, SECRET))
    return secret
