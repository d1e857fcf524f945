"""The argument parser: every subcommand, its options and its example."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any, Callable, Sequence

import sackli

from . import _convert, _demo, _inspect, _print, _recover, _rows, _verify
from ._arguments import OneLineParser, parse_size
from ._reading import add_spec_argument, reader_options_parser

_DESCRIPTION = "Inspect, print, verify, recover and convert Bagz record files."
_EPILOG = """\
examples:
  sackli demo                          # see everything work on a sample dataset
  sackli info data@*.bagz
  sackli cat data.bagz --range 10:20 --format json
  sackli convert data.bag data@16.bagz --level 9
"""


def _add(
    subparsers: Any,
    name: str,
    command: Callable[[argparse.Namespace], int],
    summary: str,
    example: str,
    parents: Sequence[argparse.ArgumentParser] = (),
    details: str = "",
) -> argparse.ArgumentParser:
    """Adds a subcommand whose --help ends with an example."""
    parser = subparsers.add_parser(
        name, help=summary, description=f"{summary} {details}".strip(), parents=list(parents),
        epilog="example:\n" + textwrap.indent(example.strip(), "  "),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(command=command, command_name=name)
    return parser


def build_parser(program: str) -> argparse.ArgumentParser:
    """The `sackli` parser with all its subcommands."""
    parser = OneLineParser(
        prog=program, description=_DESCRIPTION, epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {sackli.__version__}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    reading = [reader_options_parser()]

    info = _add(subparsers, "info", _inspect.info,
                "Summarise a bag: shards, records, bytes, compression, record sizes.",
                "sackli info 'train@*.bagz' --json\nsackli info my_dataset/", reading,
                "Given a sackli.datasets / bags dataset folder (holding spec.json, or shard "
                "folders 000000/, ...): its fields, types, datapoints, bytes per field and "
                "shards.")
    add_spec_argument(info)
    info.add_argument("--json", action="store_true", help="print one JSON object")

    schema = _add(subparsers, "schema", _rows.schema,
                  "Print the Arrow schema of rows written by sackli.arrow.write_table.",
                  "sackli schema 'events@*.bagz'", [],
                  "Reads the schema file beside the bag (needs pyarrow); a bag without one "
                  "is an error.")
    add_spec_argument(schema)
    schema.add_argument("--json", action="store_true", help="print one JSON object")

    count = _add(subparsers, "count", _inspect.count, "Print the number of records.",
                 "sackli count train@4.bagz", reading)
    add_spec_argument(count)

    head = _add(subparsers, "head", _print.head, "Print the first records.",
                "sackli head train.bagz -n 3 --format json", reading)
    add_spec_argument(head)
    head.add_argument("-n", type=int, default=10, metavar="N", help="how many (default 10)")
    _print.add_format_argument(head)
    _print.add_skip_corrupt_argument(head)

    cat = _add(subparsers, "cat", _print.cat, "Print all records, a range, or chosen indices.",
               "sackli cat train.bagz --range 100:200 --format hex\n"
               "sackli cat train.bagz --range -3:\n"
               "sackli cat train.bagz --indices 5,3,-1 --format raw > records.bin\n"
               "sackli cat damaged.bagz --skip-corrupt > good.txt", reading,
               "A corrupt record stops the output after the records before it, with an error; "
               "--skip-corrupt goes on past it.")
    add_spec_argument(cat)
    selection = cat.add_mutually_exclusive_group()
    selection.add_argument("--range", metavar="A:B",
                           help="records A (inclusive) to B (exclusive); either may be "
                                "omitted, negatives count from the end (e.g. --range -3:)")
    selection.add_argument("--indices", metavar="I,J,...", help="these records, in this order")
    _print.add_format_argument(cat)
    _print.add_skip_corrupt_argument(cat)

    get = _add(subparsers, "get", _print.get, "Print the record at one index.",
               "sackli get train.bagz -1 --format raw > last.bin", reading)
    add_spec_argument(get)
    get.add_argument("index", type=int, metavar="INDEX",
                     help="the record's index; negative counts from the end (for a .mb or "
                          ".im map file: the key)")
    _print.add_format_argument(get)

    verify = _add(subparsers, "verify", _verify.verify,
                  "Check every limit and decode every record.",
                  "sackli verify 'train@*.bagz' --fail-fast\nsackli verify my_dataset/", reading,
                  "Each problem is printed with its file, record index and byte offset; "
                  "the exit status is 1 if there is any. Given a dataset folder: every "
                  "field file and refs.bag decode, every ref lies within its field's file, "
                  "and each field holds as many records as the refs refer to.")
    add_spec_argument(verify)
    verify.add_argument("--fail-fast", action="store_true", help="stop at the first problem")

    recover = _add(subparsers, "recover", _recover.recover,
                   "Complete an interrupted write into a valid bag.",
                   "sackli recover 'train@16.bagz'", (),
                   "An interrupted write leaves its records file and limits.<name>: sackli's "
                   "writers in a hidden folder .<name>.sackli-partial-<tag>/ beside the bag, "
                   "bagz's beside the bag itself. This keeps every record whose limit was "
                   "written, appends the limits (TAIL), puts the bag in place and reports how "
                   "many records were saved.")
    recover.add_argument("path", metavar="PATH",
                         help="the bag (or shard spec, e.g. 'train@16.bagz') whose write was interrupted")

    convert = _add(
        subparsers, "convert", _convert.convert,
        "Recompress, reshard, or import/export TFRecord, JSON Lines, text and Parquet.",
        "sackli convert train.bag train.bagz --level 9\n"
        "sackli convert 'in@*.bagz' out@16.bagz\n"
        "sackli convert in.bagz 'out@*.bagz' --max-shard-bytes 100MB\n"
        "sackli convert data.tfrecord data.bagz\n"
        "sackli convert data.bagz data.jsonl\n"
        "sackli convert events.parquet events@8.bagz\n"
        "sackli convert 'events@*.bagz' events.parquet",
        [reader_options_parser(dictionary_flag="--source-dictionary")],
        "Formats follow the file names: .bag (raw) and .bagz (zstd) bags, TFRecord "
        "(.tfrecord, .tfrecords, .gz for gzip), JSON Lines (.jsonl, .ndjson; a line is a "
        "JSON string, or any other JSON value kept as its text; see --jsonl-base64) and text "
        "(.txt, one record per line). Parquet (.parquet, a file or a folder of them) converts "
        "to and from bags through sackli.arrow (needs pyarrow): a row becomes a record. "
        "Records stream in bounded memory; a progress bar shows on a terminal. An existing "
        "destination is refused unless --force is given.",
    )
    _print.add_skip_corrupt_argument(convert)
    convert.add_argument("src", metavar="SRC", help="source: a bag spec, or TFRecord, JSON "
                         "Lines or text files (a path or a shard spec)")
    convert.add_argument("dst", metavar="DST", help="destination: a path, name@N.ext (N "
                         "shards) or name@*.ext (with --max-shard-bytes)")
    output = convert.add_argument_group("output options")
    output.add_argument("--force", action="store_true",
                        help="overwrite the destination if it exists (for a shard set, the "
                             "shards of the same name with another count are removed once the "
                             "new set is written, so that name@* finds one set)")
    output.add_argument("--level", type=int, help="zstd level for .bagz (default 3)")
    output.add_argument("--dictionary", metavar="FILE",
                        help="zstd dictionary to compress .bagz records with")
    output.add_argument("--output-limits-placement", choices=list(sackli.LimitsPlacement.__members__),
                        default="TAIL", help="limits placement of the output bag (default TAIL)")
    output.add_argument("--max-shard-bytes", type=parse_size, metavar="SIZE",
                        help="with DST name@*.ext: start a new shard before one would exceed "
                             "SIZE bytes (records counted at their uncompressed size); units "
                             "kB, MB, GB (x1000) and KiB, MiB, GiB (x1024) are understood, "
                             "e.g. 500MB or 1GiB")
    output.add_argument("--gzip-level", type=int, choices=range(10), metavar="0-9",
                        help="gzip level for .gz destinations (default 6, as gzip's; 9 is a "
                             "few percent smaller and 2-3 times slower)")
    output.add_argument("--jsonl-base64", action="store_true",
                        help='JSON Lines: write records that are not UTF-8 text as '
                             '{"base64": "..."} objects (without it they are an error), and '
                             'read such objects back as the bytes they hold (without it they '
                             'stay the text of the object, like any other JSON value)')
    parquet = convert.add_argument_group("Parquet options")
    parquet.add_argument("--encoding", choices=["auto", "row", "arrow", "json"], default="auto",
                         help="Parquet -> bag: a row becomes a record of the engine's row "
                              "format (row), a one-row Arrow IPC message (arrow, lossless for "
                              "every type) or a JSON object (json); auto (the default) is row "
                              "where the schema allows it, else arrow, except that a table of "
                              "raw records (one binary "
                              "column 'record', as written from a bag without a schema) goes "
                              "back to those records")
    parquet.add_argument("--column", metavar="NAME",
                         help="Parquet -> bag: write each value of this binary or string "
                              "column as one record instead of whole rows")
    parquet.add_argument("--skip-nulls", action="store_true",
                         help="with --column: leave null values out instead of failing")
    parquet.add_argument("--decode", choices=["auto", "row", "arrow", "json", "raw"],
                         default="auto",
                         help="bag -> Parquet: how records become rows (auto: as the schema "
                              "file beside the bag says, else one binary column 'record')")

    demo = _add(subparsers, "demo", _demo.demo,
                "Write a small sample dataset and show the main features working.",
                "sackli demo --dir /tmp/sackli-demo")
    demo.add_argument("--dir", metavar="DIR",
                      help="where to write the sample (default: a temporary folder, removed after)")
    return parser
