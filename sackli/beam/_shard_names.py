"""The final names of `WriteToSackli`'s shards, and which existing files
belong to an older shard set of the same output.

Beam renders the window of a `W` template letter with `str(window)`
(`[0.0, 10.0)`), whose brackets are glob syntax and whose spaces trouble
shells; shard names here carry the window as its UTC bounds instead
(`2026-01-01T00-00-00_2026-01-01T00-00-10`), which sort by time.

The letter `P` (Beam Java's template letter; Beam Python's templates have
none) is the pane's index, zero-padded to the run's length as `S` is: a
window that fires more than once writes one shard set per pane. A bounded
write is one pane, index 0.
"""

from __future__ import annotations

import re
from typing import Any

from apache_beam.transforms import window as beam_window

from .._sets import LIMITS_PREFIX
from ._files import split_name

__all__ = ["older_set_pattern", "with_pane_letter", "window_label"]

_TIME_FORMAT = "%Y-%m-%dT%H-%M-%S"
# Beam's template letters (filebasedsink): S shard, N count, U uuid, W/V
# window; and P, the pane (Beam Java's letter).
_LETTER_RUNS = re.compile(r"S+|N+|U+|W+|V+|P+")
_PANE_RUNS = re.compile(r"P+")


def _time_label(moment: Any) -> str:
    """A window bound in UTC, to the second (to the microsecond if it has
    a fraction: sub-second windows must not share names)."""
    utc = moment.to_utc_datetime()
    label = utc.strftime(_TIME_FORMAT)
    return f"{label}.{utc.microsecond:06d}" if utc.microsecond else label


def window_label(w: Any) -> str | None:
    """The name part of window `w` (None for the global window, which
    has none)."""
    if w is None or isinstance(w, beam_window.GlobalWindow):
        return None
    if isinstance(w, beam_window.IntervalWindow):
        return f"{_time_label(w.start)}_{_time_label(w.end)}"
    return re.sub(r"[^0-9A-Za-z._-]+", "_", str(w))  # a custom window type


def with_pane_letter(shard_name_format: str) -> str:
    """Beam's shard name format (its letters already replaced by `%(...)`
    fields, none of which holds a capital P) with each run of `P` as the
    `pane` field, zero-padded to the run's length."""
    return _PANE_RUNS.sub(lambda run: "%%(pane)0%dd" % len(run.group(0)), shard_name_format)


def older_set_pattern(
    prefix: str, template: str, suffix: str, w: Any, pane: int = 0
) -> re.Pattern[str]:
    """Matches the paths (and their `limits.` files) of any shard set this
    output writes in window `w` and pane `pane`, whatever its shard count:
    what a new set replaces. Another pane's set, or another output sharing
    the prefix (`name-2@3.bag` beside `name@3.bag`), does not match, as its
    digits are not where P, S and N are.

    Groups: `limits` (the `limits.` prefix of a limits file, else None) and
    `count` (the first N run: the count a path's set has; None when the
    template has no N)."""
    label = window_label(w) or ""
    counted = False

    def letter(run: re.Match[str]) -> str:
        nonlocal counted
        kind = run.group(0)[0]
        if kind in "WV":
            return re.escape(label)
        if kind == "P":
            return "%0*d" % (len(run.group(0)), pane)
        if kind == "U":
            return "[0-9]+"  # Beam renders the uuid as a decimal number
        digits = "[0-9]{%d,}" % len(run.group(0))
        if kind == "N" and not counted:
            counted = True
            return f"(?P<count>{digits})"
        return digits

    parts, last = [], 0
    for run in _LETTER_RUNS.finditer(template):
        parts += [re.escape(template[last:run.start()]), letter(run)]
        last = run.end()
    parts.append(re.escape(template[last:]))
    folder, name = split_name(prefix)
    names = re.escape(name) + "".join(parts) + re.escape(suffix)
    if not counted:
        names += "(?P<count>(?!))?"  # never set: the group exists for every template
    return re.compile(re.escape(folder) + f"(?P<limits>{re.escape(LIMITS_PREFIX)})?" + names)
