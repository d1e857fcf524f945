"""The argument parser: every subcommand, its options and its example."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any, Callable, Sequence

import sackli

from . import _clean, _convert, _demo, _inspect, _print, _recover, _rows, _verify
from ._arguments import OneLineParser, any_case, non_negative_int, parse_size, zstd_level
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

    info = _add(subparsers, "info", _recover.with_unfinished_notes(_inspect.info),
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
                  "is an error. Given a dataset folder: its fields and their types.")
    add_spec_argument(schema)
    schema.add_argument("--json", action="store_true", help="print one JSON object")

    count = _add(subparsers, "count", _inspect.count, "Print the number of records.",
                 "sackli count train@4.bagz", reading,
                 "Given a dataset folder: the number of datapoints.")
    add_spec_argument(count)

    head = _add(subparsers, "head", _print.head, "Print the first records.",
                "sackli head train.bagz -n 3 --format json", reading,
                "Given a dataset folder: its first datapoints, as a table (text) or one JSON "
                "object per line (json).")
    add_spec_argument(head)
    head.add_argument("-n", type=non_negative_int, default=10, metavar="N",
                      help="how many (default 10)")
    _print.add_format_argument(head)
    _print.add_skip_corrupt_argument(head)

    cat = _add(subparsers, "cat", _print.cat, "Print all records, a range, or chosen indices.",
               "sackli cat train.bagz --range 100:200 --format hex\n"
               "sackli cat train.bagz --range -3:\n"
               "sackli cat train.bagz --indices 5,3,-1 --format raw > records.bin\n"
               "sackli cat damaged.bagz --skip-corrupt > good.txt", reading,
               "A corrupt record stops the output after the records before it, with an error; "
               "--skip-corrupt goes on past it. Given a dataset folder: its datapoints, as a "
               "table (text) or one JSON object per line (json).")
    add_spec_argument(cat)
    selection = cat.add_mutually_exclusive_group()
    selection.add_argument("--range", metavar="A:B", type=_print.parse_range,
                           help="records A (inclusive) to B (exclusive); either may be "
                                "omitted, negatives count from the end (e.g. --range -3:)")
    selection.add_argument("--indices", metavar="I,J,...", type=_print.parse_indices,
                           help="these records, in this order")
    _print.add_format_argument(cat)
    _print.add_skip_corrupt_argument(cat)

    get = _add(subparsers, "get", _print.get, "Print the record at one index.",
               "sackli get train.bagz -1 --format raw > last.bin", reading)
    add_spec_argument(get)
    get.add_argument("index", type=int, metavar="INDEX",
                     help="the record's index; negative counts from the end (for a .mb or "
                          ".im map file: the key)")
    _print.add_format_argument(get)

    verify = _add(subparsers, "verify", _recover.with_unfinished_notes(_verify.verify),
                  "Check every limit and decode every record.",
                  "sackli verify 'train@*.bagz' --fail-fast\nsackli verify my_dataset/", reading,
                  "Each problem is printed with its file, record index and byte offset; "
                  "the exit status is 1 if there is any. Given a dataset folder: every "
                  "field file and refs.bag decode, every ref lies within its field's file, "
                  "and each field holds as many records as the refs refer to.")
    add_spec_argument(verify)
    verify.add_argument("--fail-fast", action="store_true", help="stop at the first problem")

    recover = _add(subparsers, "recover", _recover.recover,
                   "Complete interrupted writes: of a bag, a shard set, a dataset, a map, or "
                   "every one in a folder.",
                   "sackli recover 'train@16.bagz'\nsackli recover data/", (),
                   "An interrupted write leaves what it wrote in a hidden folder "
                   ".<name>.sackli-partial-<tag>/ beside its target (bagz, and sackli with "
                   "atomic=False, leave the file and limits.<name> beside it instead). This "
                   "keeps every record that reached the disk, in order (a shard set's dealt "
                   "into shards as its writer would have), puts the result in place, removes "
                   "the hidden folder and reports how many records were saved. Given a "
                   "folder, it completes every unfinished write in it.")
    recover.add_argument("path", metavar="PATH",
                         help="what the interrupted write was making (a bag, a shard spec "
                              "such as 'train@16.bagz', a dataset folder, a map), or a folder "
                              "holding unfinished writes")

    clean = _add(subparsers, "clean", _clean.clean,
                 "Remove what killed writers left on a bucket: hidden staging and unfinished "
                 "uploads.",
                 "sackli recover s3://bucket/out/ && sackli clean s3://bucket/out/\n"
                 "sackli clean gs://bucket/out/ --older-than 1d --dry-run", (),
                 "Run `sackli recover URL` first: it finishes or undoes every interrupted "
                 "write it can. Then this removes hidden staging (.<name>.sackli-partial-*/) "
                 "that no write still needs, and aborts unfinished S3 multipart uploads of "
                 "bag files and staging, each once nothing was written to it for "
                 "--older-than. Another program's objects and uploads are never touched. "
                 "Prints one line per leftover, then the bytes freed.")
    clean.add_argument("prefix", metavar="URL_PREFIX",
                       help="a gs:// or s3:// prefix, e.g. s3://bucket/out/")
    clean.add_argument("--older-than", type=_clean.parse_duration, default="1h", metavar="AGE",
                       help="leave what was written less than AGE ago, as a live writer may "
                            "hold it (default: 1h; e.g. 30min, 2d)")
    clean.add_argument("--dry-run", action="store_true",
                       help="change nothing: print what would be removed")

    convert = _add(
        subparsers, "convert", _convert.convert,
        "Recompress, reshard, import/export TFRecord, JSON Lines, text and Parquet; import "
        "image folders and WebDataset tars.",
        "sackli convert train.bag train.bagz --level 9\n"
        "sackli convert 'in@*.bagz' out@16.bagz\n"
        "sackli convert in.bagz 'out@*.bagz' --max-shard-bytes 100MB\n"
        "sackli convert data.tfrecord data.bagz\n"
        "sackli convert data.bagz data.jsonl\n"
        "zcat data.jsonl.gz | sackli convert - data.bagz --from jsonl\n"
        "sackli convert data.bagz - --to jsonl | head\n"
        "sackli convert events.parquet events@8.bagz\n"
        "sackli convert 'events@*.bagz' events.parquet\n"
        "sackli convert imgs/ 'train@8.bagz'\n"
        "sackli convert 'shards-*.tar' 'train@8.bagz'",
        [reader_options_parser(dictionary_flag="--source-dictionary")],
        "Formats follow the file names: .bag (raw) and .bagz (zstd) bags, TFRecord "
        "(.tfrecord, .tfrecords, .gz for gzip), JSON Lines (.jsonl, .ndjson; a file of "
        "strings gives their text, any other file each line's JSON text, and the bag is "
        "marked so that it exports the same values; see --jsonl-base64) and text "
        "(.txt, one record per line). Parquet (.parquet, a file or a folder of them) converts "
        "to and from bags through sackli.arrow (needs pyarrow): a row becomes a record. An "
        "image folder (imgs/<class>/<image>, as torchvision's ImageFolder) or WebDataset tars "
        "(.tar, .tar.gz, .tgz) become a row bag: image, label and path, or __key__ and a "
        "column per extension (needs pyarrow). "
        "Records stream in bounded memory; a progress bar shows on a terminal. An existing "
        "destination is refused unless --force is given.",
    )
    _print.add_skip_corrupt_argument(convert)
    convert.add_argument("src", metavar="SRC", help="source: a bag spec, or TFRecord, JSON "
                         "Lines or text files (a path, a glob or a shard spec); an image "
                         "folder; WebDataset tars; - is standard input (with --from)")
    convert.add_argument("dst", metavar="DST", help="destination: a path, name@N.ext (N "
                         "shards) or name@*.ext (with --max-shard-bytes); - is standard "
                         "output (with --to)")
    stream_formats = ["tfrecord", "jsonl", "text"]
    convert.add_argument("--from", dest="source_format", metavar="FORMAT",
                         choices=["bag", *stream_formats], type=any_case(["bag", *stream_formats]),
                         help="with SRC -: what standard input holds (bag, tfrecord, jsonl, "
                              "text); it is copied to a temporary file first")
    convert.add_argument("--to", dest="output_format", metavar="FORMAT",
                         choices=stream_formats, type=any_case(stream_formats),
                         help="with DST -: the format written to standard output (tfrecord, "
                              "jsonl, text), streamed as the records are read")
    output = convert.add_argument_group("output options")
    output.add_argument("--force", action="store_true",
                        help="overwrite the destination if it exists (for a shard set, the "
                             "shards of the same name with another count are removed once the "
                             "new set is written, so that name@* finds one set)")
    output.add_argument("--level", type=zstd_level, help="zstd level for .bagz (default 3)")
    # --dictionary: the older spelling, kept (every other subcommand reads with it).
    output.add_argument("--output-dictionary", "--dictionary", dest="dictionary", metavar="FILE",
                        help="zstd dictionary to compress .bagz records with (--dictionary is "
                             "the deprecated spelling; --source-dictionary reads the source)")
    placements = list(sackli.LimitsPlacement.__members__)
    output.add_argument("--output-limits-placement", choices=placements, type=any_case(placements),
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
    encodings = ["auto", "row", "arrow", "json"]
    parquet.add_argument("--encoding", choices=encodings, type=any_case(encodings), default="auto",
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
    decodings = ["auto", "row", "arrow", "json", "raw"]
    parquet.add_argument("--decode", choices=decodings, type=any_case(decodings),
                         default="auto",
                         help="bag -> Parquet or JSON Lines: how records become rows (auto: as "
                              "the schema file beside the bag says, else one binary column "
                              "'record' for Parquet, the records themselves for JSON Lines; "
                              "raw: the records as they are)")

    demo = _add(subparsers, "demo", _demo.demo,
                "Write a small sample dataset and show the main features working.",
                "sackli demo --dir /tmp/sackli-demo")
    demo.add_argument("--dir", metavar="DIR",
                      help="where to write the sample (default: a temporary folder, removed after)")
    return parser
