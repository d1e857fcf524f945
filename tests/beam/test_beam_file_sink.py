"""`SackliSink` (sackli/beam/_file_sink.py): `fileio.WriteToFiles` with
dynamic destinations writing bags, on the DirectRunner; the files read back
with sackli.Reader and the reference bagz, and match bagz's bytes."""

from __future__ import annotations

import io
import os
import tempfile

import apache_beam as beam
import bagz
import pytest
from apache_beam import coders
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.transforms.display import DisplayData

import sackli
from sackli.beam import SackliSink
from beam_helpers import _quiet_beam, ZSTD_MAGIC, make_pipeline  # loaded through conftest.py


def _elements() -> list[str]:
    """Two destinations: 'even' and 'odd' numbers, as text."""
    return [f"{kind}:{i}" for i in range(60) for kind in ("even" if i % 2 == 0 else "odd",)]


def _write(folder, sink_fn, suffix: str, runner: str = "direct") -> dict[str, list[str]]:
    """Writes _elements() with WriteToFiles to `folder`, one destination per
    parity; the files of each destination."""
    with make_pipeline(runner) as p:
        _ = (p | beam.Create(_elements())
             | fileio.WriteToFiles(
                 path=str(folder),
                 destination=lambda element: element.split(":")[0],
                 sink=sink_fn,
                 file_naming=fileio.destination_prefix_naming(suffix)))
    files: dict[str, list[str]] = {}
    for name in sorted(os.listdir(folder)):
        if name.startswith("."):
            continue  # WriteToFiles's own temporary folder
        files.setdefault(name.split("-")[0], []).append(str(folder / name))
    return files


def _bagz_bytes(tmp_path, records: list[bytes], compression) -> bytes:
    """The bytes bagz writes for `records` (raw or zstd level 3)."""
    path = tmp_path / "reference.bagz"
    options = bagz.Writer.Options(compression=compression)
    with bagz.Writer(str(path), options) as writer:
        for record in records:
            writer.write(record)
    data = path.read_bytes()
    path.unlink()
    return data


@pytest.mark.parametrize("compression_type,suffix", [
    (CompressionTypes.UNCOMPRESSED, ".bag"),
    (CompressionTypes.ZSTD, ".bagz"),
])
@pytest.mark.parametrize("runner", ["direct", "multi_processing"])
def test_two_destinations(tmp_path, compression_type, suffix, runner):
    out = tmp_path / "out"
    files = _write(out, lambda dest: SackliSink(coders.StrUtf8Coder(), compression_type), suffix, runner)
    assert sorted(files) == ["even", "odd"]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    zstd = compression_type == CompressionTypes.ZSTD
    for kind, paths in files.items():
        records = []
        for path in paths:
            assert path.endswith(suffix)
            file_records = sackli.Reader(path).read()  # auto-detects by the suffix
            assert [bytes(r) for r in bagz.Reader(path)] == file_records
            stored = sackli.Reader(path, compression=sackli.CompressionNone()).read()
            assert all(r.startswith(ZSTD_MAGIC) for r in stored) == zstd
            if zstd:  # each frame with its zstd checksum (bagz writes none)
                assert all(r[4] & 0x04 for r in stored if r)
            else:  # byte for byte what bagz writes for the same records
                assert open(path, "rb").read() == _bagz_bytes(scratch, file_records,
                                                              bagz.CompressionNone())
            records += file_records
        assert sorted(records) == sorted(e.encode() for e in _elements() if e.startswith(kind))


def test_bytes_elements_and_options(tmp_path):
    """BytesCoder by default; a zstd level from the options."""
    options = sackli.Writer.Options(compression=sackli.CompressionZstd(level=9))
    with make_pipeline() as p:
        _ = (p | beam.Create([b"a" * 100, b"", b"b" * 50])
             | fileio.WriteToFiles(path=str(tmp_path), sink=lambda _: SackliSink(options=options),
                                   file_naming=fileio.default_file_naming("x", ".bagz")))
    (name,) = [n for n in os.listdir(tmp_path) if not n.startswith(".")]
    assert sorted(sackli.Reader(str(tmp_path / name)).read()) == [b"", b"a" * 100, b"b" * 50]
    assert "zstd level 9" in str(DisplayData.create_from(SackliSink(options=options)).items)


@pytest.mark.parametrize("kwargs,error,message", [
    ({"options": sackli.Writer.Options(limits_placement=sackli.LimitsPlacement.SEPARATE)},
     ValueError, "TAIL"),
    ({"compression_type": CompressionTypes.GZIP}, ValueError, "not supported"),
    ({"compression_type": CompressionTypes.UNCOMPRESSED,
      "options": sackli.Writer.Options(compression=sackli.CompressionZstd())}, ValueError, "contradicts"),
    ({"coder": bytes}, TypeError, "Coder"),
    ({"options": sackli.Reader.Options()}, TypeError, "Writer.Options"),
])
def test_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        SackliSink(**kwargs)


def test_auto_stores_raw_records(tmp_path):
    """The sink never learns its file's name: AUTO means raw records."""
    out = tmp_path / "out"
    files = _write(out, lambda dest: SackliSink(coders.StrUtf8Coder()), ".bag")
    for paths in files.values():
        for path in paths:
            stored = sackli.Reader(path, compression=sackli.CompressionNone()).read()
            assert stored and not any(r.startswith(ZSTD_MAGIC) for r in stored)


def test_non_bytes_with_bytes_coder(tmp_path):
    with pytest.raises(Exception, match="SackliSink with BytesCoder writes bytes, not str"):
        with make_pipeline() as p:
            _ = (p | beam.Create(["text"])
                 | fileio.WriteToFiles(path=str(tmp_path), sink=lambda _: SackliSink()))


class _WatchedStream(io.BytesIO):
    """The stream WriteToFiles would hand the sink: records how many bytes
    it held when it was first flushed."""

    flushed_at: int | None = None

    def flush(self) -> None:
        if self.flushed_at is None:
            self.flushed_at = len(self.getvalue())
        super().flush()


@pytest.mark.parametrize("zstd", [False, True])
def test_records_stream_into_the_file_as_they_are_written(tmp_path, monkeypatch, zstd):
    """The bag is not spooled locally: its records are in the stream before
    flush, the local temporary folder holds only limits, and the stream ends
    up byte for byte what sackli.Writer writes to a file."""
    spools = []
    real_mkdtemp = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda *a, **k: spools.append(real_mkdtemp(*a, **k)) or spools[-1])
    records = [os.urandom(700) + bytes(300) for _ in range(6000)]  # ~6 MB, half compressible
    stream = _WatchedStream()
    sink = SackliSink(compression_type=CompressionTypes.ZSTD if zstd else CompressionTypes.UNCOMPRESSED)
    sink.open(stream)
    for record in records:
        sink.write(record)
    # Every record handed to the engine and written out, as the writer does
    # along the way for a longer file: all of it is in the stream already.
    sink._shard._gathered.flush()
    sink._shard._writer.flush()
    before_flush = len(stream.getvalue())
    assert spools, "the writer keeps its limits in a temporary folder"
    local_bytes = sum(os.path.getsize(os.path.join(d, f)) for d in spools for f in os.listdir(d))
    sink.flush()
    assert not any(os.path.exists(d) for d in spools), "the temporary folder is removed"
    data = stream.getvalue()
    assert before_flush == len(data) - 8 * len(records), (before_flush, len(data))  # all but the limits
    assert local_bytes <= 8 * len(records)
    # The same bytes as sackli.Writer writes to a local file (bagz's own
    # bytes may differ: its zstd release can frame random data differently),
    # and bagz reads the records back.
    local = tmp_path / "local.bag"
    with sackli.Writer(str(local), compression=sackli.CompressionZstd() if zstd else sackli.CompressionNone()) as writer:
        writer.write_many(records)
    assert data == local.read_bytes()
    local.write_bytes(data)
    assert [bytes(r) for r in bagz.Reader(str(local), bagz.Reader.Options(
        compression=bagz.CompressionZstd() if zstd else bagz.CompressionNone()))] == records
    with pytest.raises(ValueError, match="after flush"):
        sink.write(b"late")
