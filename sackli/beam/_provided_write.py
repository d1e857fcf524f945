"""The bounded write of `WriteToSackli` when its output is known only at run
time: a path, suffix or shard count given as a template's ValueProvider.

Beam's `iobase.Write` chooses how to key records from `sink.num_shards`
while the pipeline is built, and pads `@N` outputs with empty shards up to
that number; here the number exists only on the workers. So the sink
itself is a provider (`_provided.Derived`), made on the workers from the
launched values, and this expansion reads the count from it at run time:

    once -> InitializeWrite (the temporary folder)
    records -> KeyByShard -> GroupByKey -> WriteShards (temporary shards)
    once -> FinalizeWrite (pad to the count, finalise: the final names)

KeyByShard deals a bundle's records to the N shards in turn, from a random
first shard, so every shard gets records from every bundle; with a count
the runner decides (0) it gives each bundle a key of its own, one shard per
bundle (split further by the sink's shard limits). Finalisation is the
sink's own (`BagSink.finalize_write`), as for a path known at construction.
"""

from __future__ import annotations

import random
import uuid
from typing import Any, Iterable, Iterator

import apache_beam as beam
from apache_beam.options.value_provider import ValueProvider
from apache_beam.pvalue import AsList, AsSingleton

__all__ = ["WriteToProvidedPath"]


def _initialize(unused_element: None, sinks: ValueProvider) -> Any:
    return sinks.get().initialize_write()


class _KeyByShard(beam.DoFn):
    """(shard key, record) for each record: the N shards in turn from a
    random start, or one key per bundle when the runner decides the count."""

    def __init__(self, sinks: ValueProvider) -> None:
        self._sinks = sinks
        self._count: int | None = None

    def start_bundle(self) -> None:
        if self._count is None:  # once per instance: making the sink parses the path
            self._count = self._sinks.get().num_shards
        # A random start spreads small bundles over all shards.
        self._next: Any = random.randrange(self._count) if self._count else uuid.uuid4().hex

    def process(self, record: Any) -> Iterator[tuple[Any, Any]]:
        key = self._next
        if self._count:
            self._next = (key + 1) % self._count
        yield key, record


class _WriteShards(beam.DoFn):
    """Writes the records of one key into temporary shards (a new one each
    time the sink's shard limits fill one); yields the temporary names."""

    def __init__(self, sinks: ValueProvider) -> None:
        self._sinks = sinks
        self._sink: Any = None

    def start_bundle(self) -> None:
        if self._sink is None:  # once per instance: making the sink parses the path
            self._sink = self._sinks.get()

    def process(self, keyed: tuple[Any, Iterable[Any]], temp_folder: Any) -> Iterator[Any]:
        writer = None
        for record in keyed[1]:
            if writer is None:
                writer = self._sink.open_writer(temp_folder, uuid.uuid4().hex)
            writer.write(record)
            if writer.at_capacity():
                yield writer.close()
                writer = None
        if writer is not None:
            yield writer.close()


def _finalize(
    unused_element: None, sinks: ValueProvider, temp_folder: Any, temps: list[Any]
) -> Iterator[str]:
    """Pads the shards written to the sink's count (at least one shard,
    unless `skip_if_empty` and nothing was written) and finalises them."""
    sink = sinks.get()
    temps = list(temps)
    missing = max(sink.num_shards, 1) - len(temps)
    if missing > 0 and (temps or not sink.skip_if_empty):
        temps += [sink.open_writer(temp_folder, uuid.uuid4().hex).close() for _ in range(missing)]
    pre_finalized = sink.pre_finalize(temp_folder, temps)
    yield from sink.finalize_write(temp_folder, temps, pre_finalized)


class WriteToProvidedPath(beam.PTransform):
    """Writes a bounded PCollection through the sink `sinks.get()` makes on
    the workers; outputs the final file names."""

    def __init__(self, sinks: ValueProvider) -> None:
        super().__init__()
        self._sinks = sinks

    def expand(self, records: beam.PCollection) -> beam.PCollection:
        once = records.pipeline | "Once" >> beam.Create([None])
        temp_folder = once | "InitializeWrite" >> beam.Map(_initialize, self._sinks)
        temps = (
            records
            | "KeyByShard" >> beam.ParDo(_KeyByShard(self._sinks))
            | "GlobalWindow" >> beam.WindowInto(beam.window.GlobalWindows())
            | "GroupShards" >> beam.GroupByKey()
            | "WriteShards" >> beam.ParDo(_WriteShards(self._sinks), AsSingleton(temp_folder))
        )
        return once | "FinalizeWrite" >> beam.FlatMap(
            _finalize, self._sinks, AsSingleton(temp_folder), AsList(temps)
        ).with_output_types(str)
