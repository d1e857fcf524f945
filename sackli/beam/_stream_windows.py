"""The windowing under which `WriteToSackli` writes an unbounded
PCollection, and whether its windows can fire more than once.

A window that fires once (the default trigger, no allowed lateness) writes
one shard set named by the window; one that can fire again (early or late
firings, allowed lateness) writes one set per pane, so its names must also
carry the pane (`_write_path.for_unbounded_input`).
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.transforms import trigger, window
from apache_beam.transforms.core import Windowing
from apache_beam.utils.timestamp import Duration

__all__ = ["fires_once", "windowed_for_write"]


def fires_once(windowing: Windowing) -> bool:
    """Whether every window of `windowing` fires exactly one pane: the
    default (or a plain `AfterWatermark`) trigger and no allowed lateness."""
    triggerfn = windowing.triggerfn
    plain = isinstance(triggerfn, trigger.DefaultTrigger) or (
        isinstance(triggerfn, trigger.AfterWatermark)
        and triggerfn.early is None
        and triggerfn.late is None
    )
    return plain and windowing.allowed_lateness == 0


def windowed_for_write(
    pcoll: beam.PCollection, triggering_frequency: int | None
) -> beam.PCollection:
    """`pcoll` as it is written: cut into fixed windows of
    `triggering_frequency` seconds firing once each (replacing its own
    windowing, as Beam's `WriteToText` does), or as it is.

    Raises ValueError for a globally windowed stream without
    `triggering_frequency`: its one window never closes, so nothing would
    ever be written."""
    if triggering_frequency is None:
        if isinstance(pcoll.windowing.windowfn, window.GlobalWindows):
            raise ValueError(
                "WriteToSackli writes an unbounded PCollection window by window; a globally "
                "windowed one needs triggering_frequency (seconds per written window)")
        return pcoll
    return pcoll | "FixedWindows" >> beam.WindowInto(
        window.FixedWindows(triggering_frequency),
        trigger=trigger.AfterWatermark(),
        accumulation_mode=trigger.AccumulationMode.DISCARDING,
        allowed_lateness=Duration(seconds=0),
    )
