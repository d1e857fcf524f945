"""A numeric column out of a multi-field dataset, as Arrow: the dataset's
field-subset scan against reading the same column from row-encoded bags.

The data is the issue's shape: an "image" of `--image-bytes` random bytes,
an `int(8)` label and a `utf8[]` list of 0-20 words per datapoint. It is
written once as a sackli.datasets folder (the bytes `bags` writes) and once
per row encoding as a bag of whole rows (`sackli.arrow.write_table`,
encoding "arrow" and "json"). Then, `--repeat` times each, median shown,
the label column is read into a pyarrow Table:

  dataset fields=[label]    sackli.arrow.read_table(ds, fields=["label"])
  rows (arrow) columns=...  read_table(rows.bag, decode="arrow", columns=["label"])
  rows (json) columns=...   read_table(rows.bag, decode="json", columns=["label"])
  bags loop, label only     the `bags` 0.5.1 DatasetReader, r[i, {"label": True}] for every i

The ratio is each workload's median time over the dataset scan's.

    python benchmarks/datasets_columns.py            # 50k datapoints
    python benchmarks/datasets_columns.py --quick    # 5k, a few seconds
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from typing import Any, Callable

import bags
import numpy as np
import pyarrow as pa

import sackli
import sackli.arrow

_SPEC = {"image": "bytes", "label": "int(8)", "words": "utf8[]"}


def make_table(count: int, image_bytes: int, seed: int = 0) -> pa.Table:
    """The datapoints as a table (label uint64, as the dataset stores it)."""
    rng = np.random.default_rng(seed)
    vocabulary = [f"word{k}" for k in range(1000)]
    lengths = rng.integers(0, 21, count)
    picks = rng.integers(0, len(vocabulary), int(lengths.sum()))
    words, at = [], 0
    for length in lengths:
        words.append([vocabulary[k] for k in picks[at:at + length]])
        at += length
    images = rng.integers(0, 256, count * image_bytes, dtype=np.uint8).tobytes()
    return pa.table({
        "image": pa.array([images[i * image_bytes:(i + 1) * image_bytes] for i in range(count)],
                          pa.binary()),
        "label": pa.array(rng.integers(0, 1000, count).astype(np.uint64)),
        "words": pa.array(words, pa.list_(pa.string())),
    })


def _median_seconds(run: Callable[[], Any], repeat: int, check: Callable[[Any], None]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
        check(result)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5k datapoints instead of 50k")
    parser.add_argument("--datapoints", type=int, help="how many (overrides --quick)")
    parser.add_argument("--image-bytes", type=int, default=1024, help="bytes per image (1024)")
    parser.add_argument("--repeat", type=int, help="runs per workload (default 5, quick 3)")
    parser.add_argument("--dir", help="where to write (default: a temporary folder, removed)")
    args = parser.parse_args()
    count = args.datapoints or (5_000 if args.quick else 50_000)
    repeat = args.repeat or (3 if args.quick else 5)
    folder = args.dir or tempfile.mkdtemp(prefix="sackli-datasets-columns-")
    os.makedirs(folder, exist_ok=True)
    try:
        table = make_table(count, args.image_bytes)
        labels = table.column("label").combine_chunks()
        dataset = os.path.join(folder, "ds")
        sackli.arrow.write_table(table, dataset, spec=_SPEC)
        rows = {encoding: os.path.join(folder, f"rows-{encoding}.bag")
                for encoding in ("arrow", "json")}
        for encoding, path in rows.items():
            sackli.arrow.write_table(table, path, encoding=encoding)

        def same_labels(result: Any) -> None:
            column = result.column("label").combine_chunks()
            assert column.cast(pa.uint64()).equals(labels), "the column read back differs"

        def bags_loop() -> pa.Table:
            # bags' sharded reader takes no mask; its shard reader does (one shard here).
            reader = bags.DatasetReader(os.path.join(dataset, "000000"), bags.decoders)
            mask = {"label": True}
            values = [reader[i, mask]["label"] for i in range(len(reader))]
            return pa.table({"label": pa.array(values, pa.uint64())})

        workloads: list[tuple[str, Callable[[], Any]]] = [
            ("dataset fields=[label]",
             lambda: sackli.arrow.read_table(dataset, fields=["label"])),
            ("rows (arrow) columns=[label]",
             lambda: sackli.arrow.read_table(rows["arrow"], decode="arrow", columns=["label"])),
            ("rows (json) columns=[label]",
             lambda: sackli.arrow.read_table(rows["json"], decode="json", columns=["label"])),
            ("bags loop, label only", bags_loop),
        ]
        print(f"{count:,} datapoints ({args.image_bytes} B image, int(8) label, 0-20 words); "
              f"median of {repeat}; sackli {sackli.__version__}, bags 0.5.1, "
              f"pyarrow {pa.__version__}, Python {platform.python_version()}, "
              f"{os.cpu_count()} CPUs", flush=True)
        medians = {name: _median_seconds(run, repeat, same_labels) for name, run in workloads}
        base = medians[workloads[0][0]]
        print(f"{'workload':<32}{'median':>12}{'datapoints/s':>16}{'vs dataset':>12}")
        for name, seconds in medians.items():
            print(f"{name:<32}{seconds * 1000:>10.1f}ms{count / seconds:>16,.0f}"
                  f"{seconds / base:>11.1f}x")
    finally:
        if not args.dir:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
