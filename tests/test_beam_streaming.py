"""Streaming (unbounded, windowed) writes of `WriteToSackli`
(sackli/beam/_sink.py, _shard_names.py, _stream_windows.py, _stream_write.py),
run as real streaming pipelines on the DirectRunner with a `TestStream`:
every window, and every pane of a window that fires more than once, lands in
its own shard set, named with the window (and pane), and nothing is lost or
replaced."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing import test_stream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import trigger, window
from apache_beam.typehints.row_type import RowTypeConstraint

import sackli
from sackli.beam import WriteToSackli
from beam_helpers import READ_SEPARATE, WRITE_SEPARATE, _quiet_beam, listing
from remote_helpers import BUCKET, servers  # noqa: F401 (fixture)  # loaded through conftest.py

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


def _run_streaming(build, stream=None, flags=()) -> None:
    options = PipelineOptions(list(flags))
    options.view_as(StandardOptions).streaming = True
    with beam.Pipeline(options=options) as p:
        build(p | (stream or _stream()))


# One window, [0, 10), fired four times by AfterWatermark(early=AfterCount(2),
# late=AfterCount(1)) with a minute of allowed lateness: early after e0, e1;
# early after e2, e3; on time (e4 came alone) at the watermark; late for the
# element of second 3 that arrives after it.
EARLY_LATE = {
    "trigger": trigger.AfterWatermark(early=trigger.AfterCount(2), late=trigger.AfterCount(1)),
    "allowed_lateness": 60,
    "accumulation_mode": trigger.AccumulationMode.DISCARDING,
}
ON_TIME = [b"e0", b"e1", b"e2", b"e3", b"e4"]
LATE = b"late"


def _early_and_late_stream() -> test_stream.TestStream:
    stream = test_stream.TestStream()
    for batch in ([0, 1], [2, 3], [4]):
        stream = stream.add_elements([window.TimestampedValue(ON_TIME[i], i) for i in batch])
    return (stream.advance_watermark_to(10)
            .add_elements([window.TimestampedValue(LATE, 3)])
            .advance_watermark_to(20)
            .advance_watermark_to_infinity())


# What each pane of that window holds, by accumulation mode.
PANES = {
    trigger.AccumulationMode.ACCUMULATING: [
        ON_TIME[:2], ON_TIME[:4], ON_TIME, ON_TIME + [LATE]],
    trigger.AccumulationMode.DISCARDING: [ON_TIME[0:2], ON_TIME[2:4], ON_TIME[4:], [LATE]],
}
MODES = pytest.mark.parametrize("mode", list(PANES), ids=["ACCUMULATING", "DISCARDING"])


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

    @pytest.mark.parametrize("template,name", [
        ("_W_SS", "out_{label}_00.bag"),
        ("-W-P-S", "out-{label}-0-0.bag"),  # windows that fire once: `P` is pane 0
    ])
    def test_own_template_with_the_window(self, tmp_path, template, name):
        _run_streaming(lambda records: records
                       | beam.WindowInto(window.FixedWindows(10))
                       | WriteToSackli(str(tmp_path / "out@1.bag"), shard_name_template=template))
        assert listing(tmp_path) == [name.format(label=_label(w)) for w in range(WINDOWS)]

    def test_batch_names_unchanged(self, tmp_path):
        """A bounded pipeline keeps `-SSSSS-of-NNNNN` names, windows or not."""
        with beam.Pipeline() as p:
            _ = (p | beam.Create([window.TimestampedValue(b"r%d" % i, i) for i in range(30)])
                 | beam.WindowInto(window.FixedWindows(10))
                 | WriteToSackli(str(tmp_path / "out@2.bag")))
        assert listing(tmp_path) == ["out-00000-of-00002.bag", "out-00001-of-00002.bag"]
        assert sorted(sackli.Reader(str(tmp_path / "out@2.bag")).read()) == sorted(
            b"r%d" % i for i in range(30))


    def test_pane_letter_in_a_batch(self, tmp_path):
        """A bounded write is one pane: `P` is 0 (on main, a literal P);
        a second write replaces the first's set (any shard count)."""
        for shards in (3, 2):
            with beam.Pipeline() as p:
                _ = (p | beam.Create([b"r%d" % i for i in range(10)])
                     | WriteToSackli(str(tmp_path / f"out@{shards}.bag"),
                                     shard_name_template="-PP-SSSSS-of-NNNNN"))
        assert listing(tmp_path) == ["out-00-00000-of-00002.bag", "out-00-00001-of-00002.bag"]
        assert sorted(sackli.Reader(str(tmp_path / "out-00@2.bag")).read()) == sorted(
            b"r%d" % i for i in range(10))


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

    def test_own_template_without_the_pane(self, tmp_path):
        """Windows that fire more than once need `P` in a template of the
        caller's: every pane would write the same names."""
        with pytest.raises(ValueError, match="pane"):
            _run_streaming(lambda records: records
                           | beam.WindowInto(window.FixedWindows(10), **EARLY_LATE)
                           | WriteToSackli(str(tmp_path / "out@1.bag"),
                                           shard_name_template="-W-SSSSS-of-NNNNN"),
                           _early_and_late_stream())

    def test_global_window_without_triggering_frequency(self, tmp_path):
        """Its one window never closes: nothing would ever be written."""
        with pytest.raises(ValueError, match="triggering_frequency"):
            _run_streaming(lambda records: records | WriteToSackli(str(tmp_path / "out@1.bag")))


def _pane_name(pane: int, shard: int = 0, shards: int = 1, ext: str = ".bag") -> str:
    return f"out-{_label(0)}-pane-{pane}-{shard:05d}-of-{shards:05d}{ext}"


class TestPanes:
    """Windows that fire more than once (early firings, late firings,
    allowed lateness), refused on main: one shard set per pane."""

    @MODES
    def test_every_pane_lands_in_its_own_set(self, tmp_path, mode):
        """Two early panes, the on-time pane and a late pane of one window:
        four files, none replaced, each reading back as exactly its pane's
        records (for ACCUMULATING, all records so far)."""
        _run_streaming(lambda records: records
                       | beam.WindowInto(window.FixedWindows(10),
                                         **dict(EARLY_LATE, accumulation_mode=mode))
                       | WriteToSackli(str(tmp_path / "out@1.bagz")),
                       _early_and_late_stream())
        assert listing(tmp_path) == [_pane_name(p, ext=".bagz") for p in range(4)]
        for pane, records in enumerate(PANES[mode]):
            spec = str(tmp_path / f"out-{_label(0)}-pane-{pane}@1.bagz")
            assert sorted(sackli.Reader(spec).read()) == sorted(records), pane

    def test_output_names_every_pane(self, tmp_path):
        """The transform's output: each pane's final names."""
        def names(records):
            written = (records
                       | beam.WindowInto(window.FixedWindows(10), **EARLY_LATE)
                       | WriteToSackli(str(tmp_path / "out@1.bag"))
                       | beam.Map(lambda path: path.rsplit("/", 1)[-1]))
            assert_that(written, equal_to([_pane_name(p) for p in range(4)]))

        _run_streaming(names, _early_and_late_stream())

    def test_allowed_lateness_with_the_default_trigger(self, tmp_path):
        """The default trigger fires again for data behind the watermark
        while the window is within its allowed lateness: a late pane of its
        own (DISCARDING: only the late record)."""
        _run_streaming(lambda records: records
                       | beam.WindowInto(window.FixedWindows(10), allowed_lateness=60)
                       | WriteToSackli(str(tmp_path / "out@1.bag")),
                       _early_and_late_stream())
        assert listing(tmp_path) == [_pane_name(0), _pane_name(1)]
        assert sorted(sackli.Reader(str(tmp_path / _pane_name(0))).read()) == ON_TIME
        assert sackli.Reader(str(tmp_path / _pane_name(1))).read() == [LATE]

    def test_shards_per_pane(self, tmp_path):
        """`@3`: every pane is a complete set of three shards (empty ones
        padded), SEPARATE limits beside each; each set reads back as its
        pane's records, once each."""
        mode = trigger.AccumulationMode.ACCUMULATING
        _run_streaming(lambda records: records
                       | beam.WindowInto(window.FixedWindows(10),
                                         **dict(EARLY_LATE, accumulation_mode=mode))
                       | WriteToSackli(str(tmp_path / "out@3.bag"), options=WRITE_SEPARATE),
                       _early_and_late_stream())
        data = [_pane_name(p, s, 3) for p in range(4) for s in range(3)]
        assert listing(tmp_path) == sorted(data + ["limits." + n for n in data])
        for pane, records in enumerate(PANES[mode]):
            spec = str(tmp_path / f"out-{_label(0)}-pane-{pane}@3.bag")
            assert sorted(sackli.Reader(spec, READ_SEPARATE).read()) == sorted(records)
            sizes = [len(sackli.Reader(str(tmp_path / _pane_name(pane, s, 3)), READ_SEPARATE))
                     for s in range(3)]
            assert max(sizes) - min(sizes) <= 1, sizes  # records dealt in turn

    def test_pane_letter_in_own_template(self, tmp_path):
        """`P` is the pane's index, zero-padded to the run's length."""
        _run_streaming(lambda records: records
                       | beam.WindowInto(window.FixedWindows(10), **EARLY_LATE)
                       | WriteToSackli(str(tmp_path / "out@1.bag"), shard_name_template="_W_PP_S"),
                       _early_and_late_stream())
        assert listing(tmp_path) == [f"out_{_label(0)}_{p:02d}_0.bag" for p in range(4)]

    def test_empty_pane(self, tmp_path):
        """DISCARDING: the on-time pane after early panes took everything
        is empty: an empty set, or nothing with skip_if_empty."""
        for skip in (False, True):
            stream = (test_stream.TestStream()
                      .add_elements([window.TimestampedValue(b"a", 1),
                                     window.TimestampedValue(b"b", 2)])
                      .advance_watermark_to_infinity())
            folder = tmp_path / str(skip)
            folder.mkdir()
            _run_streaming(lambda records: records
                           | beam.WindowInto(window.FixedWindows(10), **EARLY_LATE)
                           | WriteToSackli(str(folder / "out@1.bag"), skip_if_empty=skip), stream)
            assert listing(folder) == [_pane_name(0)] + ([] if skip else [_pane_name(1)])
            assert sorted(sackli.Reader(str(folder / _pane_name(0))).read()) == [b"a", b"b"]
            if not skip:
                assert sackli.Reader(str(folder / _pane_name(1))).read() == []


class TestPanesOnS3:
    def test_every_pane_lands_in_its_own_set(self, servers):
        """Against moto's S3 server through Beam's S3 file system: each
        pane's two shards are renamed into place, no temporary key is left,
        and each set reads back (through sackli's own S3 client) as its
        pane's records."""
        mode = trigger.AccumulationMode.ACCUMULATING
        flags = [f"--s3_endpoint_url={servers.moto.url}", "--s3_access_key_id=testing",
                 "--s3_secret_access_key=testing", "--s3_region_name=us-east-1"]
        _run_streaming(lambda records: records
                       | beam.WindowInto(window.FixedWindows(10),
                                         **dict(EARLY_LATE, accumulation_mode=mode))
                       | WriteToSackli(f"s3://{BUCKET}/beam-panes/out@2.bagz"),
                       _early_and_late_stream(), flags)
        keys = sorted(servers.raw["s3"].objects(BUCKET, "beam-panes/"))
        assert keys == [f"beam-panes/{_pane_name(p, s, 2, '.bagz')}"
                        for p in range(4) for s in range(2)]
        for pane, records in enumerate(PANES[mode]):
            spec = f"s3://{BUCKET}/beam-panes/out-{_label(0)}-pane-{pane}@2.bagz"
            assert sorted(sackli.Reader(spec).read()) == sorted(records)


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

    def test_each_pane_gets_its_schema_file(self, tmp_path):
        """Panes of a schema'd stream: every pane's set has its own schema
        file and reads back as a table of that pane's rows."""
        import sackli.arrow

        mode = trigger.AccumulationMode.ACCUMULATING

        def rows(records):
            return (records
                    | beam.Map(lambda r: beam.Row(key=r.decode()))
                    .with_output_types(RowTypeConstraint.from_fields([("key", str)]))
                    | beam.WindowInto(window.FixedWindows(10),
                                      **dict(EARLY_LATE, accumulation_mode=mode))
                    | WriteToSackli(str(tmp_path / "rows@1.bagz")))

        _run_streaming(rows, _early_and_late_stream())
        for pane, records in enumerate(PANES[mode]):
            spec = str(tmp_path / f"rows-{_label(0)}-pane-{pane}@1.bagz")
            table = sackli.arrow.read_table(spec, decode="arrow")
            assert sorted(table.column("key").to_pylist()) == sorted(r.decode() for r in records)
