"""sackli in one minute: write a sharded bag set, read it back at random.

Run: python examples/quickstart.py [folder]   (default: a temporary folder)
"""

from __future__ import annotations

import json
import pathlib
import random
import sys
import tempfile
import time

import sackli

NUM_SHARDS = 4
RECORDS_PER_SHARD = 25_000


def make_record(i: int) -> bytes:
    """A small JSON document, the kind of record bags often hold."""
    return json.dumps({"id": i, "label": i % 10, "text": f"example number {i}"}).encode()


def main(folder: pathlib.Path) -> None:
    spec = str(folder / f"example@{NUM_SHARDS}.bagz")
    start = time.perf_counter()
    total = NUM_SHARDS * RECORDS_PER_SHARD
    # .bagz: zstd level 3 per record; the shards appear together when the writer closes.
    with sackli.ShardedWriter(spec, num_records=total) as writer:
        writer.write_many(make_record(i) for i in range(total))
    print(f"wrote {total:,} records into {NUM_SHARDS} shards ({spec}) in {time.perf_counter() - start:.2f} s")

    with sackli.Reader(spec) as reader:
        print(f"opened {reader!r}")
        print(f"  {reader.approximate_bytes_per_record():.1f} stored bytes per record")
        print(f"  reader[0]  = {reader[0].decode()}")
        print(f"  reader[-1] = {reader[-1].decode()}")

        rng = random.Random(0)
        indices = [rng.randrange(total) for _ in range(10_000)]
        start = time.perf_counter()
        records = reader.read_indices(indices)
        elapsed = time.perf_counter() - start
        assert all(json.loads(r)["id"] == i for r, i in zip(records, indices))
        print(f"read {len(indices):,} random records with read_indices in {elapsed * 1e3:.1f} ms, all correct")

        evens = reader[::2]
        print(f"a view of every other record: {evens!r}; evens[3] has id {json.loads(evens[3])['id']}")

        index = sackli.Index(reader)
        wanted = make_record(4242)
        print(f"Index over {len(index):,} distinct records: {wanted.decode()} is at {index[wanted]}")
    print("done: sharded write, random reads, views and lookups all worked")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        target = pathlib.Path(sys.argv[1])
        target.mkdir(parents=True, exist_ok=True)
        main(target)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(pathlib.Path(tmp))
