"""Two builds of sackli, back to back: is one slower than the other?

Runs `benchmarks/compare_bagz.py --quick --no-chart` with each interpreter in
turn (A, B, A, B, ...), then compares sackli's median time per workload, B
over A. bagz, which is the same code in both runs, is the control: its B/A
ratios show how far this machine's noise alone moves a workload. The builds
agree when sackli's spread of ratios sits inside the control's.

    python benchmarks/compare_builds.py OLD_PYTHON NEW_PYTHON [--rounds 2]

Each interpreter needs sackli and the `bench` extra (bagz, numpy, ...), e.g.
a virtualenv with a source build (`scripts/install.sh`) and one with the
wheel from `scripts/wheel.sh`. Takes about 2 minutes a round and build.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run_once(python: str, out: str) -> list[dict]:
    """One quick compare_bagz run with this interpreter; its table rows."""
    subprocess.run([python, os.path.join(HERE, "compare_bagz.py"), "--quick", "--no-chart", "--json", out],
                   check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONSAFEPATH="1"))
    with open(out) as results:
        return json.load(results)["rows"]


def workload(row: dict) -> str:
    return f"{row['records']} {row['format']} {row['workload']}"


def medians(runs: list[list[dict]], column: str) -> dict[str, float]:
    """Each workload's median of `column` over the runs."""
    return {workload(row): statistics.median(run[i][column] for run in runs)
            for i, row in enumerate(runs[0])}


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="the first build's python (the baseline)")
    parser.add_argument("b", help="the second build's python")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each build, alternating (default 2)")
    args = parser.parse_args()

    runs: dict[str, list[list[dict]]] = {"a": [], "b": []}
    with tempfile.TemporaryDirectory(prefix="compare_builds_") as folder:
        for round_ in range(args.rounds):
            for name in ("a", "b"):
                python = getattr(args, name)
                print(f"round {round_ + 1}: {name} = {python}", file=sys.stderr)
                runs[name].append(run_once(python, os.path.join(folder, f"{name}{round_}.json")))

    ratios = {}
    for library in ("sackli", "bagz"):
        a, b = medians(runs["a"], f"{library}_s"), medians(runs["b"], f"{library}_s")
        ratios[library] = {key: b[key] / a[key] for key in a}
    print("| workload | sackli B/A | bagz B/A (control) |\n|---|--:|--:|")
    for key in ratios["sackli"]:
        print(f"| {key} | {ratios['sackli'][key]:.2f} | {ratios['bagz'][key]:.2f} |")
    print()
    for library, label in (("sackli", "sackli B/A"), ("bagz", "bagz B/A (the same code: noise)")):
        values = sorted(ratios[library].values())
        quartiles = statistics.quantiles(values, n=4)
        print(f"{label}: geometric mean {geometric_mean(values):.3f}, median {statistics.median(values):.3f}, "
              f"middle half {quartiles[0]:.2f}-{quartiles[2]:.2f}, over {len(values)} workloads")


if __name__ == "__main__":
    main()
