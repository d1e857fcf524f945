"""What every reading subcommand shares: the reader options on the command
line (one argparse parent parser) and opening a Reader from them."""

from __future__ import annotations

import argparse
from typing import Any, Iterator

import sackli

from .._bulk import records_per_batch
from .._sets import explain_open_failure
from ._arguments import any_case
from ._stdin import open_stdin_bag

# A batch read holds about this many bytes, so memory stays bounded.
_BATCH_BYTES = 4 << 20


def reader_options_parser(dictionary_flag: str = "--dictionary") -> argparse.ArgumentParser:
    """A parent parser with the options that say how to read a bag.

    `dictionary_flag` names the zstd dictionary option (convert reads with
    `--source-dictionary`, since its `--dictionary` is for the output).
    """
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("reading options")
    placements = list(sackli.LimitsPlacement.__members__)
    layouts = list(sackli.ShardingLayout.__members__)
    group.add_argument(
        "--limits-placement", choices=placements, type=any_case(placements), default="TAIL",
        help="where the bag keeps its limits: at the end of each file (TAIL, default) "
        "or in limits.<name> beside it (SEPARATE)",
    )
    group.add_argument(
        "--layout", choices=layouts, type=any_case(layouts), default="CONCATENATED",
        help="how records are numbered across shards (default CONCATENATED)",
    )
    group.add_argument(
        dictionary_flag, dest="read_dictionary", metavar="FILE",
        help="zstd dictionary the .bagz records were compressed with",
    )
    return parser


def refuse_bag_options(args: argparse.Namespace, what: str) -> None:
    """Bag reading options mean nothing for `what` (a dataset folder, a
    map): a wrong argument (exit 2), rather than silently ignored."""
    from ._errors import UsageError

    given = [flag for flag, value, default in (
        ("--limits-placement", args.limits_placement, "TAIL"),
        ("--layout", args.layout, "CONCATENATED"),
        ("--dictionary", args.read_dictionary, None)) if value != default]
    if given:
        raise UsageError(f"{args.spec} is {what}; {', '.join(given)} is for bags")


def reader_options(args: argparse.Namespace, sharded: bool = True) -> dict[str, Any]:
    """Reader keyword options from parsed arguments (`sharded=False` leaves
    out the layout, for opening one shard on its own)."""
    options: dict[str, Any] = {"limits_placement": args.limits_placement}
    if sharded:
        options["sharding_layout"] = args.layout
    if args.read_dictionary:
        options["compression"] = sackli.CompressionZstd(dictionary=read_file(args.read_dictionary))
    return options


def open_reader(spec: str, args: argparse.Namespace, sharded: bool = True) -> sackli.Reader:
    """The bag `spec` opened with the reading options in `args`. When it
    does not open as a bag, a file that is something else (Parquet, a map,
    JSON Lines...) is named for what it is (see sackli/_sniff.py). `-` is a bag on
    standard input (see _stdin)."""
    if spec == "-":
        return open_stdin_bag(reader_options(args, sharded))
    try:
        return sackli.Reader(spec, **reader_options(args, sharded))
    except (sackli.CorruptionError, OSError) as error:
        explain_open_failure(spec, error)
        raise


def read_file(path: str) -> bytes:
    """The bytes of a small file given on the command line."""
    with open(path, "rb") as file:
        return file.read()


def batch_records(reader: sackli.Reader) -> int:
    """How many records of `reader` one bounded-memory batch holds."""
    return records_per_batch(_BATCH_BYTES, reader.approximate_bytes_per_record())


def iter_batches(reader: sackli.Reader, skip_corrupt: Any = None) -> Iterator[list[bytes]]:
    """All records of `reader` (or a view) as lists of bounded size, each
    decoded in parallel by the engine (`skip_corrupt`: as for
    `Reader.read_range`)."""
    step = batch_records(reader)
    for start in range(0, len(reader), step):
        yield reader.read_range(start, min(step, len(reader) - start), skip_corrupt=skip_corrupt)


def add_spec_argument(parser: argparse.ArgumentParser) -> None:
    """The SPEC positional argument every reading subcommand takes."""
    parser.add_argument(
        "spec", metavar="SPEC",
        help="a bag: a file, a glob ('ev*.bag', quoted), name@N.ext, name@*.ext, or a "
             "comma-separated list; or a sackli.datasets (bags) folder, whose datapoints are "
             "printed and counted; for cat, head, get and count, - is a bag on standard input",
    )
