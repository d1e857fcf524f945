"""write_table's choice of zstd literals for row-encoded `.bagz` shards:
raw for short mixed-type rows (Huffman tables cost more than they save),
Huffman for text-heavy rows, explicit options as given; every file round
trips and the reference `bagz` reads its records."""

from __future__ import annotations

import bagz
import numpy as np
import pyarrow as pa
import pytest

import sackli
import sackli.arrow
from arrow_helpers import assert_tables_equal  # registered by conftest.py
from cli_helpers import ok
from sackli.arrow._literals import RAW_LITERALS_MAX_SAVING, huffman_saving

ROWS = 3000


def _mixed_table(rows: int = ROWS) -> pa.Table:
    """Issue 17's kind of rows (~140 bytes): numbers, timestamps, decimals,
    short strings, lists, a struct and nulls."""
    rng = np.random.default_rng(7)
    words = np.array(["ab", "cde", "fghij", "klm", "Zürich"])

    def strings(count: int) -> pa.Array:
        return pa.array(words[rng.integers(0, len(words), count)])

    return pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "user": pa.array(rng.integers(0, 10**6, rows).astype(np.int32)),
        "score": pa.array(rng.random(rows), mask=rng.random(rows) < 0.1),
        "ratio": pa.array(rng.random(rows).astype(np.float32)),
        "name": strings(rows),
        "time": pa.array(rng.integers(0, 2**50, rows), pa.timestamp("us", "UTC")),
        "price": pa.array(rng.integers(0, 10**8, rows), pa.int64()).cast(pa.decimal128(19, 0)),
        "tags": pa.ListArray.from_arrays(np.arange(0, 2 * rows + 1, 2, dtype=np.int32),
                                         strings(2 * rows)),
        "scores": pa.array(list(rng.integers(0, 100, size=(rows, 2)).astype(np.int32))),
        "point": pa.StructArray.from_arrays(
            [pa.array(rng.random(rows)), pa.array(rng.random(rows)), strings(rows)],
            names=["x", "y", "label"]),
        "flag": pa.array(rng.random(rows) < 0.5),
    })


def _text_table(rows: int = 500) -> pa.Table:
    """~600-byte rows of words over a small alphabet: literals Huffman-code well."""
    rng = np.random.default_rng(8)
    letters = np.array(list("abcdefghijklmnop"))
    words = ["".join(rng.choice(letters, rng.integers(2, 10))) for _ in range(400)]
    text = [" ".join(rng.choice(words, 100))[:600] for _ in range(rows)]
    return pa.table({"id": pa.array(np.arange(rows, dtype=np.int64)), "text": pa.array(text)})


def _frames(paths: list[str]) -> list[bytes]:
    return [frame for path in paths
            for frame in sackli.Reader(path, compression=sackli.CompressionNone()).read()]


def _write_with(table: pa.Table, spec: str, literals: str) -> list[str]:
    options = sackli.Writer.Options(compression=sackli.CompressionZstd(level=3, literals=literals))
    return sackli.arrow.write_table(table, spec, options=options, progress=False)


def _read_back(spec: str, paths: list[str], table: pa.Table) -> None:
    assert_tables_equal(sackli.arrow.read_table(spec), table)
    records = sackli.Reader(spec).read()
    assert [r for p in paths for r in bagz.Reader(p).read()] == records


@pytest.mark.parametrize("shards", ["out.bagz", "out@3.bagz"])
def test_mixed_narrow_rows_store_raw_literals(tmp_path, shards):
    table = _mixed_table()
    spec = str(tmp_path / shards)
    paths = sackli.arrow.write_table(table, spec, progress=False)
    # The very frames an explicit raw-literal write gives, not Huffman's.
    raw = _write_with(table, str(tmp_path / ("raw-" + shards)), "raw")
    huffman = _write_with(table, str(tmp_path / ("huffman-" + shards)), "huffman")
    assert _frames(paths) == _frames(raw)
    assert _frames(paths) != _frames(huffman)
    _read_back(spec, paths, table)


def test_text_heavy_rows_keep_huffman_literals(tmp_path):
    table = _text_table()
    spec = str(tmp_path / "text.bagz")
    paths = sackli.arrow.write_table(table, spec, progress=False)
    huffman = _write_with(table, str(tmp_path / "huffman.bagz"), "huffman")
    raw = _write_with(table, str(tmp_path / "raw.bagz"), "raw")
    assert _frames(paths) == _frames(huffman)
    assert sum(map(len, _frames(raw))) > 1.1 * sum(map(len, _frames(paths)))
    _read_back(spec, paths, table)


def test_the_rule_is_the_measured_saving():
    from sackli.arrow._row_codec import NativeRowEncoder

    for table, raw in ((_mixed_table(), True), (_text_table(), False)):
        packed = NativeRowEncoder(table.schema).encode(table.to_batches()[0])
        assert (huffman_saving(packed) < RAW_LITERALS_MAX_SAVING) == raw


@pytest.mark.parametrize("literals", ["huffman", "raw"])
def test_explicit_compression_is_used_as_given(tmp_path, literals):
    # Each table gets the setting the automatic choice would not pick.
    table = _mixed_table() if literals == "huffman" else _text_table()
    given = _write_with(table, str(tmp_path / "given.bagz"), literals)
    auto = sackli.arrow.write_table(table, str(tmp_path / "auto.bagz"), progress=False)
    assert _frames(given) != _frames(auto)
    records = sackli.Reader(given[0]).read()
    with sackli.Writer(tmp_path / "ref.bagz",
                       compression=sackli.CompressionZstd(level=3, literals=literals)) as writer:
        for record in records:
            writer.write(record)
    assert _frames(given) == _frames([str(tmp_path / "ref.bagz")])
    _read_back(given[0], given, table)


def test_options_without_a_compression_still_choose(tmp_path):
    table = _mixed_table()
    options = sackli.Writer.Options(max_parallelism=2)
    paths = sackli.arrow.write_table(table, str(tmp_path / "o.bagz"), options=options,
                                     progress=False)
    raw = _write_with(table, str(tmp_path / "raw.bagz"), "raw")
    assert _frames(paths) == _frames(raw)
    assert_tables_equal(sackli.arrow.read_table(paths[0]), table)


@pytest.mark.parametrize("case", ["bag", "json", "column", "empty"])
def test_other_writes_keep_default_frames(tmp_path, case):
    table = _mixed_table(200)
    if case == "bag":  # uncompressed: nothing to choose
        paths = sackli.arrow.write_table(table, str(tmp_path / "t.bag"), progress=False)
        assert _frames(paths) == sackli.Reader(paths[0]).read()
        return
    if case == "empty":
        paths = sackli.arrow.write_table(table.slice(0, 0), str(tmp_path / "e.bagz"),
                                         progress=False)
        assert sackli.arrow.read_table(paths[0]).num_rows == 0
        return
    kwargs = {"encoding": "json"} if case == "json" else {"column": "name"}
    paths = sackli.arrow.write_table(table, str(tmp_path / "t.bagz"), progress=False, **kwargs)
    records = sackli.Reader(paths[0]).read()
    with sackli.Writer(tmp_path / "plain.bagz") as writer:
        for record in records:
            writer.write(record)
    assert _frames(paths) == _frames([str(tmp_path / "plain.bagz")])


@pytest.mark.parametrize("flags, literals", [((), "raw"), (("--level", "3"), "huffman")])
def test_cli_convert_chooses_unless_a_level_is_given(tmp_path, flags, literals):
    import pyarrow.parquet as pq

    table = _mixed_table()
    pq.write_table(table, tmp_path / "t.parquet")
    ok("convert", "t.parquet", "t@2.bagz", *flags, cwd=tmp_path)
    paths = [str(tmp_path / f"t-0000{i}-of-00002.bagz") for i in range(2)]
    expected = _write_with(table, str(tmp_path / "expected@2.bagz"), literals)
    assert _frames(paths) == _frames(expected)
    assert_tables_equal(sackli.arrow.read_table(str(tmp_path / "t@2.bagz")),
                        pq.read_table(tmp_path / "t.parquet"))
