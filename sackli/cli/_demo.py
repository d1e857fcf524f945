"""`sackli demo`: a newcomer's first run, on a small sample dataset."""

from __future__ import annotations

import argparse
import glob
import json
import os
import shlex
import tempfile

import sackli

_ANIMALS = ["aardvark", "badger", "capybara", "dormouse", "echidna", "ferret", "gecko"]


def _write_sample(path: str, records: int) -> None:
    """A JSON Lines file of small JSON documents of varied sizes."""
    with open(path, "w", encoding="utf-8") as file:
        for i in range(records):
            animal = _ANIMALS[i % len(_ANIMALS)]
            document = {"id": i, "animal": animal, "note": animal * (i % 13)}
            file.write(json.dumps(document) + "\n")


def _interrupted_write(path: str) -> None:
    """Leaves what a writer that died before close() leaves: the records and
    limits.<name>, with no limits at the end of the file."""
    with sackli.Writer(path, limits_placement=sackli.LimitsPlacement.SEPARATE) as writer:
        writer.write_many(b"log line %d" % i for i in range(100))


def _damage(path: str, offset: int) -> None:
    """Overwrites bytes of a file, as a bad disk would."""
    with open(path, "r+b") as file:
        file.seek(offset)
        file.write(b"\xde\xad\xbe\xef")


# What a run leaves in its folder (removed first, so that --dir can be reused).
_SAMPLE_FILES = ["animals.jsonl", "zoo-*-of-*.bagz", "zoo.tfrecord", "small-*-of-*.bag",
                 "log.bag", "limits.log.bag"]


def _clear_previous_sample() -> None:
    for pattern in _SAMPLE_FILES:
        for path in glob.glob(pattern):
            os.remove(path)


def _run_in(folder: str) -> int:
    from . import main  # the parser imports this module

    def step(title: str, *argv: str) -> int:
        print(f"\n== {title}\n$ sackli {shlex.join(argv)}", flush=True)
        return main(list(argv))

    os.chdir(folder)
    _clear_previous_sample()
    print(f"sackli demo: working in {folder}")
    _write_sample("animals.jsonl", 2000)
    step("import a JSON Lines file into 4 compressed shards", "convert", "animals.jsonl", "zoo@4.bagz")
    step("what the bag holds", "info", "zoo@4.bagz")
    step("the first records", "head", "zoo@*.bagz", "-n", "3")
    step("random access: the last record, as JSON", "get", "zoo@4.bagz", "-1", "--format", "json")
    step("a range, in hex", "cat", "zoo@4.bagz", "--range", "7:9", "--format", "hex")
    step("export to TFRecord (with CRC32C checks)", "convert", "zoo@4.bagz", "zoo.tfrecord")
    step("reshard by size into raw .bag files", "convert", "zoo.tfrecord", "small@*.bag",
         "--max-shard-bytes", "30000")
    step("count them", "count", "small@*.bag")
    step("verify: every limit checked, every record decoded", "verify", "zoo@4.bagz")
    _damage("zoo-00001-of-00004.bagz", 0)  # the zstd magic of its first record
    step("a damaged shard is reported by file, record and byte offset", "verify", "zoo@4.bagz")
    _interrupted_write("log.bag")
    step("an interrupted write cannot be read as is", "count", "log.bag")
    step("recover it", "recover", "log.bag")
    step("and now it verifies", "verify", "log.bag")
    print("\nThat was sackli. Try `sackli COMMAND --help` for each command's options.")
    return 0


def demo(args: argparse.Namespace) -> int:
    """Runs the demo in --dir, or in a temporary folder removed afterwards."""
    previous = os.getcwd()
    try:
        if args.dir:
            os.makedirs(args.dir, exist_ok=True)
            return _run_in(os.path.abspath(args.dir))
        with tempfile.TemporaryDirectory(prefix="sackli-demo-") as folder:
            return _run_in(folder)
    finally:
        os.chdir(previous)
