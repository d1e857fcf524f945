"""Streaming (unbounded, windowed) writes of `WriteToSackli`
(sackli/beam/_sink.py, _shard_names.py, _stream_windows.py), run as real
streaming pipelines on the DirectRunner with a `TestStream`: every window
lands in its own shard set, named with the window, and nothing is lost."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing import test_stream
from apache_beam.transforms import trigger, window
from apache_beam.typehints.row_type import RowTypeConstraint

import sackli
from sackli.beam import WriteToSackli
from beam_helpers import _quiet_beam, listing  # loaded through conftest.py

# Three 10-second windows of 5 records each; the window starting at
# second 10 * w holds b"w<w>:<i>".
WINDOWS = 3
PER_WINDOW = 5


def _stream() -> test_stream.TestStream:
    stream = test_stream.TestStream()
    for w in range(WINDOWS):
        stream = stream.add_elements([
            window.TimestampedValue(b"w%d:%d" % (w, i), 10 * w + i) for i in range(PER_WINDOW)
        ]).advance_watermark_to(10 * (w + 1))
    return stream.advance_watermark_to_infinity()


def _window_records(w: int) -> list[bytes]:
    return [b"w%d:%d" % (w, i) for i in range(PER_WINDOW)]


def _label(w: int) -> str:
    """The name part of the window [10w, 10w + 10) seconds after the epoch."""
    return f"1970-01-01T00-00-{10 * w:02d}_1970-01-01T00-00-{10 * w + 10:02d}"


def _run_streaming(build) -> None:
    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    with beam.Pipeline(options=options) as p:
        build(p | _stream())


class TestWindowedWrites:
    @pytest.mark.parametrize("ext", [".bag", ".bagz"])
    def test_every_window_lands_in_its_own_shard(self, tmp_path, ext):
        """15 records in three windows, written to `out@1.ext`: three files,
        one per window, each with exactly its window's records (main wrote
        one file with 5 of the 15)."""
        _run_streaming(lambda records: records
                       | beam.WindowInto(window.FixedWindows(10))
                       | WriteToSackli(str(tmp_path / f"out@1{ext}")))
        names = [f"out-{_label(w)}-00000-of-00001{ext}" for w in range(WINDOWS)]
        assert listing(tmp_path) == names
        for w in range(WINDOWS):
            # Each window's set reads back as a shard set of its own.
            spec = str(tmp_path / f"out-{_label(w)}@1{ext}")
            assert sorted(sackli.Reader(spec).read()) == _window_records(w)

    def test_shards_per_window(self, tmp_path):
        """`@2`: two shards per window (one padded empty if need be),
        SEPARATE limits beside each; all 15 records once."""
        options = sackli.Writer.Options(limits_placement=sackli.LimitsPlacement.SEPARATE)
        _run_streaming(lambda records: records
                       | beam.WindowInto(window.FixedWindows(10))
                       | WriteToSackli(str(tmp_path / "out@2.bagz"), options=options))
        read = sackli.Reader.Options(limits_placement=sackli.LimitsPlacement.SEPARATE)
        data = [n for n in listing(tmp_path) if not n.startswith("limits.")]
        assert data == [f"out-{_label(w)}-{s:05d}-of-00002.bagz"
                        for w in range(WINDOWS) for s in range(2)]
        assert sorted(n for n in listing(tmp_path) if n.startswith("limits.")) == [
            "limits." + n for n in data]
        for w in range(WINDOWS):
            spec = str(tmp_path / f"out-{_label(w)}@2.bagz")
            assert sorted(sackli.Reader(spec, read).read()) == _window_records(w)

    def test_triggering_frequency_windows_a_global_stream(self, tmp_path):
        """A globally windowed stream needs triggering_frequency, which
        cuts it into fixed windows of that many seconds, as WriteToText's
        does; 20 seconds here: records of seconds 0-19, then 20-24."""
        _run_streaming(lambda records: records
                       | WriteToSackli(str(tmp_path / "out@*.bag"), triggering_frequency=20))
        labels = ["1970-01-01T00-00-00_1970-01-01T00-00-20", "1970-01-01T00-00-20_1970-01-01T00-00-40"]
        assert listing(tmp_path) == [f"out-{label}-00000-of-00001.bag" for label in labels]
        first = sackli.Reader(str(tmp_path / f"out-{labels[0]}@*.bag")).read()
        second = sackli.Reader(str(tmp_path / f"out-{labels[1]}@*.bag")).read()
        assert sorted(first) == _window_records(0) + _window_records(1)
        assert sorted(second) == _window_records(2)

    def test_own_template_with_the_window(self, tmp_path):
        _run_streaming(lambda records: records
                       | beam.WindowInto(window.FixedWindows(10))
                       | WriteToSackli(str(tmp_path / "out@1.bag"), shard_name_template="_W_SS"))
        assert listing(tmp_path) == [f"out_{_label(w)}_00.bag" for w in range(WINDOWS)]

    def test_batch_names_unchanged(self, tmp_path):
        """A bounded pipeline keeps `-SSSSS-of-NNNNN` names, windows or not."""
        with beam.Pipeline() as p:
            _ = (p | beam.Create([window.TimestampedValue(b"r%d" % i, i) for i in range(30)])
                 | beam.WindowInto(window.FixedWindows(10))
                 | WriteToSackli(str(tmp_path / "out@2.bag")))
        assert listing(tmp_path) == ["out-00000-of-00002.bag", "out-00001-of-00002.bag"]
        assert sorted(sackli.Reader(str(tmp_path / "out@2.bag")).read()) == sorted(
            b"r%d" % i for i in range(30))


class TestStreamingRefusals:
    @pytest.mark.parametrize("kwargs,message", [
        ({"shard_name_template": "-SSSSS-of-NNNNN"}, "window"),
    ])
    def test_template_without_window(self, tmp_path, kwargs, message):
        with pytest.raises(ValueError, match=message):
            _run_streaming(lambda records: records
                           | beam.WindowInto(window.FixedWindows(10))
                           | WriteToSackli(str(tmp_path / "out@1.bag"), **kwargs))

    def test_shard_capacity(self, tmp_path):
        with pytest.raises(ValueError, match="bounded input only"):
            _run_streaming(lambda records: records
                           | beam.WindowInto(window.FixedWindows(10))
                           | WriteToSackli(str(tmp_path / "out@*.bag"), max_records_per_shard=2))

    def test_unsharded(self, tmp_path):
        with pytest.raises(ValueError, match="unsharded"):
            _run_streaming(lambda records: records
                           | beam.WindowInto(window.FixedWindows(10))
                           | WriteToSackli(str(tmp_path / "out.bag@0")))

    @pytest.mark.parametrize("windowing", [
        {"trigger": trigger.AfterWatermark(early=trigger.AfterCount(2)),
         "accumulation_mode": trigger.AccumulationMode.DISCARDING},
        {"allowed_lateness": 60},
    ], ids=["early_firings", "allowed_lateness"])
    def test_windows_that_fire_twice(self, tmp_path, windowing):
        """A second pane of a window would replace the first one's files."""
        with pytest.raises(ValueError, match="more than once"):
            _run_streaming(lambda records: records
                           | beam.WindowInto(window.FixedWindows(10), **windowing)
                           | WriteToSackli(str(tmp_path / "out@1.bag")))


class TestWindowedRows:
    def test_each_window_gets_its_schema_file(self, tmp_path):
        """A schema'd stream: every window's set has Arrow rows and its own
        schema file, so each reads back as a table."""
        import sackli.arrow

        def rows(records):
            return (records
                    | beam.Map(lambda r: beam.Row(key=r.decode(), size=len(r)))
                    .with_output_types(RowTypeConstraint.from_fields(
                        [("key", str), ("size", int)]))
                    | beam.WindowInto(window.FixedWindows(10))
                    | WriteToSackli(str(tmp_path / "rows@1.bagz")))

        _run_streaming(rows)
        for w in range(WINDOWS):
            spec = str(tmp_path / f"rows-{_label(w)}@1.bagz")
            table = sackli.arrow.read_table(spec, decode="arrow")
            assert sorted(table.column("key").to_pylist()) == [
                r.decode() for r in _window_records(w)]
