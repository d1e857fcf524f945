"""`sackli recover`: complete interrupted writes; notes on unfinished writes
for the subcommands that inspect a bag (`info`, `verify`). Every name it
prints is escaped (`_escapes.escape_name`): a hidden folder's name comes from
whoever made the folder."""

from __future__ import annotations

import argparse
import errno
import functools
import os
import sys
from typing import Callable

import sackli

from .. import RecoveryReport
from .._sets import (
    UnfinishedWrite, is_remote, missing_error, recover_bucket_writes, recover_write, split_shard_entry, strip_local_prefix, unfinished_writes,
    unfinished_writes_in_spec, unfinished_writes_of, write_of_folder,
)
from ._escapes import escape_lines, escape_name
from ._errors import EXPECTED_ERRORS, error_message

__all__ = ["recover", "unfinished_writes_near", "with_unfinished_notes"]


def unfinished_writes_near(spec: str) -> list[UnfinishedWrite]:
    """The unfinished writes that concern `spec`: for a folder, every one
    in it and any of the folder itself; for a path or a shard spec, those
    that would make its files."""
    local = strip_local_prefix(spec)
    if not local:
        return []
    if os.path.isdir(local):
        folder = local.rstrip("/") or "/"
        return unfinished_writes_of(folder) + unfinished_writes(folder)
    return unfinished_writes_in_spec(local)


def with_unfinished_notes(command: Callable[[argparse.Namespace], int]) -> Callable[
        [argparse.Namespace], int]:
    """`command`, then a note on stderr for every unfinished write of its
    spec (unless its error already named one)."""

    @functools.wraps(command)
    def noted(args: argparse.Namespace) -> int:
        try:
            status = command(args)
        except EXPECTED_ERRORS as error:
            if "unfinished write" not in error_message(error):
                _note(args.spec)
            raise
        _note(args.spec)
        return status

    return noted


def _note(spec: str) -> None:
    try:
        writes = unfinished_writes_near(spec)
    except EXPECTED_ERRORS:
        return  # a damaged journal: `sackli recover` reports it
    sys.stdout.flush()  # the notes come after what was printed
    for write in writes:
        print(f"sackli: note: {escape_name(write.describe())}", file=sys.stderr)


# What `records` of a RecoveryReport counts, by kind of write.
_UNITS = {"dataset": "datapoint(s)", "map": "entr(y/ies)"}


def _line(target: str, report: RecoveryReport, kind: str | None = None) -> str:
    """The line that says what was saved."""
    dropped = ""
    if report.dropped_limits or report.dropped_bytes:
        dropped = (f"; dropped {report.dropped_limits} invalid limit(s) and "
                   f"{report.dropped_bytes} trailing byte(s)")
    return f"{escape_name(target)}: recovered {report.records} {_UNITS.get(kind or '', 'record(s)')}{dropped}"


def _kind_of(local: str) -> str | None:
    """The kind of the unfinished write(s) `sackli.recover(local)` completes."""
    kinds = {write.kind for write in unfinished_writes_of(local.rstrip("/"))}
    if not kinds and os.path.isdir(local):
        kinds = {write.kind for write in unfinished_writes(local)}
    return kinds.pop() if len(kinds) == 1 else None


def _recover_folder(folder: str) -> int:
    """Completes every unfinished write in `folder` (and of `folder`
    itself); one line for each, errors on stderr."""
    writes = unfinished_writes_near(folder)
    if not writes:
        print(f"{escape_name(folder)}: no unfinished writes")
        return 0
    status = 0
    for write in writes:
        try:
            print(_line(write.target, recover_write(write), write.kind), flush=True)
        except EXPECTED_ERRORS as error:
            message = f"{write.target}: {error_message(error)}"
            print(f"sackli: error: {escape_lines(message)}", file=sys.stderr)
            status = 1
    return status


def _recover_bucket(url: str) -> int:
    """Rolls every interrupted write of `url` (a shard spec, or a prefix
    ending in "/") forward or back; one line for each, on stderr for one
    neither possible (exit status 1)."""
    done = recover_bucket_writes(url)
    if not done:
        if not url.endswith("/"):
            raise missing_error(url)
        print(f"{escape_name(url)}: no unfinished writes")
        return 0
    status = 0
    for write in done:
        if write.outcome == "neither":
            print(f"sackli: error: {escape_lines(write.line())}", file=sys.stderr)
            status = 1
        else:
            print(escape_name(write.line()), flush=True)
    return status


def recover(args: argparse.Namespace) -> int:
    """Recovers the interrupted write of PATH (a bag, a shard spec, a
    dataset folder, a map), or every one in the folder PATH; says what was
    saved."""
    if is_remote(args.path):
        return _recover_bucket(args.path)
    local = strip_local_prefix(args.path)
    if os.path.isdir(local) and write_of_folder(local.rstrip("/")) is None:
        return _recover_folder(local)
    kind = _kind_of(local)
    try:
        report = sackli.recover(args.path)
    except FileNotFoundError:
        if split_shard_entry(local) is None and not os.path.lexists(local):
            # Neither the bag nor a write of it: most likely a typo.
            raise FileNotFoundError(errno.ENOENT, f"{args.path}: no such file", args.path) from None
        raise
    print(_line(args.path, report, kind))
    return 0
