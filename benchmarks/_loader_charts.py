"""The charts of benchmarks/loader_peers.py, drawn with matplotlib from its
results: loader_throughput.png (epoch records/s: local, bucket cold,
bucket warm), loader_random_access.png (median and p99 µs) and
loader_resume.png (ms to the first record after a restore). Sized to be
read at the docs' page width: large type, labelled axes with units, every
bar annotated, and "n/a" where a format cannot do what is measured.
"""

from __future__ import annotations

import pathlib
from typing import Any

FONT = 15
COLORS = {"local": "#1f77b4", "bucket cold": "#ff7f0e", "bucket warm": "#2ca02c",
          "median": "#1f77b4", "p99": "#9ecae1", "resume": "#1f77b4"}
# The resume chart's short words for each format's way of resuming.
RESUME_WAY = {"sackli": "own state", "mosaicml": "own state", "tfrecord": "tf.train.Checkpoint",
              "arrayrecord": "read by index", "webdataset": "skip to it"}


def short_reason(note: str) -> str:
    """A few words of a table note for a chart's "n/a"."""
    text = note.removeprefix("n/a: ")
    if "not implemented" in text or "No such file" in text:
        return "n/a: no s3:// reader"
    if "in order only" in text:
        return "n/a: sequential format"
    return "n/a: " + (text if len(text) <= 32 else text[:30] + "…")


def _figure(rows: int, title: str) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": FONT})
    figure, axis = plt.subplots(figsize=(11, 1.0 + 0.95 * rows + 1.2))
    axis.set_title(title, fontsize=FONT + 1, loc="left")
    return figure, axis


def _finish(figure: Any, axis: Any, labels: list[str], note: str, path: pathlib.Path) -> pathlib.Path:
    import matplotlib.pyplot as plt

    axis.set_yticks(range(len(labels)), labels)
    axis.set_ylim(len(labels) - 0.5, -0.6)
    axis.set_xscale("log")
    axis.grid(axis="x", alpha=0.3)
    axis.spines[["top", "right"]].set_visible(False)
    figure.text(0.01, 0.01, note, fontsize=FONT - 4, color="#555555")
    bottom = 0.11 if figure.legends else 0.04  # room for the legend and the footnote
    figure.tight_layout(rect=(0, bottom, 1, 1))
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def _bars(axis: Any, series: list[tuple[str, list[float | None], list[str]]], fmt: str,
          height: float) -> None:
    """Grouped horizontal bars: per series (name, values, n/a notes); a
    value is annotated with `fmt`, a missing one with its short reason (a
    row with no value at all gets one line)."""
    shown = [v for _, values, _ in series for v in values if v]
    low = min(shown) if shown else 1.0
    offsets = [(i - (len(series) - 1) / 2) * height for i in range(len(series))]
    labelled: set[str] = set()  # one legend entry per series
    for row in range(len(series[0][1])):
        if not any(values[row] for _, values, _ in series):
            axis.annotate(short_reason(series[0][2][row]), (low / 3, row), va="center",
                          fontsize=FONT - 3, color="#777777")
            continue
        for (name, values, notes), offset in zip(series, offsets):
            value, y = values[row], row + offset
            if value:
                axis.barh(y, value, height * 0.92, color=COLORS[name],
                          label=None if name in labelled else name)
                labelled.add(name)
                axis.annotate(format(value, fmt), (value, y), xytext=(4, 0), textcoords="offset points",
                              va="center", fontsize=FONT - 3)
            else:
                axis.annotate(f"{name}: {short_reason(notes[row])}", (low / 3, y), va="center",
                              fontsize=FONT - 4, color="#777777")
    axis.set_xlim(low / 4, max(shown) * 6 if shown else 10)


def _legend(figure: Any, axis: Any) -> None:
    """Under the x axis, in a row, so that it covers no bar."""
    figure.legend(*axis.get_legend_handles_labels(), loc="lower center", bbox_to_anchor=(0.5, 0.035),
                  ncol=3, fontsize=FONT - 2, frameon=False)


def throughput(result: dict[str, Any], path: pathlib.Path, footnote: str) -> pathlib.Path:
    rows = result["formats"]
    figure, axis = _figure(len(rows) * 1.6, f"Shuffled epoch of {result['records']:,} images "
                                            "(bytes, no decode)\nrecords/s, higher is better")
    series = []
    for kind in ("local", "bucket cold", "bucket warm"):
        values = [row[kind]["records_per_s"] if kind in row else None for row in rows.values()]
        notes = [row["na"].get(kind, "") for row in rows.values()]
        series.append((kind, values, notes))
    _bars(axis, series, ",.0f", 0.28)
    axis.set_xlabel("records per second (log scale)")
    _legend(figure, axis)
    return _finish(figure, axis, [row["label"] for row in rows.values()], footnote, path)


def random_access(result: dict[str, Any], path: pathlib.Path, footnote: str) -> pathlib.Path:
    rows = result["formats"]
    figure, axis = _figure(len(rows) * 1.2, "One record by index, local disk\nµs per read, lower is better")
    series = []
    for name, field in (("median", "median_us"), ("p99", "p99_us")):
        values = [row["random"][field] if "random" in row else None for row in rows.values()]
        series.append((name, values, [row["na"].get("random", "") for row in rows.values()]))
    _bars(axis, series, ",.1f", 0.36)
    axis.set_xlabel("microseconds per read (log scale)")
    _legend(figure, axis)
    return _finish(figure, axis, [row["label"] for row in rows.values()], footnote, path)


def resume(result: dict[str, Any], path: pathlib.Path, footnote: str) -> pathlib.Path:
    rows = result["formats"]
    figure, axis = _figure(len(rows), f"Resume at record {result['records'] // 2:,} of the epoch, local disk\n"
                                      "ms from restoring to the first record, lower is better")
    values = [row["resume"]["ms"] if "resume" in row else None for row in rows.values()]
    _bars(axis, [("resume", values, [row["na"].get("resume", "") for row in rows.values()])], ",.1f", 0.6)
    axis.set_xlabel("milliseconds (log scale)")
    labels = [f"{row['label']}\n({RESUME_WAY.get(name, '?')})" for name, row in rows.items()]
    return _finish(figure, axis, labels, footnote, path)


def render_all(result: dict[str, Any], folder: pathlib.Path) -> list[pathlib.Path]:
    """Draws the three charts into `folder`; their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    command = result.get("header", ["# command: ?"])[-1].removeprefix("# ")
    footnote = f"benchmarks/loader_peers.py; {command}"
    return [throughput(result, folder / "loader_throughput.png", footnote),
            random_access(result, folder / "loader_random_access.png", footnote),
            resume(result, folder / "loader_resume.png", footnote)]
