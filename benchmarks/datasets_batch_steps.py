"""Where a batch read of sackli.datasets spends its time: each step of
`read_indices` for a batch of 1,000 datapoints, timed alone, next to the
whole read and to the `bags` loop it replaces (same process, same data as
benchmarks/datasets_bags.py: a 4 KiB `bytes` image, an `int(8)` label, a
`utf8[]` list of 0-20 words).

Steps (medians over `--repeat` rounds of 10 batches, per batch):
  refs: engine read    the 1,000 refs.bag records (one engine batch)
  refs: msgpack        unpacking them
  <field>: engine      the field's records (one engine batch; for the
                       label, one packed buffer)
  <field>: decode      the decoder over the records (the label: `array`
                       over the packed buffer)
  <field>: whole       `read_indices(batch, {field: True})`, refs included
  all fields           `read_indices(batch)`
  copy floor           plain `mmap` slices of the same images (no library)

The engine steps allocate one Python object per record; whether the heap
reuses the memory freed by the previous batch or asks the kernel for fresh
pages (glibc returns a freed heap top to the kernel) moves them by 2-4x.
sackli raises glibc's thresholds before large batches (docs/datasets.md,
"Memory"); run it with that off to see the difference:

    python benchmarks/datasets_batch_steps.py
    SACKLI_KEEP_BATCH_MEMORY=0 python benchmarks/datasets_batch_steps.py
"""

from __future__ import annotations

import argparse
import array
import gc
import mmap
import os
import shutil
import statistics
import tempfile
import time
from itertools import chain
from typing import Any, Callable

import bags
import bags.formats
import msgpack

from sackli import _bulk, datasets
from datasets_bags import BATCH, IMAGE_BYTES, SPEC, batch_indices, make_datapoints


def per_batch(batches: list[Any], step: Callable[[Any], Any], repeat: int) -> float:
    """Median milliseconds of `step` per batch."""
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        for batch in batches:
            step(batch)
        times.append((time.perf_counter() - start) / len(batches))
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datapoints", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    n = args.datapoints
    root = tempfile.mkdtemp(prefix="sackli-batch-steps-")
    try:
        with datasets.DatasetWriter(os.path.join(root, "ds"), SPEC) as writer:
            for datapoint in make_datapoints(n):
                writer.append(datapoint)
        folder = os.path.join(root, "ds")
        reader = datasets.DatasetReader(folder)
        theirs = bags.DatasetReader(folder, bags.formats.decoders)
        batches = batch_indices(n, 10)
        position = {field: k for k, field in enumerate(reader.spec)}
        refs = {id(b): [msgpack.unpackb(r) for r in reader._refs.read_indices(b)] for b in batches}

        def field_refs(batch: list[int], field: str) -> list[Any]:
            return [ref[position[field]] for ref in refs[id(batch)]]

        image_refs = {id(b): field_refs(b, "image") for b in batches}
        label_refs = {id(b): field_refs(b, "label") for b in batches}
        word_refs = {id(b): list(chain.from_iterable(
            range(r[0], r[0] + r[1]) for r in field_refs(b, "words") if r)) for b in batches}
        records = {id(b): reader._readers["words"].read_indices(word_refs[id(b)]) for b in batches}
        packed = {id(b): _bulk.start_read_indices(reader._readers["label"], label_refs[id(b)])
                  .packed()[0] for b in batches}
        refs_records = {id(b): reader._refs.read_indices(b) for b in batches}

        def labels(batch: list[int]) -> list[int]:
            values = array.array("Q")
            values.frombytes(packed[id(batch)])
            return values.tolist()

        path = os.path.join(folder, "image.bag")
        with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            steps: dict[str, Callable[[Any], Any]] = {
                "refs: engine read": reader._refs.read_indices,
                "refs: msgpack": lambda b: list(map(msgpack.unpackb, refs_records[id(b)])),
                "image: engine": lambda b: reader._readers["image"].read_indices(image_refs[id(b)]),
                "image: whole": lambda b: reader.read_indices(b, {"image": True}),
                "label: engine (packed)": lambda b: _bulk.start_read_indices(
                    reader._readers["label"], label_refs[id(b)]).packed(),
                "label: decode (array)": labels,
                "label: whole": lambda b: reader.read_indices(b, {"label": True}),
                "words: engine": lambda b: reader._readers["words"].read_indices(word_refs[id(b)]),
                "words: decode": lambda b: list(map(bytes.decode, records[id(b)])),
                "words: whole": lambda b: reader.read_indices(b, {"words": True}),
                "all fields": reader.read_indices,
                "copy floor (mmap slices of the images)": lambda b: [
                    data[i * IMAGE_BYTES:(i + 1) * IMAGE_BYTES] for i in image_refs[id(b)]],
            }
            results = {label: per_batch(batches, step, args.repeat) for label, step in steps.items()}
        bags_loop = per_batch(batches, lambda b: [theirs[i] for i in b], max(3, args.repeat // 2))
        words = sum(map(len, word_refs.values())) / len(batches)
        print(f"{n:,} datapoints; batches of {BATCH:,} ({words:,.0f} words each); "
              f"SACKLI_KEEP_BATCH_MEMORY={os.environ.get('SACKLI_KEEP_BATCH_MEMORY', 'unset')}; "
              f"medians of {args.repeat}, ms per batch")
        for label, ms in results.items():
            print(f"{label:<40} {ms:8.3f}")
        print(f"{'bags loop':<40} {bags_loop:8.3f}")
        print(f"bags loop / all fields: {bags_loop / results['all fields']:.1f}x")
        reader.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
