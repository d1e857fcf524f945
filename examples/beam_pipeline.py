"""A complete Beam pipeline over bags: read events, keep the clicks, write
them to new shards. Runs on the DirectRunner on generated data:

    python examples/beam_pipeline.py [beam pipeline options]

Extra arguments are Beam pipeline options, e.g.
`--direct_running_mode=multi_processing --direct_num_workers=2`.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

import sackli
from sackli.beam import ReadFromSackli, WriteToSackli


def write_events(folder: str, count: int, shards: int = 4) -> None:
    """`count` JSON events into `folder/events@<shards>.bagz`."""
    rng = random.Random(7)
    for shard in range(shards):
        with sackli.Writer(f"{folder}/events-{shard:05d}-of-{shards:05d}.bagz") as writer:
            writer.write_many(
                json.dumps({"user": rng.randrange(1000), "time": i,
                            "kind": rng.choice(["click", "view", "buy"])}).encode()
                for i in range(shard, count, shards)
            )


def keep_clicks(record: bytes):
    event = json.loads(record)
    if event["kind"] == "click":
        yield json.dumps({"user": event["user"], "at": event["time"]}).encode()


def main(argv: list[str]) -> None:
    folder = tempfile.mkdtemp(prefix="sackli-beam-example-")
    write_events(folder, 100_000)
    with beam.Pipeline(options=PipelineOptions(argv)) as pipeline:
        (pipeline
         | "Read" >> ReadFromSackli(f"{folder}/events@*.bagz")
         | "Clicks" >> beam.FlatMap(keep_clicks)
         | "Write" >> WriteToSackli(
             f"{folder}/clicks@8.bagz",
             options=sackli.Writer.Options(compression=sackli.CompressionZstd(level=6))))
    clicks = sackli.Reader(f"{folder}/clicks@8.bagz")
    print(f"read 100,000 events from {folder}/events@4.bagz; "
          f"wrote {len(clicks):,} clicks to {folder}/clicks@8.bagz "
          f"(first: {clicks[0].decode()})")


if __name__ == "__main__":
    main(sys.argv[1:])
