"""`sackli verify`: check every shard's limits and decode every record."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Callable, Iterator

import sackli

from .._shard_spec import expand_file_spec
from ._errors import error_message
from ._reading import batch_records, reader_options


class _FailFast(Exception):
    """Stops verification at the first problem (`--fail-fast`)."""


@dataclasses.dataclass
class _ShardCheck:
    """One shard to check and how its local indices map to global ones."""

    path: str
    shard: int
    num_shards: int
    start: int | None  # global index of local 0 (CONCATENATED), None if unknown
    interleaved: bool

    def global_index(self, local: int) -> int | None:
        if self.interleaved:
            return local * self.num_shards + self.shard
        return None if self.start is None else self.start + local


def _bad_records(reader: sackli.Reader, start: int, count: int) -> Iterator[tuple[int, str]]:
    """(local index, error message) of every record in [start, start+count)
    that does not decode: reads the range whole and, when that fails, splits
    it in halves, so only damaged regions are read record by record."""
    try:
        reader.read_range(start, count)
        return
    except sackli.CorruptionError as error:
        if count == 1:
            yield start, str(error)
            return
    half = count // 2
    yield from _bad_records(reader, start, half)
    yield from _bad_records(reader, start + half, count - half)


def _check_shard(
    check: _ShardCheck, args: argparse.Namespace, report: Callable[[str], None]
) -> int | None:
    """Checks one shard; returns its record count (None when it cannot be opened)."""
    try:
        reader = sackli.Reader(check.path, **reader_options(args, sharded=False))
    except (sackli.CorruptionError, OSError) as error:
        report(f"shard {check.shard} cannot be opened: {error_message(error)}")
        return None
    step = batch_records(reader)
    for start in range(0, len(reader), step):
        for local, message in _bad_records(reader, start, min(step, len(reader) - start)):
            where = check.global_index(local)
            global_text = "unknown" if where is None else str(where)
            report(f"global index {global_text} (shard {check.shard}, record {local}): {message}")
    return len(reader)


def verify(args: argparse.Namespace) -> int:
    """Checks a bag; prints each problem; exit status 1 if there is any."""
    paths = expand_file_spec(args.spec)
    problems: list[str] = []

    def report(problem: str) -> None:
        problems.append(problem)
        print(problem, flush=True)
        if args.fail_fast:
            raise _FailFast

    interleaved = args.layout == "INTERLEAVED"
    start: int | None = 0
    records = 0
    try:
        for shard, path in enumerate(paths):
            check = _ShardCheck(path, shard, len(paths), start, interleaved)
            size = _check_shard(check, args, report)
            records += size or 0
            # Past a shard of unknown size, concatenated global indices are unknown.
            start = None if start is None or size is None else start + size
        if not problems:
            # Each shard is fine; the set must also fit the layout.
            try:
                sackli.Reader(args.spec, **reader_options(args))
            except ValueError as error:  # e.g. shard sizes that do not fit INTERLEAVED
                report(f"{args.spec}: {error}")
    except _FailFast:
        print("verify: stopped at the first problem (--fail-fast)")
        return 1
    if problems:
        print(f"verify: {len(problems)} problem(s) in {args.spec}")
        return 1
    print(f"verify: OK, {records} records in {len(paths)} shard(s)")
    return 0
