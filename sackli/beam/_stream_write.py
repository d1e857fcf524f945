"""The unbounded (streaming) expansion of `WriteToSackli`: one shard set
per pane of every window.

Beam's own windowed file write (`iobase.WriteImpl`) never hands its
finalisation the pane, so a window that fires twice would write the same
names twice. Here the records of a window are grouped under one key, so
each firing of the window (early, on time, late) is one group, one pane,
whose index names its set:

    records -> (None, record) -> GroupByKey (the input's windowing and
    trigger) -> per pane: N temporary shards -> renamed into place

One key per window, not one per shard, because a trigger fires per key:
with a key per shard, an `AfterCount(2)` would fire each shard's panes at
different moments and no pane would be a whole set. The price is that one
worker writes a pane's N shards (records dealt to them in turn), as Beam's
own single-shard streaming write does.

Each pane is finalised as a bounded write is (`BagSink`): shards under a
temporary folder, all N made (empty ones too) before any is renamed over
its final name, and only then are older sets of the same window and pane
deleted. ACCUMULATING panes therefore hold all records so far, DISCARDING
panes only the new ones; an empty pane (an on-time firing after early ones
took everything) writes an empty set unless `skip_if_empty`.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterable, Iterator

import apache_beam as beam

from ._sink import BagSink

__all__ = ["WritePanes"]


class _WritePaneSet(beam.DoFn):
    """Writes the records of one pane as a complete shard set and yields
    its final file names."""

    def __init__(self, sink: BagSink) -> None:
        self._sink = sink

    def process(
        self,
        keyed_records: tuple[None, Iterable[Any]],
        w: Any = beam.DoFn.WindowParam,
        pane: Any = beam.DoFn.PaneInfoParam,
    ) -> Iterator[str]:
        sink = self._sink
        shard_count = max(sink.num_shards, 1)  # '@*': one shard per pane
        temp_folder, writers = None, []
        for index, record in enumerate(keyed_records[1]):
            if not writers:
                temp_folder, writers = self._open(shard_count)
            writers[index % shard_count].write(record)  # dealt in turn
        if not writers:
            if sink.skip_if_empty:
                return
            temp_folder, writers = self._open(shard_count)  # an empty set
        temps = [writer.close() for writer in writers]
        yield from sink.finalize_windowed_write(temp_folder, temps, None, w, pane.index)

    def _open(self, shard_count: int) -> tuple[str, list[Any]]:
        """A new temporary folder and the writers of its shards."""
        temp_folder = self._sink.initialize_write()
        # The shard number leads the temporary name, so sorting the closed
        # temporaries (as finalisation does) keeps shard order.
        return temp_folder, [
            self._sink.open_writer(temp_folder, f"{shard:05d}-{uuid.uuid4().hex}")
            for shard in range(shard_count)]


class WritePanes(beam.PTransform):
    """Writes an unbounded, windowed PCollection through `sink`: one shard
    set per pane (see the module's notes); outputs the final file names,
    in the windows and panes they were written for."""

    def __init__(self, sink: BagSink) -> None:
        super().__init__()
        self._sink = sink

    def expand(self, records: beam.PCollection) -> beam.PCollection:
        return (
            records
            | "OneKeyPerWindow" >> beam.Map(lambda record: (None, record))
            | "FirePanes" >> beam.GroupByKey()
            | "WritePaneSets" >> beam.ParDo(_WritePaneSet(self._sink)).with_output_types(str)
        )
