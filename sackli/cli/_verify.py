"""`sackli verify`: check every shard's limits and decode every record, and
say which records a checksum proved intact and which only decoded."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Callable

import sackli

from .._sets import expand_file_spec, has_zstd_suffix
from . import _datasets
from ._errors import opening_error
from ._progress import progress, progress_shown
from ._reading import batch_records, reader_options
from ._sidecar_check import has_sidecar, sidecar_problems
from ._verdict import FailFast, reporter, verdict


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


@dataclasses.dataclass
class _Coverage:
    """How the records that decoded were checked: against a checksum (a zstd
    frame with its content checksum, or an empty record: no bytes to damage),
    or for structure only (limits in order, frames that decode)."""

    checksummed: int = 0
    structure_only: int = 0
    sidecar: int = 0  # raw records checked against a CRC-32C sidecar

    def add(self, frames: list[bytes]) -> None:
        checked = sum(1 for frame in frames if not frame or _has_checksum(frame))
        self.checksummed += checked
        self.structure_only += len(frames) - checked

    def add_raw(self, count: int, sidecar: bool) -> None:
        if sidecar:
            self.sidecar += count
        else:
            self.structure_only += count

    def summary(self) -> str:
        if not self.structure_only and not self.checksummed and not self.sidecar:
            return "no records to check"
        checked = [(self.checksummed, "their zstd checksum"),
                   (self.sidecar, "their CRC-32C sidecar")]
        checked = [(count, how) for count, how in checked if count]
        if not self.structure_only:
            if len(checked) == 1:
                one = "its zstd checksum" if self.checksummed else "its CRC-32C sidecar"
                return f"every record checked against {one}"
            return "every record checked: " + ", ".join(
                f"{n} against {how}" for n, how in checked)
        if not checked:
            return ("structure only: no record carries a checksum (raw records, or zstd "
                    "frames written without one), so damaged bytes would go unnoticed")
        return (", ".join(f"{n} checked against {how}" for n, how in checked) +
                f", {self.structure_only} for structure only (raw records, or zstd frames "
                "written without a checksum)")


def _has_checksum(frame: bytes) -> bool:
    """Whether a stored zstd frame sets its Content_Checksum_flag (RFC 8878);
    a frame too short for it failed to decode already."""
    return len(frame) > 4 and bool(frame[4] & 0x04)


def _compressed(path: str, args: argparse.Namespace) -> bool:
    return bool(args.read_dictionary) or has_zstd_suffix(path)


def _check_shard(
    check: _ShardCheck, args: argparse.Namespace, report: Callable[[str], None], bar: Any,
    coverage: _Coverage,
) -> int | None:
    """Checks one shard, counting its records on `bar` and how they were
    checked in `coverage`; returns its record count (None when it cannot be
    opened)."""
    try:
        reader = sackli.Reader(check.path, **reader_options(args, sharded=False))
    except (sackli.CorruptionError, OSError) as error:
        report(f"shard {check.shard} cannot be opened: {opening_error(check.path, error)}")
        return None
    # The stored frames, to see which carry a checksum (the decoding above
    # verified each one that does).
    frames = (sackli.Reader(check.path, limits_placement=args.limits_placement,
                            compression=sackli.CompressionNone())
              if _compressed(check.path, args) else None)
    sidecar = not _compressed(check.path, args) and has_sidecar(check.path)
    if sidecar:
        for problem in sidecar_problems(check.path, reader):
            report(f"shard {check.shard}: {problem}")
    step = batch_records(reader)
    for start in range(0, len(reader), step):
        count = min(step, len(reader) - start)
        skipped = sackli.SkippedRecords()  # the library's skipping scan finds them
        reader.read_range(start, count, skip_corrupt=skipped)
        for local, error in skipped:
            where = check.global_index(local)
            global_text = "unknown" if where is None else str(where)
            report(f"global index {global_text} (shard {check.shard}, record {local}): {error}")
        if frames is None:
            coverage.add_raw(count, sidecar)
        elif not skipped:  # (with problems, no OK line says what was checked)
            coverage.add(frames.read_range(start, count))
        bar.update(count)
    if frames is not None:
        frames.close()
    return len(reader)


def _total_records(paths: list[str], args: argparse.Namespace) -> int | None:
    """The records of all the shards that open (for the progress bar), or
    None when none does."""
    total = None
    for path in paths:
        try:
            with sackli.Reader(path, **reader_options(args, sharded=False)) as reader:
                total = (total or 0) + len(reader)
        except (sackli.CorruptionError, OSError):
            pass  # reported when its turn comes
    return total


def verify(args: argparse.Namespace) -> int:
    """Checks a bag; prints each problem; exit status 1 if there is any."""
    if _datasets.is_dataset(args.spec):
        return _datasets.verify(args)
    paths = expand_file_spec(args.spec)
    problems: list[str] = []

    total = _total_records(paths, args) if progress_shown() else None
    bar = progress(total, "verify")

    report = reporter(problems, args.fail_fast, [bar])

    interleaved = args.layout == "INTERLEAVED"
    start: int | None = 0
    records = 0
    coverage = _Coverage()
    try:
        with bar:
            for shard, path in enumerate(paths):
                check = _ShardCheck(path, shard, len(paths), start, interleaved)
                size = _check_shard(check, args, report, bar, coverage)
                records += size or 0
                # Past a shard of unknown size, concatenated global indices are unknown.
                start = None if start is None or size is None else start + size
        if not problems:
            # Each shard is fine; the set must also fit the layout.
            try:
                sackli.Reader(args.spec, **reader_options(args))
            except ValueError as error:  # e.g. shard sizes that do not fit INTERLEAVED
                report(f"{args.spec}: {error}")
    except FailFast:
        return verdict(problems, args.spec, "", stopped=True)
    return verdict(problems, args.spec, f"verify: OK, {records} records in {len(paths)} "
                                         f"shard(s); {coverage.summary()}")
