"""Which windowing of an unbounded PCollection `WriteToSackli` can write
without losing data.

Beam's file sinks finalise each window as one shard set, named by the
window alone (Beam hands the finalisation no pane), so a window that fires
twice (early or late panes) would write the same names again and replace
the first pane's records. Such windowing is refused up front instead.
"""

from __future__ import annotations

from apache_beam.transforms import trigger
from apache_beam.transforms.core import Windowing

__all__ = ["check_single_firing"]


def _fires_once(triggerfn: trigger.TriggerFn) -> bool:
    if isinstance(triggerfn, trigger.DefaultTrigger):
        return True
    return (
        isinstance(triggerfn, trigger.AfterWatermark)
        and triggerfn.early is None
        and triggerfn.late is None
    )


def check_single_firing(windowing: Windowing) -> None:
    """ValueError unless every window of `windowing` fires exactly once:
    the default (or a plain `AfterWatermark`) trigger and no allowed
    lateness."""
    if _fires_once(windowing.triggerfn) and windowing.allowed_lateness == 0:
        return
    raise ValueError(
        f"WriteToSackli writes one shard set per window, but the trigger "
        f"{windowing.triggerfn} with allowed lateness {windowing.allowed_lateness} can fire a "
        "window more than once, and a later pane would replace the earlier one's files; "
        "use the default trigger without allowed lateness, or triggering_frequency"
    )
