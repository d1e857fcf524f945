"""The fuzzer's child process: evaluates mutants on read paths.

It reads tasks (one JSON object per line) on stdin and answers on stdout,
one JSON object per line:

  {"start": [combo, path]}      before each (options, path) pair
  {"result": {...}}             after it: class, calls, failures
  {"done": task_id, ...}        after the task's last pair

Anything else written to stdout (by a library) goes to stderr instead, so
the protocol stays clean. A crash kills only this process: the runner sees
the pair that was started but got no result.

Task: {"id", "dir", "meta", "pairs": [[combo_key, path], ...], "seed",
       "remote_prefix": "s3://bucket/prefix" or null}
"""

from __future__ import annotations

import faulthandler
import importlib.util
import json
import os
import signal
import sys
import time
import traceback
import zlib
from typing import Any

from . import dataset_paths, map_paths, partial_paths
from .oracle import OracleError, expand_spec, limits_path_for, open_bag
from .paths import PATHS, Combo, Context, Judge

__all__ = ["evaluate", "main"]


def _entries(meta: dict, prefix: str) -> list[str]:
    return [f"{prefix}/{entry}" for entry in meta["spec"].split(",")]


def _bag_files(local_spec: str, entries: list[str]) -> list[str]:
    """Every name an error about this bag may use: its files, their limits
    files, and the spec's entries."""
    try:
        paths = expand_spec(local_spec)
    except OracleError:
        paths = []
    out = list(entries)
    for path in paths:
        out += [path, limits_path_for(path)]
    return out


def _available(module: str | None) -> bool:
    return module is None or importlib.util.find_spec(module) is not None


class Evaluator:
    """Evaluates the pairs of one bag mutant (the oracle is computed once)."""

    open_path = "open"  # the path that every other path needs to agree first

    def __init__(self, task: dict) -> None:
        self.task = task
        self.meta = meta = task["meta"]
        folder = task["dir"]
        self.local_entries = _entries(meta, folder)
        self.local_spec = ",".join(self.local_entries)
        name = meta.get("dictionary")
        self.dictionary = None
        if name:
            with open(os.path.join(folder, name), "rb") as f:
                self.dictionary = f.read()
        self.oracle = self._oracle(remote=False)
        prefix = task.get("remote_prefix")
        has_folders = any(os.path.isdir(os.path.join(folder, n)) for n in os.listdir(folder))
        # An object store has no folders: a folder in the mutant is no object.
        self.remote_oracle = self._oracle(remote=True) if prefix and has_folders else self.oracle
        self.local_files = _bag_files(self.local_spec, self.local_entries)
        try:
            self.local_paths = expand_spec(self.local_spec)
        except OracleError:
            self.local_paths = []
        self.remote_entries = _entries(meta, prefix) if prefix else []
        self.remote_files = [f.replace(folder, prefix, 1) for f in self.local_files] if prefix else []
        self.remote_paths = [p.replace(folder, prefix, 1) for p in self.local_paths] if prefix else []

    def oracle_for(self, combo_key: str):
        return self.remote_oracle if combo_key.startswith("remote/") else self.oracle

    def _oracle(self, remote: bool):
        try:
            bag = open_bag(self.local_spec, self.meta["placement"], self.meta["layout"],
                           self.meta["compression"], self.dictionary, remote=remote)
            bag.outcomes()  # decode everything once, before sackli runs
            return bag
        except OracleError as error:
            return error

    def pair(self, combo_key: str, path: str) -> dict:
        combo = Combo.from_key(combo_key)
        function, module = PATHS[path]
        started = time.perf_counter()
        result = {"combo": combo_key, "path": path}
        if not _available(module):
            result.update({"class": "skipped", "why": f"{module} is not importable", "calls": 0})
            return result
        if combo.remote:
            spec, files, beam_paths = ",".join(self.remote_entries), self.remote_files, self.remote_paths
            oracle = self.remote_oracle
        else:
            spec, files, beam_paths = self.local_spec, self.local_files, self.local_paths
            oracle = self.oracle
        seed = zlib.crc32(f"{self.task.get('seed', 0)}/{combo_key}/{path}".encode())
        ctx = Context(spec, self.meta, combo, oracle, self.dictionary, files, seed,
                      local_paths=self.local_paths, beam_paths=beam_paths)
        judge = Judge(files)
        if path != "open":
            # Other paths run only on bags that both sides open.
            if isinstance(oracle, OracleError):
                result.update({"class": "not_run", "why": "the oracle does not open it", "calls": 0})
                return result
        try:
            function(ctx, judge)
        except Exception as error:  # noqa: BLE001 - a path that could not finish
            tb = traceback.format_exc(limit=6)
            if path != "open" and "sackli.Reader" in tb and judge.calls == 0:
                # Opening failed: the open path reports that.
                result.update({"class": "not_run", "why": f"open failed: {error!r}"[:300], "calls": 0})
                return result
            judge.fail("mismatch", f"{path} (uncaught)", f"uncaught {type(error).__name__}",
                       None, f"{error!r}"[:300])
            judge.failures[-1]["traceback"] = tb[-2000:]
        result.update({"class": judge.cls, "calls": judge.calls, "counts": judge.counts,
                       "failures": judge.failures,
                       "seconds": round(time.perf_counter() - started, 4)})
        return result


class _TargetEvaluator:
    """Evaluates the pairs of a mutant of another kind than a bag (a map, a
    dataset): its module's oracle and paths."""

    open_path = ""

    def __init__(self, task: dict) -> None:
        self.task = task
        self.oracle: Any = None

    def oracle_for(self, combo_key: str) -> Any:
        return self.oracle

    def _judge(self, combo_key: str, path: str, oracle: Any, seed: int) -> Judge:
        raise NotImplementedError

    def pair(self, combo_key: str, path: str) -> dict:
        started = time.perf_counter()
        result = {"combo": combo_key, "path": path}
        oracle = self.oracle_for(combo_key)
        if path != self.open_path and isinstance(oracle, OracleError):
            result.update({"class": "not_run", "why": "the oracle does not open it", "calls": 0})
            return result
        seed = zlib.crc32(f"{self.task.get('seed', 0)}/{combo_key}/{path}".encode())
        try:
            judge = self._judge(combo_key, path, oracle, seed)
        except Exception as error:  # noqa: BLE001 - a path that could not finish
            judge = Judge([])
            judge.fail("mismatch", f"{path} (uncaught)", f"uncaught {type(error).__name__}",
                       None, f"{error!r}"[:300])
            judge.failures[-1]["traceback"] = traceback.format_exc(limit=6)[-2000:]
        result.update({"class": judge.cls, "calls": judge.calls, "counts": judge.counts,
                       "failures": judge.failures,
                       "seconds": round(time.perf_counter() - started, 4)})
        return result


class MapEvaluator(_TargetEvaluator):
    """A map mutant (see map_paths)."""

    open_path = "map_open"

    def __init__(self, task: dict) -> None:
        super().__init__(task)
        # Read by slices, a map's size is unknown: some damage cannot show.
        self.oracles = {known: map_paths.open_oracle(task["dir"], task["meta"], known)
                        for known in (True, False)}
        self.oracle = self.oracles[True]

    def oracle_for(self, combo_key: str) -> Any:
        if combo_key.startswith("remote/"):
            # An object store holds no folders: a folder in the mutant is no object.
            file = os.path.join(self.task["dir"], self.task["meta"]["files"][0])
            if os.path.isdir(file):
                return OracleError("not_found", f"{file}: a folder, not uploaded", file)
        return self.oracles[map_paths.size_known(combo_key)]

    def _judge(self, combo_key: str, path: str, oracle: Any, seed: int) -> Judge:
        return map_paths.evaluate_pair(self.task["dir"], self.task["meta"], oracle, combo_key,
                                       path, seed, self.task.get("remote_prefix"))


class DatasetEvaluator(_TargetEvaluator):
    """A dataset mutant: one shard folder (see dataset_paths)."""

    open_path = "dataset_open"

    def __init__(self, task: dict) -> None:
        super().__init__(task)
        self.oracle = dataset_paths.open_oracle(task["dir"])
        self.remote_oracle = (dataset_paths.open_oracle(task["dir"], remote=True)
                              if task.get("remote_prefix") else self.oracle)

    def oracle_for(self, combo_key: str) -> Any:
        return self.remote_oracle if combo_key.startswith("remote/") else self.oracle

    def _judge(self, combo_key: str, path: str, oracle: Any, seed: int) -> Judge:
        return dataset_paths.evaluate_pair(self.task["dir"], oracle, combo_key, path, seed,
                                           self.task.get("remote_prefix"))


class PartialEvaluator(_TargetEvaluator):
    """A partial mutant: hidden folders of unfinished writes (see partial_paths)."""

    open_path = "partial_recover"

    def _judge(self, combo_key: str, path: str, oracle: Any, seed: int) -> Judge:
        return partial_paths.evaluate_pair(self.task["dir"], path)


def evaluate(task: dict, emit) -> None:
    """Runs every pair of `task`, calling emit(obj) for each protocol line."""
    kind = task["meta"].get("kind", "bag")
    evaluator: Evaluator | _TargetEvaluator
    if kind in map_paths.MAP_KINDS:
        evaluator = MapEvaluator(task)
    elif kind == dataset_paths.DATASET_KIND:
        evaluator = DatasetEvaluator(task)
    elif kind == partial_paths.PARTIAL_KIND:
        evaluator = PartialEvaluator(task)
    else:
        evaluator = Evaluator(task)
    summary = {"n": None if isinstance(evaluator.oracle, OracleError) or evaluator.oracle is None
               else len(evaluator.oracle),
               "oracle_error": evaluator.oracle.kind if isinstance(evaluator.oracle, OracleError) else None}
    opened = {}
    for combo_key, path in task["pairs"]:
        if path != evaluator.open_path and opened.get(combo_key) is False:
            emit({"result": {"combo": combo_key, "path": path, "class": "not_run",
                             "why": "sackli or the oracle did not open it", "calls": 0}})
            continue
        emit({"start": [combo_key, path]})
        result = evaluator.pair(combo_key, path)
        if path == evaluator.open_path:
            oracle = evaluator.oracle_for(combo_key)
            opened[combo_key] = result["class"] == "agree" and not isinstance(oracle, OracleError)
        emit({"result": result})
    emit({"done": task["id"], "oracle": summary})


def main() -> None:
    faulthandler.enable(sys.stderr)
    # The runner sends SIGUSR1 to a child that stopped making progress, for
    # the traceback of every thread, before it kills it.
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints go to stderr
    sys.stdout = sys.stderr

    def emit(obj: dict) -> None:
        protocol.write(json.dumps(obj) + "\n")
        protocol.flush()

    import sackli  # noqa: F401 - fail early and clearly when it is missing

    emit({"ready": os.getpid(), "sackli": getattr(sys.modules["sackli"], "__file__", "?")})
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        task = json.loads(line)
        try:
            evaluate(task, emit)
        except Exception:  # noqa: BLE001 - report and go on with the next task
            emit({"done": task.get("id"), "harness_error": traceback.format_exc()[-3000:]})


if __name__ == "__main__":
    main()
