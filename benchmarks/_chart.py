"""The chart of benchmarks/compare_bagz.py: speed-ups over bagz per workload.

One panel per dataset (record size x format), one row per workload, a bar
for sackli and one for the C++ ceiling, on a log scale with a line at 1.0
(bagz). Needs matplotlib (`pip install matplotlib`).
"""

from __future__ import annotations

from typing import Any

COLORS = {"sackli": "#1f77b4", "ceiling": "#bbbbbb"}


def _panels(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    panels: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        panels.setdefault(f"{row['records']} records, {row['format']}", []).append(row)
    return panels


def _ceiling_speedup(row: dict[str, Any]) -> float | None:
    return row["bagz_s"] / row["ceiling_s"] if row.get("ceiling_s") else None


def _bars(axis: Any, positions: list[float], values: list[float | None], color: str, label: str) -> None:
    """Bars from 1.0 (bagz) to each value, annotated; None: no bar."""
    shown = [(p, v) for p, v in zip(positions, values) if v]
    axis.barh([p for p, _ in shown], [v - 1 for _, v in shown], _HEIGHT, left=1, color=color, label=label)
    for position, value in shown:
        axis.annotate(f"{value:.2f}x", (value, position), xytext=(3 if value >= 1 else -3, 0),
                      textcoords="offset points", va="center", ha="left" if value >= 1 else "right", fontsize=7)


_HEIGHT = 0.4
_TICKS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200)


def _draw_panel(axis: Any, title: str, rows: list[dict[str, Any]], low: float, high: float) -> None:
    positions = list(range(len(rows)))
    _bars(axis, [p - _HEIGHT / 2 for p in positions], [row["speedup"] for row in rows],
          COLORS["sackli"], "sackli")
    _bars(axis, [p + _HEIGHT / 2 for p in positions],
          [_ceiling_speedup(row) for row in rows],
          COLORS["ceiling"], "C++ ceiling (same I/O and decompression, no Python)")
    axis.axvline(1.0, color="black", linewidth=1)
    axis.set_xscale("log")
    axis.set_yticks(positions, [row["workload"] for row in rows], fontsize=8)
    axis.set_ylim(len(rows) - 0.5, -0.5)
    axis.set_title(title, fontsize=10)
    ticks = [t for t in _TICKS if low <= t <= high]
    axis.set_xticks(ticks, [f"{t:g}x" for t in ticks], fontsize=8)
    axis.set_xticks([], minor=True)
    axis.set_xlim(low, high)
    axis.grid(axis="x", alpha=0.3)


def render(rows: list[dict[str, Any]], path: str, env: dict[str, str], repeat: int) -> None:
    """Writes the chart of `rows` (compare_bagz's result rows) to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _panels(rows)
    longest = max(len(panel) for panel in panels.values())
    columns = 2
    lines = -(-len(panels) // columns)
    figure, axes = plt.subplots(lines, columns, figsize=(15, 0.32 * longest * lines + 2.2),
                                sharex=True, squeeze=False)
    values = [1.0] + [v for row in rows for v in (row["speedup"], _ceiling_speedup(row)) if v]
    low, high = min(values) / 1.6, max(values) * 1.6
    for axis, (title, panel_rows) in zip(axes.flat, panels.items()):
        _draw_panel(axis, title, panel_rows, low, high)
    for axis in axes.flat[len(panels):]:
        axis.set_visible(False)
    for axis in axes[-1]:
        axis.set_xlabel("speed-up over bagz: bagz time / time (> 1: faster than bagz)")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="upper right", fontsize=8)
    figure.suptitle(
        f"sackli {env['sackli']} vs bagz {env['bagz']}: speed-up per workload, bagz's median time "
        f"over the median time of {repeat} runs\n"
        f"{env['machine']}, Python {env['python']}, zstd {env['zstd (sackli)']} (sackli, ceiling) / "
        f"{env['zstd (bagz)']} (bagz)\ncommand: {env['command']}",
        fontsize=10,
    )
    figure.tight_layout(rect=(0, 0, 1, 0.97))
    figure.savefig(path, dpi=110)
    plt.close(figure)
