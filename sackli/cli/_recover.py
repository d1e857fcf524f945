"""`sackli recover`: complete interrupted writes into valid bags."""

from __future__ import annotations

import argparse
import errno
import os

import sackli

from .._recover import partial_writes
from .._shard_spec import expand_file_spec, split_shard_entry, shard_name, strip_local_prefix


def _targets(spec: str) -> list[str]:
    """The bag files of `spec`: a path, `name@N.ext` (every shard, whether
    or not it exists yet) or `name@*.ext` (the shards found)."""
    sharded = split_shard_entry(strip_local_prefix(spec))
    if sharded is not None and sharded[1] != "*":
        base, count, suffix = sharded
        return [shard_name(base, i, int(count), suffix) for i in range(int(count))]
    return expand_file_spec(spec)


def _recover_one(path: str) -> str:
    """Recovers `path`; the line that says what was saved."""
    try:
        report = sackli.recover(path)
    except FileNotFoundError:
        if not os.path.exists(path) and not partial_writes(path):
            raise FileNotFoundError(errno.ENOENT, f"{path}: no such file", path) from None
        raise
    dropped = ""
    if report.dropped_limits or report.dropped_bytes:
        dropped = (f"; dropped {report.dropped_limits} invalid limit(s) and "
                   f"{report.dropped_bytes} trailing byte(s)")
    return f"{path}: recovered {report.records} record(s){dropped}"


def recover(args: argparse.Namespace) -> int:
    """Recovers the interrupted bag files of PATH and says what was saved."""
    for path in _targets(args.path):
        print(_recover_one(path))
    return 0
