"""sackli._shard_set: the one shard-set writer behind sackli.ShardedWriter
(and sackli.arrow.write_table) and `sackli convert`.

The decision on `name@N.ext` with an unknown record count: the records go
to a hidden spool and are split evenly at close, exactly as when the count
is given; checked through the library and through the CLI."""

from __future__ import annotations

import contextlib
import io
import pathlib

import pytest

import sackli
from sackli import _shard_set, cli
from sackli._shard_spec import split_shard_entry
from sackli.cli import _endpoints

RECORDS = [b"r%03d" % i * (1 + i % 3) for i in range(23)]


def visible(folder: pathlib.Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def hidden(folder: pathlib.Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def run_cli(*argv: str) -> int:
    with contextlib.redirect_stdout(io.StringIO()):
        return cli.main(list(argv))


@pytest.mark.parametrize("total, shards, expected", [
    (10, 4, [3, 3, 2, 2]), (2, 3, [1, 1, 0]), (0, 2, [0, 0]), (9, 3, [3, 3, 3])])
def test_even_split(total, shards, expected):
    assert _shard_set.even_split(total, shards) == expected


def test_library_unknown_count_splits_like_a_known_count(tmp_path):
    for folder, count in (("streamed", None), ("counted", len(RECORDS))):
        (tmp_path / folder).mkdir()
        with sackli.ShardedWriter(tmp_path / folder / "s@4.bag", num_records=count) as writer:
            writer.write_many(RECORDS)
    for name in visible(tmp_path / "counted"):
        assert (tmp_path / "streamed" / name).read_bytes() == (tmp_path / "counted" / name).read_bytes()
    assert sackli.Reader(tmp_path / "streamed" / "s@4.bag").shard_sizes == [6, 6, 6, 5]
    assert hidden(tmp_path / "streamed") == []  # the spool is gone


def test_cli_unknown_count_reads_the_source_once_and_splits_evenly(tmp_path, monkeypatch):
    # Text: JSON Lines sources get a look at their first values first
    # (sackli/cli/_json_records.py). Readers get the file as a stream
    # whose bytes the progress bar counts; its name is the path.
    source = tmp_path / "in.txt"
    source.write_text("".join(r.decode() + "\n" for r in RECORDS))
    opened = []
    read = _endpoints._FILE_READERS[_endpoints.TEXT]
    monkeypatch.setitem(_endpoints._FILE_READERS, _endpoints.TEXT,
                        lambda stream: opened.append(stream.name) or read(stream))
    assert run_cli("convert", str(source), str(tmp_path / "out@4.bag")) == 0
    assert opened == [str(source)]  # one pass: no counting pass first
    reader = sackli.Reader(tmp_path / "out@4.bag")
    assert reader.shard_sizes == [6, 6, 6, 5]
    assert reader.read() == RECORDS
    with sackli.ShardedWriter(tmp_path / "lib@4.bag") as writer:
        writer.write_many(RECORDS)
    assert sackli.Reader(tmp_path / "lib@4.bag").shard_sizes == reader.shard_sizes
    assert hidden(tmp_path) == []


def test_cli_text_shards_by_size_share_the_plan(tmp_path):
    source = tmp_path / "in.bag"
    with sackli.Writer(source) as writer:
        writer.write_many([b"x" * 99] * 30)
    # 99 bytes + newline per record: 10 records fit in 1000 bytes.
    assert run_cli("convert", str(source), str(tmp_path / "t@*.txt"), "--max-shard-bytes", "1000") == 0
    names = [n for n in visible(tmp_path) if n.startswith("t-")]
    assert names == [f"t-{i:05d}-of-00003.txt" for i in range(3)]
    assert all((tmp_path / n).stat().st_size == 1000 for n in names)


def test_cli_failure_while_spooling_leaves_nothing(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text('"a"\n"b"\nnot json\n')
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert run_cli("convert", str(source), str(tmp_path / "out@2.bagz")) == 1
    assert "line 3" in err.getvalue()
    assert visible(tmp_path) == ["in.jsonl"]
    assert hidden(tmp_path) == []


class _ListShard:
    """A shard file that keeps its records in memory (a pluggable factory)."""

    published: dict[str, list[bytes]] = {}

    def __init__(self, name: str) -> None:
        self.name, self.records, self.finished = name, [], False

    @property
    def records_written(self) -> int:
        return len(self.records)

    def stored_bytes(self) -> int:
        return sum(map(len, self.records)) + 2 * len(self.records)

    def write_many(self, records) -> None:
        self.records += [bytes(record) for record in records]

    def write_packed(self, data, offsets) -> None:
        data = bytes(data)
        self.records += [data[offsets[k]:offsets[k + 1]] for k in range(len(offsets) - 1)]

    def finish(self) -> None:
        self.finished = True

    def publish(self, target: str) -> list[str]:
        assert self.finished
        _ListShard.published[target] = self.records
        return []

    def targets(self, target: str) -> list[str]:
        return []

    def discard(self) -> None:
        self.records = []


@pytest.mark.parametrize("spec, kwargs, sizes", [
    ("m@3.x", {"num_records": 7}, [3, 2, 2]),
    ("m@3.x", {}, [3, 2, 2]),
    ("m@*.x", {"max_shard_bytes": 12}, [4, 3]),  # 1 payload + 2 overhead bytes each
])
def test_any_shard_file_factory(tmp_path, spec, kwargs, sizes):
    _ListShard.published = {}
    target = str(tmp_path / spec)
    shards = _shard_set.ShardSetWriter(target, split_shard_entry(target), _ListShard,
                                       record_overhead=2, **kwargs)
    shards.write_many([b"%d" % i for i in range(7)])
    paths = shards.close()
    assert [len(_ListShard.published[p]) for p in paths] == sizes
    assert [r for p in paths for r in _ListShard.published[p]] == [b"%d" % i for i in range(7)]
