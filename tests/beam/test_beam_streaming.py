"""Streaming (unbounded, windowed) writes of `WriteToSackli`
(sackli/beam/_sink.py, _shard_names.py, _stream_windows.py, _stream_write.py),
run as real streaming pipelines on the DirectRunner with a `TestStream`:
every window, and every pane of a window that fires more than once, lands in
its own shard set, named with the window (and pane), and nothing is lost or
replaced."""

from __future__ import annotations

import collections

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing import test_stream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import trigger, window
from apache_beam.typehints.row_type import RowTypeConstraint

import sackli
from apache_beam import coders
from apache_beam.utils import windowed_value
from sackli.beam import WriteToSackli
from sackli.beam._sink import BagSink
from sackli.beam._pane_sets import METRICS_NAMESPACE, ShardPart, finalize_pane
from sackli.beam._stream_write import _WriteShardFiring
from sackli.beam._write_path import for_unbounded_input, parse_write_path
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
        a second write replaces the first's set (another count: with
        overwrite=True)."""
        for shards in (3, 2):
            with beam.Pipeline() as p:
                _ = (p | beam.Create([b"r%d" % i for i in range(10)])
                     | WriteToSackli(str(tmp_path / f"out@{shards}.bag"),
                                     shard_name_template="-PP-SSSSS-of-NNNNN",
                                     overwrite=shards == 2))
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


def _pane_count(folder) -> int:
    """How many panes of window 0 `folder` has sets of."""
    return len({name.split("-pane-")[1].split("-")[0] for name in listing(folder)
                if "-pane-" in name})


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
        padded), SEPARATE limits beside each; ACCUMULATING, each set holds
        the previous one's records and the last holds all, once each.
        Which panes there are depends on where records were dealt: each
        shard key fires on its own (AfterCount(2) counts a shard's
        records), so the panes are not the window's four of `PANES`."""
        mode = trigger.AccumulationMode.ACCUMULATING
        _run_streaming(lambda records: records
                       | beam.WindowInto(window.FixedWindows(10),
                                         **dict(EARLY_LATE, accumulation_mode=mode))
                       | WriteToSackli(str(tmp_path / "out@3.bag"), options=WRITE_SEPARATE),
                       _early_and_late_stream())
        panes = _pane_count(tmp_path)
        data = [_pane_name(p, s, 3) for p in range(panes) for s in range(3)]
        assert listing(tmp_path) == sorted(data + ["limits." + n for n in data])
        sets = [sorted(sackli.Reader(str(tmp_path / f"out-{_label(0)}-pane-{pane}@3.bag"),
                                     READ_SEPARATE).read()) for pane in range(panes)]
        for earlier, later in zip(sets, sets[1:]):
            assert set(earlier) <= set(later), (earlier, later)
        assert sets[-1] == sorted(ON_TIME + [LATE])

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


# Ten records per shard of `@3` in each window, in one bundle per window.
PER_SHARD = 10


def _busy_stream() -> test_stream.TestStream:
    stream = test_stream.TestStream()
    for w in range(WINDOWS):
        stream = stream.add_elements([
            window.TimestampedValue(b"w%d:%02d" % (w, i), 10 * w + i % 10)
            for i in range(3 * PER_SHARD)
        ]).advance_watermark_to(10 * (w + 1))
    return stream.advance_watermark_to_infinity()


class TestShardsInParallel:
    """A pane's shards are written by one key each (main: all of a pane's
    shards by one key, so by one worker)."""

    def test_a_pane_of_n_shards_is_written_by_n_keys(self, tmp_path, monkeypatch):
        """`@3`, three windows firing once: each pane's three shards are
        three groups of the shard-writing step (one per shard key, seen by
        a spy on it: the DirectRunner's streaming metrics keep only a
        bundle's), names as on main, each shard a third of its window's
        records (dealt in turn), every record once."""
        written = []
        write = _WriteShardFiring.process

        def spy(self, keyed_records, pane=beam.DoFn.PaneInfoParam):
            parts = list(write(self, keyed_records, pane))
            written.extend(parts)
            return parts

        monkeypatch.setattr(_WriteShardFiring, "process", spy)
        _run_streaming(lambda records: records
                       | beam.WindowInto(window.FixedWindows(10))
                       | WriteToSackli(str(tmp_path / "out@3.bag")), _busy_stream())
        assert sorted((part.shard, part.records) for part in written) == [
            (shard, PER_SHARD) for shard in range(3) for _ in range(WINDOWS)]
        assert listing(tmp_path) == [f"out-{_label(w)}-{s:05d}-of-00003.bag"
                                     for w in range(WINDOWS) for s in range(3)]
        for w in range(WINDOWS):
            sizes = [len(sackli.Reader(str(tmp_path / f"out-{_label(w)}-{s:05d}-of-00003.bag")))
                     for s in range(3)]
            assert sizes == [PER_SHARD] * 3
            spec = str(tmp_path / f"out-{_label(w)}@3.bag")
            assert sorted(sackli.Reader(spec).read()) == [
                b"w%d:%02d" % (w, i) for i in range(3 * PER_SHARD)]

    def test_discarding_panes_hold_every_record_once(self, tmp_path):
        """`@3`, DISCARDING early and late firings: whatever panes the
        shard keys' firings make, each is a complete set of three, named as
        on main, and together they hold every record exactly once."""
        _run_streaming(lambda records: records
                       | beam.WindowInto(window.FixedWindows(10), **EARLY_LATE)
                       | WriteToSackli(str(tmp_path / "out@3.bag")),
                       _early_and_late_stream())
        panes = _pane_count(tmp_path)
        assert listing(tmp_path) == [_pane_name(p, s, 3) for p in range(panes) for s in range(3)]
        written = [record for pane in range(panes) for record in
                   sackli.Reader(str(tmp_path / f"out-{_label(0)}-pane-{pane}@3.bag")).read()]
        assert sorted(written) == sorted(ON_TIME + [LATE])


    SESSION_TIMES = [0, 1, 2, 3, 20, 21]

    def _session_stream(self) -> test_stream.TestStream:
        return (test_stream.TestStream()
                .add_elements([window.TimestampedValue(b"s%02d" % t, t)
                               for t in self.SESSION_TIMES])
                .advance_watermark_to_infinity())

    def test_sessions_are_the_windows_sessions(self, tmp_path):
        """Sessions (gap 5 s), `@2`: each shard key's records form sessions
        of their own (shard 0's of seconds 0 and 2 are [0, 7)), merged by
        the gathering into the window's: [0, 8) and [20, 26), as on main."""
        _run_streaming(lambda records: records
                       | beam.WindowInto(window.Sessions(5))
                       | WriteToSackli(str(tmp_path / "out@2.bag")), self._session_stream())
        labels = ["1970-01-01T00-00-00_1970-01-01T00-00-08",
                  "1970-01-01T00-00-20_1970-01-01T00-00-26"]
        assert listing(tmp_path) == [f"out-{label}-{s:05d}-of-00002.bag"
                                     for label in labels for s in range(2)]
        assert sorted(sackli.Reader(str(tmp_path / f"out-{labels[0]}@2.bag")).read()) == [
            b"s00", b"s01", b"s02", b"s03"]
        assert sorted(sackli.Reader(str(tmp_path / f"out-{labels[1]}@2.bag")).read()) == [
            b"s20", b"s21"]

    def test_sessions_that_fire_early(self, tmp_path):
        """DISCARDING early firings of sessions: every record in exactly
        one file; ACCUMULATING ones (written whole, under one key per
        window): the newest pane of each session holds all its records."""
        early = trigger.AfterWatermark(early=trigger.AfterCount(1))
        _run_streaming(lambda records: records
                       | beam.WindowInto(window.Sessions(5), trigger=early,
                                         accumulation_mode=trigger.AccumulationMode.DISCARDING)
                       | WriteToSackli(str(tmp_path / "out@2.bag")), self._session_stream())
        written = [r for name in listing(tmp_path)
                   for r in sackli.Reader(str(tmp_path / name)).read()]
        assert sorted(written) == [b"s%02d" % t for t in self.SESSION_TIMES]
        accumulating = trigger.AccumulationMode.ACCUMULATING
        (tmp_path / "acc").mkdir()
        _run_streaming(lambda records: records
                       | beam.WindowInto(window.Sessions(5), trigger=early,
                                         accumulation_mode=accumulating)
                       | WriteToSackli(str(tmp_path / "acc" / "out@2.bag")), self._session_stream())
        names = listing(tmp_path / "acc")
        for label, records in (("1970-01-01T00-00-00_1970-01-01T00-00-08", [0, 1, 2, 3]),
                               ("1970-01-01T00-00-20_1970-01-01T00-00-26", [20, 21])):
            panes = [int(n[len(f"out-{label}-pane-"):].split("-")[0])
                     for n in names if n.startswith(f"out-{label}-pane-")]
            assert panes, names
            newest = sackli.Reader(str(tmp_path / "acc" / f"out-{label}-pane-{max(panes)}@2.bag"))
            assert sorted(newest.read()) == [b"s%02d" % t for t in records]


def _part(sink, shard: int, firing: int, records: list[bytes]) -> ShardPart:
    """What the shard-writing step makes of one firing of shard key `shard`."""
    pane = windowed_value.PaneInfo(firing == 0, False, windowed_value.PaneInfoTiming.EARLY,
                                   firing, -1)
    write = _WriteShardFiring(sink)
    write.start_bundle()
    [part] = write.process((shard, records), pane=pane)
    return part


def _pane_sink(folder, limits: sackli.LimitsPlacement):
    where = for_unbounded_input(parse_write_path(str(folder / "out@3.bag")), fires_once=False)
    return BagSink(where, coders.BytesCoder(), sackli.Writer.Options(limits_placement=limits))


def _shards_of_pane(folder, pane: int, limits) -> list[list[bytes]]:
    options = sackli.Reader.Options(limits_placement=limits)
    return [sackli.Reader(str(folder / _pane_name(pane, s, 3)), options).read() for s in range(3)]


LIMITS = pytest.mark.parametrize("limits", list(sackli.LimitsPlacement), ids=lambda p: p.name)
W0 = window.IntervalWindow(0, 10)


class TestFinalizePane:
    """The exactly-once rules of a pane's set (`_stream_write.finalize_pane`),
    on parts made by hand: the orders a runner may deliver them in."""

    @LIMITS
    def test_discarding_merges_a_shard_that_fired_twice(self, tmp_path, limits):
        """Shard 0 fired twice before the pane (both files merged into its
        shard), shard 1 fired with nothing new, shard 2 not at all (both
        empty shards); the parts' temporary files and folders are gone
        afterwards, and finalising again (a retry) changes nothing."""
        sink = _pane_sink(tmp_path, limits)
        parts = [_part(sink, 0, 0, [b"a", b"b"]), _part(sink, 1, 0, []), _part(sink, 0, 1, [b"c"])]
        for attempt in range(2):
            names = list(finalize_pane(sink, 3, parts, W0, 0, accumulating=False))
            assert [n.rsplit("/", 1)[1] for n in names] == [_pane_name(0, s, 3) for s in range(3)]
            assert _shards_of_pane(tmp_path, 0, limits) == [[b"a", b"b", b"c"], [], []], attempt
            assert not [n for n in listing(tmp_path) if "-pane-" not in n]  # no temporaries

    @LIMITS
    def test_accumulating_takes_each_shards_newest_file(self, tmp_path, limits):
        """Pane 0: shard 0's first firing. Pane 1: shard 1 fired; shard 0's
        file went into pane 0, so it is copied from there. Pane 2: shard 0
        fired twice more (the older file deleted, the newest taken), shard
        1 copied from pane 1. Every set holds all records so far; a retry
        of pane 2 changes nothing."""
        sink = _pane_sink(tmp_path, limits)
        parts = [_part(sink, 0, 0, [b"a"])]
        list(finalize_pane(sink, 3, parts, W0, 0, accumulating=True))
        parts.append(_part(sink, 1, 0, [b"x"]))
        list(finalize_pane(sink, 3, parts, W0, 1, accumulating=True))
        parts += [_part(sink, 0, 1, [b"a", b"b"]), _part(sink, 0, 2, [b"a", b"b", b"c"])]
        for attempt in range(2):
            list(finalize_pane(sink, 3, parts, W0, 2, accumulating=True))
            assert _shards_of_pane(tmp_path, 0, limits) == [[b"a"], [], []]
            assert _shards_of_pane(tmp_path, 1, limits) == [[b"a"], [b"x"], []]
            assert _shards_of_pane(tmp_path, 2, limits) == [[b"a", b"b", b"c"], [b"x"], []], attempt
            assert not [n for n in listing(tmp_path) if "-pane-" not in n]  # no temporaries

    def test_nothing_fired(self, tmp_path):
        """Empty shard firings make an empty set, or none with
        skip_if_empty; a firing of the gathering key with no parts, none."""
        sink = _pane_sink(tmp_path, sackli.LimitsPlacement.TAIL)
        assert list(finalize_pane(sink, 3, [], W0, 0, accumulating=False)) == []
        empty = [_part(sink, 1, 0, [])]
        assert len(list(finalize_pane(sink, 3, empty, W0, 0, accumulating=False))) == 3
        assert _shards_of_pane(tmp_path, 0, sackli.LimitsPlacement.TAIL) == [[], [], []]
        sink.skip_if_empty = True
        assert list(finalize_pane(sink, 3, empty, W0, 1, accumulating=False)) == []
        assert listing(tmp_path) == [_pane_name(0, s, 3) for s in range(3)]


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
        # Each shard key fires on its own, so how many panes there are
        # depends on where records were dealt (see test_shards_per_pane).
        panes = len(keys) // 2
        assert keys == [f"beam-panes/{_pane_name(p, s, 2, '.bagz')}"
                        for p in range(panes) for s in range(2)]
        sets = [sorted(sackli.Reader(f"s3://{BUCKET}/beam-panes/out-{_label(0)}-pane-{p}@2.bagz")
                       .read()) for p in range(panes)]
        for earlier, later in zip(sets, sets[1:]):
            assert set(earlier) <= set(later)
        assert sets[-1] == sorted(ON_TIME + [LATE])


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


# --- On the portable runner's workers ---------------------------------------------


@pytest.mark.parametrize("runner_args", [
    ["--runner=FnApiRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"],
], ids=["fnapi-two-workers", "portable"])
def test_each_shard_of_a_pane_is_a_key_of_its_own_on_portable_runners(tmp_path, runner_args):
    """An unbounded input (`PeriodicImpulse`: these runners have no
    TestStream) over two 10-second windows of the past, five copies of
    each impulse written `@3`: each window's set holds its records exactly
    once, and the writing step ran once per shard key of each pane (Beam's
    counter, summed over the workers): 2 windows x 3 shards, where one key
    per window would be 2. (Only Beam's and Python's own callables in the
    pipeline: the worker processes cannot import this module.)"""
    from apache_beam.transforms.periodicsequence import PeriodicImpulse

    start = 1767225600  # 2026-01-01T00:00:00 UTC, a window boundary
    p = beam.Pipeline(options=PipelineOptions(runner_args))
    records = (p
               | PeriodicImpulse(start_timestamp=start, stop_timestamp=start + 19.5, fire_interval=1)
               | beam.Map("{0} {0} {0} {0} {0}".format)
               | beam.FlatMap(str.split)
               | beam.Map(str.encode)
               | beam.WindowInto(window.FixedWindows(10)))
    assert not records.is_bounded
    _ = records | WriteToSackli(str(tmp_path / "out@3.bag"))
    result = p.run()
    result.wait_until_finish()
    for first in (0, 10):
        label = "2026-01-01T00-00-%02d_2026-01-01T00-00-%02d" % (first, first + 10)
        written = sackli.Reader(str(tmp_path / f"out-{label}@3.bag")).read()
        # Ten impulses of this window, each five times: nothing lost or doubled.
        assert sorted(collections.Counter(written).values()) == [5] * 10, written
    files = [c.committed for c in result.metrics().query()["counters"]
             if c.key.metric.namespace == METRICS_NAMESPACE and c.key.metric.name == "shard_files"]
    assert sum(files) == 6, files
