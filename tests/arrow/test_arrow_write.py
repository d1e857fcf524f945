"""sackli.arrow._write: write_table into one bag or a shard set (sizes,
options, progress), clean-up after failed writes, and bounded memory."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

import sackli
import sackli.arrow
from arrow_helpers import (  # registered by conftest.py
    assert_tables_equal, files_in, records_of, shard_sizes,
)


# --- Writing -----------------------------------------------------------------


def test_max_shard_bytes_bounds_uncompressed_shards(tmp_path):
    """`@*` starts a new shard before one would pass max_shard_bytes (exactly,
    for uncompressed shards); a record larger than that gets a shard alone."""
    table = pa.table({"id": range(5000), "s": ["x" * (i % 50) for i in range(5000)]})
    paths = sackli.arrow.write_table(table, tmp_path / "o@*.bag", max_shard_bytes=20_000)
    assert len(paths) > 5
    assert paths == [str(tmp_path / f"o-{i:05d}-of-{len(paths):05d}.bag")
                     for i in range(len(paths))]
    assert max(os.path.getsize(p) for p in paths) <= 20_000
    assert_tables_equal(sackli.arrow.read_table(str(tmp_path / "o@*.bag"), decode="arrow"), table)

    big = pa.table({"b": [b"x" * 5000, b"y", b"z" * 5000]})
    paths = sackli.arrow.write_table(big, tmp_path / "big@*.bag", column="b", max_shard_bytes=1000)
    assert shard_sizes(paths) == [1, 1, 1]
    assert [r for p in paths for r in records_of(p)] == big.column("b").to_pylist()
    assert not [f for f in files_in(tmp_path) if "pending" in f]


def test_separate_limits_option_applies_to_every_shard(tmp_path):
    """`options=` reaches every shard's Writer, also for `@*` shards renamed
    after writing and `@N` shards split from a spool."""
    options = sackli.Writer.Options(limits_placement=sackli.LimitsPlacement.SEPARATE)
    table = pa.table({"id": range(3000)})
    by_size = sackli.arrow.write_table(table, tmp_path / "o@*.bagz", max_shard_bytes=20_000,
                                       options=options)
    stream = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=100))
    spooled = sackli.arrow.write_table(stream, tmp_path / "q@2.bagz", options=options)
    for paths, spec in [(by_size, "o@*.bagz"), (spooled, "q@2.bagz")]:
        for path in paths:
            assert (tmp_path / ("limits." + os.path.basename(path))).is_file()
        reader = sackli.Reader(str(tmp_path / spec),
                               limits_placement=sackli.LimitsPlacement.SEPARATE)
        assert sackli.arrow.read_table(reader, decode="arrow").equals(table)
    assert not [f for f in files_in(tmp_path) if "pending" in f or "spool" in f]


def test_progress_bar(tmp_path, capfd):
    """progress=True draws a progress bar on stderr; progress=False draws
    nothing."""
    table = pa.table({"a": range(100)})
    sackli.arrow.write_table(table, tmp_path / "quiet.bag", progress=False)
    assert capfd.readouterr().err == ""
    sackli.arrow.write_table(table, tmp_path / "loud.bag", progress=True)
    assert "rows" in capfd.readouterr().err


@pytest.mark.parametrize("table", [
    pa.RecordBatchReader.from_batches(pa.schema([("a", pa.int64())]), []),
    pa.table({"c": pa.array([None, None], pa.string())}),
], ids=["empty_stream", "all_null_skipped"])
def test_no_records_of_unknown_count_into_sharded_spec(tmp_path, table):
    """When no record comes and the count was not known up front (an empty
    stream, or every value skipped as null), `@3` makes three empty shards."""
    extra = {"column": "c", "skip_nulls": True} if isinstance(table, pa.Table) else {}
    paths = sackli.arrow.write_table(table, tmp_path / "e@3.bagz", **extra)
    assert shard_sizes(paths) == [0, 0, 0]
    assert not [f for f in files_in(tmp_path) if "spool" in f]


def test_long_stream_into_even_shards(tmp_path):
    """A RecordBatchReader of many small batches (length unknown, larger than
    a write piece) into `@4`: spooled, then split into four contiguous runs
    as even as possible, in order, with no spool file left."""
    rows = 50_001
    table = pa.table({"id": pa.array(range(rows), pa.int64()),
                      "s": pa.array([f"row {i}" for i in range(rows)])})
    stream = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=1000))
    paths = sackli.arrow.write_table(stream, tmp_path / "s@4.bagz")
    assert shard_sizes(paths) == [12501, 12500, 12500, 12500]
    assert files_in(tmp_path) == ["s-00000-of-00004.bagz", "s-00001-of-00004.bagz",
                                  "s-00002-of-00004.bagz", "s-00003-of-00004.bagz",
                                  "s-of-00004.bagz.arrow_schema"]
    back = sackli.arrow.read_table(str(tmp_path / "s@4.bagz"), decode="arrow")
    assert back.equals(table)
    last_shard = sackli.arrow.read_table(paths[3], decode="arrow")
    assert last_shard.column("id").to_pylist() == list(range(37501, rows))


# --- Errors ------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["x.bag", "x@3.bagz", "x@*.bagz"])
def test_missing_output_folder(tmp_path, spec):
    """An output folder that does not exist raises FileNotFoundError."""
    extra = {"max_shard_bytes": 1000} if "@*" in spec else {}
    with pytest.raises(FileNotFoundError, match="folder does not exist"):
        sackli.arrow.write_table(pa.table({"a": [1]}), tmp_path / "nodir" / spec, **extra)
    assert files_in(tmp_path) == []


@pytest.mark.parametrize("spec, max_shard_bytes", [
    ("x@3.bag", 1000), ("x.bag", 1000), ("x@*.bag", None), ("x@*.bag", 0)])
def test_max_shard_bytes_goes_with_star_spec_only(tmp_path, spec, max_shard_bytes):
    """max_shard_bytes is refused with `@N` or a plain path, required by
    `@*`, and must be positive."""
    with pytest.raises(ValueError, match="max_shard_bytes"):
        sackli.arrow.write_table(pa.table({"a": [1]}), tmp_path / spec,
                                 max_shard_bytes=max_shard_bytes)
    assert files_in(tmp_path) == []


def _fails_on_third_piece():
    calls = []

    def encode(batch):
        calls.append(batch.num_rows)
        if len(calls) == 3:
            raise RuntimeError("boom")
        return [b"r%d" % v for v in batch.column("a").to_pylist()]

    return encode


def _stream_failing_midway(table):
    def batches():
        yield from table.slice(0, 20_000).to_batches(max_chunksize=1000)
        raise RuntimeError("boom")

    return pa.RecordBatchReader.from_batches(table.schema, batches())


@pytest.mark.parametrize("spec, extra", [
    ("p.bagz", {}), ("q@3.bagz", {}), ("s@*.bagz", {"max_shard_bytes": 5000}),
    ("t@3.bag", {"limits": True})])
@pytest.mark.parametrize("failure", ["encoding", "stream"])
def test_failed_write_leaves_nothing_behind(tmp_path, spec, extra, failure):
    """A write that fails midway (the encoding function or the input stream
    raising) leaves no shard, temporary shard, spool, limits or schema file."""
    table = pa.table({"a": range(30_000), "s": [str(i) for i in range(30_000)]})
    extra = dict(extra)
    if extra.pop("limits", False):
        extra["options"] = sackli.Writer.Options(limits_placement=sackli.LimitsPlacement.SEPARATE)
    if failure == "encoding":
        stream = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(1000))
        data = table if spec != "t@3.bag" else stream  # t@3 spools (unknown length)
        with pytest.raises(RuntimeError, match="boom"):
            sackli.arrow.write_table(data, tmp_path / spec, encoding=_fails_on_third_piece(),
                                     **extra)
    else:
        with pytest.raises(RuntimeError, match="boom"):
            sackli.arrow.write_table(_stream_failing_midway(table), tmp_path / spec, **extra)
    assert files_in(tmp_path) == []


# --- Memory --------------------------------------------------------------------


_STREAM_WRITER = """
import json, resource, sys, threading, time
import numpy as np, pyarrow as pa, sackli.arrow

ROW_BYTES, ROWS_PER_BATCH, BATCHES = 16 << 10, 256, 50   # 4 MiB batches, 200 MiB
block = np.random.default_rng(0).integers(0, 256, ROW_BYTES * ROWS_PER_BATCH,
                                          dtype=np.uint8).tobytes()
ends = pa.array(np.arange(ROWS_PER_BATCH + 1, dtype=np.int32) * ROW_BYTES).buffers()[1]
schema = pa.schema([("i", pa.int64()), ("payload", pa.binary())])

def batches():
    for b in range(BATCHES):
        payload = pa.BinaryArray.from_buffers(pa.binary(), ROWS_PER_BATCH,
                                              [None, ends, pa.py_buffer(block)])
        ids = pa.array(np.arange(ROWS_PER_BATCH) + b * ROWS_PER_BATCH)
        yield pa.record_batch([ids, payload], schema=schema)

def anon_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0

peak_anon = base_anon = anon_bytes()
done = threading.Event()
def sample():
    global peak_anon
    while not done.is_set():
        peak_anon = max(peak_anon, anon_bytes())
        time.sleep(0.002)
sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
base_maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
paths = sackli.arrow.write_table(pa.RecordBatchReader.from_batches(schema, batches()), SPEC)
done.set()
sampler.join()
rows = 0
for path in paths:
    with sackli.Reader(path) as reader:
        rows += len(reader)
print(json.dumps({"rows": rows, "data": ROW_BYTES * ROWS_PER_BATCH * BATCHES,
                  "maxrss_growth": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
                                   - base_maxrss,
                  "anon_growth": peak_anon - base_anon}))
"""


def _stream_write(run_python, spec: str) -> dict:
    result = run_python(f"SPEC = {spec!r}\n" + _STREAM_WRITER, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_streamed_write_keeps_peak_rss_bounded(run_python):
    """Writing a 200 MiB stream of record batches to one .bagz keeps the
    process's peak RSS growth (getrusage) under half the data size."""
    outcome = _stream_write(run_python, "out.bagz")
    assert outcome["rows"] == 50 * 256
    assert outcome["maxrss_growth"] < outcome["data"] / 2, outcome


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc/self/status")
def test_streamed_write_to_sharded_bagz_keeps_anonymous_memory_bounded(run_python):
    """Writing a 200 MiB stream to `@2.bagz` (spooled, then split and
    compressed) keeps peak anonymous memory growth under half the data size:
    the split does not hold a whole shard's compressed records at once."""
    outcome = _stream_write(run_python, "out@2.bagz")
    assert outcome["rows"] == 50 * 256
    assert outcome["anon_growth"] < outcome["data"] / 2, outcome


# --- One schema file per shard set ------------------------------------------------


def test_sets_of_one_name_keep_their_own_schema_files(tmp_path):
    """Two sets of one name with different counts (write_table refuses to
    make the second, tests/core/test_set_conflicts.py, but an older writer or a
    copy can) keep their own schema files: each set reads back its own
    types."""
    ints = pa.table({"v": pa.array(range(40), pa.int32())})
    texts = pa.table({"v": pa.array([f"t{i}" for i in range(40)])})
    sackli.arrow.write_table(ints, tmp_path / "evj@8.bagz")
    (tmp_path / "other").mkdir()
    written = sackli.arrow.write_table(texts, tmp_path / "other" / "evj@*.bagz",
                                       max_shard_bytes=200)
    assert len(written) not in (0, 8)
    for name in os.listdir(tmp_path / "other"):  # beside the @8 set
        os.rename(tmp_path / "other" / name, tmp_path / name)
    paths = [str(tmp_path / os.path.basename(path)) for path in written]
    assert sackli.arrow.read_table(str(tmp_path / "evj@8.bagz"), decode="arrow").equals(ints)
    count = len(paths)
    assert sackli.arrow.read_table(str(tmp_path / f"evj@{count}.bagz"), decode="arrow").equals(texts)
    assert sackli.arrow.read_schema(paths[0]) == texts.schema
    assert sackli.arrow.read_schema(str(tmp_path / "evj-00003-of-00008.bagz")) == ints.schema


def test_a_set_written_with_the_older_shared_schema_name_still_reads(tmp_path):
    table = pa.table({"v": pa.array([1.5, None], pa.float32())})
    sackli.arrow.write_table(table, tmp_path / "old@2.bagz")
    # Before schema files were per set, every set of a name used this one.
    os.rename(tmp_path / "old-of-00002.bagz.arrow_schema", tmp_path / "old.bagz.arrow_schema")
    assert sackli.arrow.row_encoding(str(tmp_path / "old@2.bagz")) == "row"
    assert sackli.arrow.read_table(str(tmp_path / "old@*.bagz"), decode="arrow").equals(table)
