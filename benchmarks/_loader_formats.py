"""Each format's side of benchmarks/loader_peers.py, run inside the peer's
own worker (benchmarks/_peer_worker.py, in that peer's virtualenv).

Only the standard library is imported here; a format's own package is
imported inside its functions, so this file loads in every virtualenv.
A sample is (image bytes, int label). Every format stores it its own way,
written with its own writer:

  sackli       `.bag` shards (sackli.ShardedWriter), a record is an 8-byte
               little-endian label then the PNG bytes; read through
               sackli.EpochStream (a full shuffle);
  arrayrecord  ArrayRecordWriter shards with `group_size:1` (what its
               docs ask for random access), the same record bytes; read
               with ArrayRecordDataSource over a seeded permutation;
  tfrecord     tf.io.TFRecordWriter shards of tf.train.Example (`image`
               bytes, `label` int64); read with tf.data.TFRecordDataset:
               shards shuffled, interleaved, a shuffle buffer, parsed in
               batches of 256 (one record at a time for the resume);
  webdataset   webdataset.ShardWriter tars (`png`, `cls`); read with
               webdataset.WebDataset: shards shuffled, a shuffle buffer;
  mosaicml     streaming.MDSWriter shards (`image` bytes, `label` int);
               read with streaming.StreamingDataset(shuffle=True,
               batch_size=256).

No image is decoded: the format is what is measured.
"""

from __future__ import annotations

import math
import os
import random
import struct
import sys
import time
import zlib
from typing import Any, Callable, Iterator

BUFFER = 1_000  # shuffle buffer of the streaming formats (tfrecord, webdataset)
BATCH = 256  # the loader batch size a format asks for (MosaicML's StreamingDataset)
Sample = tuple[bytes, int]


def digest(samples: Iterator[Sample]) -> tuple[int, int]:
    """(order-free checksum, count) of `samples`: the caller compares it
    with the checksum of the samples it handed out."""
    total, count = 0, 0
    for image, label in samples:
        total = (total + zlib.crc32(image) + label * 0x9E3779B1) % (1 << 64)
        count += 1
    return total, count


def _pack(image: bytes, label: int) -> bytes:
    return struct.pack("<q", label) + image


def _unpack(record: bytes) -> Sample:
    return bytes(record[8:]), struct.unpack_from("<q", record)[0]


def _shard_names(stem: str, shards: int, suffix: str) -> list[str]:
    return [f"{stem}-{i:05d}-of-{shards:05d}{suffix}" for i in range(shards)]


def _split(samples: list[Sample], shards: int) -> list[list[Sample]]:
    """Contiguous runs of records, as even as possible (sackli's split)."""
    per = math.ceil(len(samples) / shards)
    return [samples[i * per:(i + 1) * per] for i in range(shards)]


class Format:
    """One format: write it, read a shuffled epoch, read by index, resume.

    `where` is {"local": folder} or {"remote": url of the folder, "cache":
    a cache folder or None}; `meta` is what `write` returned."""

    name = ""
    random_access = True

    def write(self, folder: str, samples: list[Sample], shards: int) -> dict[str, Any]:
        raise NotImplementedError

    def epoch(self, where: dict[str, Any], meta: dict[str, Any], seed: int) -> Iterator[Sample]:
        raise NotImplementedError

    def opener(self, where: dict[str, Any], meta: dict[str, Any]) -> Callable[[int], Sample]:
        raise NotImplementedError

    def checkpoint(self, where: dict[str, Any], meta: dict[str, Any], seed: int, position: int,
                   scratch: str) -> tuple[Any, Sample]:
        """(a resume state after `position` records of the epoch, the record
        that comes next in an uninterrupted epoch); untimed."""
        raise NotImplementedError

    def restore(self, where: dict[str, Any], meta: dict[str, Any], seed: int, state: Any) -> Sample:
        """Opens anew, restores `state` and gives the first record; timed."""
        raise NotImplementedError

    resume_how = ""


def _nth(samples: Iterator[Sample], position: int) -> Sample:
    for i, sample in enumerate(samples):
        if i == position:
            return sample
    raise IndexError(f"the epoch has fewer than {position + 1} records")


class Sackli(Format):
    name = "sackli"
    resume_how = "EpochStream.load_state_dict"

    def _spec(self, where: dict[str, Any], meta: dict[str, Any]) -> str:
        return f"{where.get('local') or where['remote']}/images@{meta['shards']}.bag"

    def _reader(self, where: dict[str, Any], meta: dict[str, Any]) -> Any:
        import sackli

        if where.get("remote"):
            return sackli.Reader(self._spec(where, meta), cache_dir=where["cache"])
        return sackli.Reader(self._spec(where, meta))

    def write(self, folder: str, samples: list[Sample], shards: int) -> dict[str, Any]:
        import sackli

        with sackli.ShardedWriter(f"{folder}/images@{shards}.bag", num_records=len(samples)) as writer:
            writer.write_many(_pack(image, label) for image, label in samples)
        return {"shards": shards}

    def _stream(self, where: dict[str, Any], meta: dict[str, Any], seed: int) -> Any:
        import sackli

        return sackli.EpochStream(self._reader(where, meta), seed=seed)

    def epoch(self, where: dict[str, Any], meta: dict[str, Any], seed: int) -> Iterator[Sample]:
        return map(_unpack, self._stream(where, meta, seed))

    def opener(self, where: dict[str, Any], meta: dict[str, Any]) -> Callable[[int], Sample]:
        reader = self._reader(where, meta)
        return lambda i: _unpack(reader[i])

    def checkpoint(self, where, meta, seed, position, scratch):
        stream = self._stream(where, meta, seed)
        records = iter(stream)
        for _ in range(position):
            next(records)
        state = stream.state_dict()
        return state, _unpack(next(records))

    def restore(self, where, meta, seed, state):
        stream = self._stream(where, meta, seed)
        stream.load_state_dict(state)
        return _unpack(next(iter(stream)))


class ArrayRecord(Format):
    name = "arrayrecord"
    resume_how = "open + read the permutation's next index (random access; no state of its own)"

    def _paths(self, where: dict[str, Any], meta: dict[str, Any]) -> list[str]:
        base = where.get("local") or where["remote"]
        return [f"{base}/{name}" for name in _shard_names("images", meta["shards"], ".array_record")]

    def _source(self, where: dict[str, Any], meta: dict[str, Any]) -> Any:
        from array_record.python.array_record_data_source import ArrayRecordDataSource

        return ArrayRecordDataSource(self._paths(where, meta))

    def write(self, folder: str, samples: list[Sample], shards: int) -> dict[str, Any]:
        from array_record.python.array_record_module import ArrayRecordWriter

        for name, part in zip(_shard_names("images", shards, ".array_record"), _split(samples, shards)):
            writer = ArrayRecordWriter(os.path.join(folder, name), "group_size:1")
            for image, label in part:
                writer.write(_pack(image, label))
            writer.close()
        return {"shards": shards}

    def epoch(self, where, meta, seed):
        source = self._source(where, meta)
        order = random.Random(seed).sample(range(len(source)), len(source))
        for start in range(0, len(order), 256):
            yield from map(_unpack, source.__getitems__(order[start:start + 256]))

    def opener(self, where, meta):
        source = self._source(where, meta)
        return lambda i: _unpack(source[i])

    def checkpoint(self, where, meta, seed, position, scratch):
        return {"position": position}, _nth(self.epoch(where, meta, seed), position)

    def restore(self, where, meta, seed, state):
        source = self._source(where, meta)
        order = random.Random(seed).sample(range(len(source)), len(source))
        return _unpack(source[order[state["position"]]])


class TFRecord(Format):
    name = "tfrecord"
    random_access = False
    resume_how = "tf.train.Checkpoint of the tf.data iterator (shuffle buffer included)"

    def _dataset(self, where: dict[str, Any], meta: dict[str, Any], seed: int, batched: bool = False) -> Any:
        """The tf.data pipeline; `batched`: in batches of BATCH, parsed a
        batch at a time (tf.io.parse_example), as its guide does for speed."""
        import tensorflow as tf

        base = where.get("local") or where["remote"]
        paths = [f"{base}/{name}" for name in _shard_names("images", meta["shards"], ".tfrecord")]
        features = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}

        def parse(serialized: Any) -> Any:
            example = tf.io.parse_single_example(serialized, features)
            return example["image"], example["label"]

        files = tf.data.Dataset.from_tensor_slices(paths).shuffle(len(paths), seed=seed)
        records = files.interleave(tf.data.TFRecordDataset, cycle_length=len(paths),
                                   num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        records = records.shuffle(BUFFER, seed=seed)
        if batched:
            def parse_batch(serialized: Any) -> Any:
                examples = tf.io.parse_example(serialized, features)
                return examples["image"], examples["label"]

            records = records.batch(BATCH).map(parse_batch, num_parallel_calls=tf.data.AUTOTUNE,
                                               deterministic=True)
        else:
            records = records.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return records.prefetch(tf.data.AUTOTUNE)

    def write(self, folder: str, samples: list[Sample], shards: int) -> dict[str, Any]:
        import tensorflow as tf

        for name, part in zip(_shard_names("images", shards, ".tfrecord"), _split(samples, shards)):
            with tf.io.TFRecordWriter(os.path.join(folder, name)) as writer:
                for image, label in part:
                    example = tf.train.Example(features=tf.train.Features(feature={
                        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
                        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))}))
                    writer.write(example.SerializeToString())
        return {"shards": shards}

    def epoch(self, where, meta, seed):
        for images, labels in self._dataset(where, meta, seed, batched=True).as_numpy_iterator():
            for image, label in zip(images, labels):
                yield bytes(image), int(label)

    def checkpoint(self, where, meta, seed, position, scratch):
        import tensorflow as tf

        iterator = iter(self._dataset(where, meta, seed))
        for _ in range(position):
            next(iterator)
        path = tf.train.Checkpoint(iterator=iterator).write(os.path.join(scratch, "tf-iterator"))
        image, label = next(iterator)
        return {"checkpoint": path}, (bytes(image.numpy()), int(label.numpy()))

    def restore(self, where, meta, seed, state):
        import tensorflow as tf

        iterator = iter(self._dataset(where, meta, seed))
        tf.train.Checkpoint(iterator=iterator).read(state["checkpoint"]).assert_consumed()
        image, label = next(iterator)
        return bytes(image.numpy()), int(label.numpy())


class WebDataset(Format):
    name = "webdataset"
    random_access = False
    resume_how = "skip to the position (no resume state of its own)"

    def _urls(self, where: dict[str, Any], meta: dict[str, Any]) -> list[str]:
        names = [f"images-{i:06d}.tar" for i in range(meta["shards"])]
        if where.get("local"):
            return [os.path.join(where["local"], name) for name in names]
        # Its documented bucket path: a `pipe:` of the AWS CLI (in this
        # virtualenv), which honours AWS_ENDPOINT_URL.
        aws = os.path.join(os.path.dirname(sys.executable), "aws")
        return [f"pipe:{aws} s3 cp --quiet {where['remote']}/{name} -" for name in names]

    def write(self, folder: str, samples: list[Sample], shards: int) -> dict[str, Any]:
        import webdataset as wds

        per = math.ceil(len(samples) / shards)
        with wds.ShardWriter(os.path.join(folder, "images-%06d.tar"), maxcount=per, verbose=0) as writer:
            for i, (image, label) in enumerate(samples):
                writer.write({"__key__": f"{i:07d}", "png": image, "cls": label})
        return {"shards": math.ceil(len(samples) / per)}

    def epoch(self, where, meta, seed):
        import webdataset as wds

        options = {"cache_dir": where["cache"]} if where.get("cache") else {}
        dataset = wds.WebDataset(self._urls(where, meta), shardshuffle=meta["shards"], seed=seed,
                                 empty_check=False, **options).shuffle(BUFFER, seed=seed)
        for sample in dataset:
            yield sample["png"], int(sample["cls"])

    def checkpoint(self, where, meta, seed, position, scratch):
        return {"position": position}, _nth(self.epoch(where, meta, seed), position)

    def restore(self, where, meta, seed, state):
        return _nth(self.epoch(where, meta, seed), state["position"])


class MosaicML(Format):
    name = "mosaicml"
    resume_how = "StreamingDataset.load_state_dict"

    def _dataset(self, where: dict[str, Any], seed: int) -> Any:
        from streaming import StreamingDataset
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
        # batch_size is the DataLoader's, which it asks for: with 1 an epoch
        # here ran 22x slower than with 256.
        if where.get("remote"):
            return StreamingDataset(remote=where["remote"], local=where["cache"], shuffle=True,
                                    shuffle_seed=seed, batch_size=BATCH)
        return StreamingDataset(local=where["local"], shuffle=True, shuffle_seed=seed, batch_size=BATCH)

    def write(self, folder: str, samples: list[Sample], shards: int) -> dict[str, Any]:
        import json

        from streaming import MDSWriter

        total = sum(len(image) + 8 for image, _ in samples)
        limit = math.ceil(total / shards * 1.01) + 1024
        with MDSWriter(out=folder, columns={"image": "bytes", "label": "int"}, size_limit=limit) as writer:
            for image, label in samples:
                writer.write({"image": image, "label": label})
        with open(os.path.join(folder, "index.json")) as index:
            return {"shards": len(json.load(index)["shards"])}

    def epoch(self, where, meta, seed):
        dataset = self._dataset(where, seed)
        try:
            for sample in dataset:
                yield bytes(sample["image"]), int(sample["label"])
        finally:
            del dataset

    def opener(self, where, meta):
        dataset = self._dataset(where, 0)
        return lambda i: (lambda s: (bytes(s["image"]), int(s["label"])))(dataset[i])

    def checkpoint(self, where, meta, seed, position, scratch):
        dataset = self._dataset(where, seed)
        expected = None
        for i, sample in enumerate(dataset):
            if i == position:
                expected = bytes(sample["image"]), int(sample["label"])
                break
        state = dataset.state_dict(num_samples=position, from_beginning=True)
        del dataset
        return state, expected

    def restore(self, where, meta, seed, state):
        dataset = self._dataset(where, seed)
        dataset.load_state_dict(state)
        sample = next(iter(dataset))
        return bytes(sample["image"]), int(sample["label"])


FORMATS: dict[str, Format] = {f.name: f for f in (Sackli(), ArrayRecord(), TFRecord(), WebDataset(), MosaicML())}


def _samples(source: str) -> list[Sample]:
    """The samples loader_peers.py wrote to `source`: `<source>.bin` (the
    images, back to back) and `<source>.txt` (a `size label` line each)."""
    with open(source + ".bin", "rb") as data, open(source + ".txt") as sizes:
        out = []
        for line in sizes:
            size, label = map(int, line.split())
            out.append((data.read(size), label))
    return out


def run(request: dict[str, Any]) -> dict[str, Any]:
    """One request of loader_peers.py (see its docstring); the answer."""
    fmt = FORMATS[request["format"]]
    op, where, meta = request["loader"], request.get("where") or {}, request.get("meta") or {}
    seed = request.get("seed", 0)
    if op == "write":
        samples = _samples(request["source"])
        start = time.perf_counter()
        meta = fmt.write(request["folder"], samples, request["shards"])
        return {"seconds": time.perf_counter() - start, "meta": meta}
    if op == "epoch":
        start = time.perf_counter()
        first: list[float] = []  # the time to the first sample: opening's share

        def timed(samples: Iterator[Sample]) -> Iterator[Sample]:
            for sample in samples:
                if not first:
                    first.append(time.perf_counter() - start)
                yield sample

        checksum, records = digest(timed(fmt.epoch(where, meta, seed)))
        return {"seconds": time.perf_counter() - start, "first_seconds": first[0] if first else None,
                "checksum": checksum, "records": records}
    if op == "random":
        get = fmt.opener(where, meta)
        indices = request["indices"]
        for i in indices[:20]:  # warm-up: first touches of the files
            get(i)
        times, checks = [], []
        for i in indices:
            start = time.perf_counter_ns()
            sample = get(i)
            times.append((time.perf_counter_ns() - start) / 1000)
            checks.append(digest(iter([sample]))[0])
        return {"micros": times, "checks": checks}
    if op == "resume":
        state, expected = fmt.checkpoint(where, meta, seed, request["position"], request["scratch"])
        start = time.perf_counter()
        first = fmt.restore(where, meta, seed, state)
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "exact": first == expected, "how": fmt.resume_how}
    raise ValueError(f"unknown loader request {op!r}")
