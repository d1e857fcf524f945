"""The mutation loop: children, classification, minimisation, regressions.

Each worker thread owns one long-lived child process (fuzz/child.py) and
feeds it mutants; a child that crashes (dies by a signal) or hangs (no
progress for `idle_timeout` seconds) is replaced, the (options, path) pair it
was on is recorded as a crash or hang, and the mutant's remaining pairs go
on in the new child. Every crash, hang or mismatch whose kind this run has
not seen is minimised (ops dropped while it still reproduces in a fresh
child) and saved as a regression case in fuzz/regressions/; every run
replays the regressions first.
"""

from __future__ import annotations

import base64
import collections
import datetime
import hashlib
import itertools
import json
import os
import pathlib
import queue
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

from . import mutators
from .corpus import load_corpus
from .dataset_paths import DATASET_KIND, DATASET_PATHS, dataset_combos
from .map_paths import MAP_KINDS, MAP_PATHS, map_combos
from .partial_paths import PARTIAL_COMBO, PARTIAL_KIND, PARTIAL_PATHS
from .paths import CLASSES, PATHS, all_combos

__all__ = ["Fuzzer", "Report", "run", "replay", "REGRESSIONS", "direct_io_works"]

REPO = pathlib.Path(__file__).resolve().parents[1]
REGRESSIONS = pathlib.Path(__file__).resolve().parent / "regressions"
FAILING = ("mismatch", "hang", "crash")
# A regression case holds its files (zlib, base64) up to this size in all.
MAX_INLINE_BYTES = 256 * 1024

_CHILD_CODE = ("import sys; sys.path.append({root!r}); "
               "from fuzz.child import main; main()")


def direct_io_works(folder: str) -> bool:
    """Whether the file system of `folder` accepts O_DIRECT (tmpfs does not)."""
    if not hasattr(os, "O_DIRECT"):
        return False
    probe = os.path.join(folder, ".direct-io-probe")
    with open(probe, "wb") as f:
        f.write(b"\0" * 4096)
    try:
        fd = os.open(probe, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        return False
    finally:
        try:
            os.remove(probe)
        except OSError:
            pass
    os.close(fd)
    return True


def normalize_sub(sub: str) -> str:
    return re.sub(r"\d+", "N", sub or "")


def oracle_reason(expected: str) -> str:
    """Why the oracle says what it says, without paths and numbers
    ("N bytes after the zstd frame", "record N spans [N, N)..."), or "" when
    it expected data."""
    if not expected.startswith("oracle:"):
        return ""
    text = re.sub(r"'?/[^\s']*'?:?\s*", "", expected)
    text = re.sub(r"record \d+: ", "", text)
    return normalize_sub(text)[:80]


def source_kind(combo: str) -> str:
    where = combo.split("/")[0] if combo else ""
    return "remote" if where == "remote" else "mapped" if where == "SYSTEM" else "unmapped"


def minimise_key(signature: tuple) -> tuple:
    """One input is minimised and kept per key: the signature, where the
    kind of source counts only when the oracle has data (a corrupt record
    read wrongly from mapped and unmapped files is one kind)."""
    cls, sub, reason, source = signature
    return (cls, sub, reason, source if not reason or cls in ("crash", "hang") else "*")


def failure_kind(cls: str, sub: str, combo: str, expected: str) -> tuple:
    """A kind of failure, of which one input is minimised and kept: class,
    what went wrong, why the oracle disagrees, kind of source (as
    Finding.signature)."""
    return (cls, normalize_sub(sub), oracle_reason(expected or ""), source_kind(combo))


# --- Child processes ------------------------------------------------------------------


@dataclass
class TaskOutcome:
    results: list[dict]
    status: str  # done | crash | hang | harness_error
    in_flight: tuple[str, str] | None = None
    returncode: int | None = None
    stderr: str = ""
    oracle: dict | None = None
    error: str = ""


class Child:
    """One child process evaluating tasks."""

    def __init__(self, log_path: str, env: dict[str, str], cwd: str) -> None:
        self.log_path = log_path
        self.env = env
        self.cwd = cwd
        self.process: subprocess.Popen | None = None
        self.lines: queue.Queue = queue.Queue()
        self.sackli_file = "?"

    def start(self, timeout: float = 120) -> None:
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-X", "faulthandler", "-c", _CHILD_CODE.format(root=str(REPO))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=self.cwd, env=self.env,
            text=True, bufsize=1)
        log.close()
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, args=(self.process, self.lines), daemon=True).start()
        first = self._next(timeout)
        if first is None or "ready" not in first:
            self.kill()
            raise RuntimeError(f"the fuzz child did not start: {self._stderr_tail(0)}")
        self.sackli_file = first.get("sackli", "?")

    @staticmethod
    def _pump(process: subprocess.Popen, lines: queue.Queue) -> None:
        for line in process.stdout:
            line = line.strip()
            if line:
                try:
                    lines.put(json.loads(line))
                except ValueError:
                    lines.put({"noise": line})
        lines.put(None)  # EOF

    def _next(self, timeout: float) -> dict | None | str:
        try:
            return self.lines.get(timeout=max(timeout, 0.01))
        except queue.Empty:
            return "timeout"

    def _stderr_tail(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read()[-4000:].decode(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def run(self, task: dict, idle_timeout: float, total_timeout: float) -> TaskOutcome:
        if not self.alive():
            self.start()
        offset = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        results: list[dict] = []
        in_flight = None
        try:
            self.process.stdin.write(json.dumps(task) + "\n")
            self.process.stdin.flush()
        except OSError:
            pass
        deadline = time.monotonic() + total_timeout
        while True:
            wait = min(idle_timeout, deadline - time.monotonic())
            message = self._next(wait)
            if message == "timeout":
                self.dump_threads()
                self.kill()
                return TaskOutcome(results, "hang", in_flight, None, self._stderr_tail(offset))
            if message is None:  # the child died
                code = self.process.wait()
                self.process = None
                return TaskOutcome(results, "crash", in_flight, code, self._stderr_tail(offset))
            if "start" in message:
                in_flight = tuple(message["start"])
            elif "result" in message:
                results.append(message["result"])
                in_flight = None
            elif "done" in message:
                if "harness_error" in message:
                    return TaskOutcome(results, "harness_error", in_flight, error=message["harness_error"])
                return TaskOutcome(results, "done", oracle=message.get("oracle"))

    def dump_threads(self) -> None:
        """Asks a hung child for the traceback of its threads (faulthandler)."""
        if self.alive():
            try:
                self.process.send_signal(signal.SIGUSR1)
                time.sleep(1.0)
            except OSError:
                pass

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def close(self) -> None:
        if self.process is not None:
            try:
                self.process.stdin.close()
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
            self.process = None


# --- The report ------------------------------------------------------------------------


@dataclass
class Finding:
    cls: str
    path: str
    combo: str
    sub: str
    call: str
    expected: str
    actual: str
    recipe: dict | None
    source: str  # mutant id or regression name
    stderr: str = ""
    minimized: dict | None = None
    regression: str | None = None

    @property
    def signature(self) -> tuple[str, str, str, str]:
        """What went wrong, regardless of the path: class, the judge's
        words, the oracle's reason and the kind of source."""
        return (self.cls, normalize_sub(self.sub), oracle_reason(self.expected), source_kind(self.combo))

    def as_dict(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if v not in (None, "")}
        out["class"] = out.pop("cls")
        return out


@dataclass
class Report:
    seed: int = 0
    seconds: float = 0.0
    jobs: int = 1
    mutants: int = 0
    regressions: int = 0
    combos: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    by_path: dict = field(default_factory=lambda: collections.defaultdict(collections.Counter))
    by_combo: dict = field(default_factory=lambda: collections.defaultdict(collections.Counter))
    by_class: collections.Counter = field(default_factory=collections.Counter)
    by_seed: collections.Counter = field(default_factory=collections.Counter)
    by_op: collections.Counter = field(default_factory=collections.Counter)
    oracle_open: collections.Counter = field(default_factory=collections.Counter)
    calls: int = 0
    findings: list[Finding] = field(default_factory=list)
    distinct: dict = field(default_factory=dict)  # signature -> {count, combos, example}
    skipped: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    saved: list[str] = field(default_factory=list)
    harness_errors: list[str] = field(default_factory=list)

    def add_results(self, results: list[dict]) -> None:
        for r in results:
            cls = r["class"]
            self.by_path[r["path"]][cls] += 1
            self.by_combo[r["combo"]][cls] += 1
            self.by_class[cls] += 1
            self.calls += r.get("calls", 0)
            if cls == "skipped":
                self.skipped[r["path"]] = r.get("why", "")

    def add_finding(self, finding: Finding) -> bool:
        """Records a finding; True when its kind is new in this run."""
        self.findings.append(finding)
        entry = self.distinct.get(finding.signature)
        if entry is None:
            self.distinct[finding.signature] = {"count": 1, "combos": {finding.combo}, "example": finding,
                                                "sources": {finding.source}, "paths": {finding.path}}
            return True
        entry["count"] += 1
        entry["combos"].add(finding.combo)
        entry["sources"].add(finding.source)
        entry["paths"].add(finding.path)
        if entry["example"].regression is None and finding.regression is not None:
            entry["example"] = finding
        return False

    def failing(self) -> list[Finding]:
        return [f for f in self.findings if f.cls in FAILING]

    def format_failures(self, limit: int = 30) -> str:
        lines = []
        for signature, entry in sorted(self.distinct.items()):
            if signature[0] not in FAILING:
                continue
            ex: Finding = entry["example"]
            lines.append(f"[{ex.cls}] {ex.sub} ({signature[2] or 'the oracle has data'}) x{entry['count']} "
                         f"in paths {', '.join(sorted(entry['paths']))}; options {', '.join(sorted(entry['combos']))}")
            lines.append(f"    e.g. path {ex.path}, options {ex.combo}")
            lines.append(f"    call {ex.call}\n    expected {ex.expected}\n    actual   {ex.actual}")
            lines.append(f"    from {', '.join(sorted(entry['sources'])[:5])}")
            recipe = ex.minimized or ex.recipe
            if recipe is not None:
                lines.append("    recipe " + json.dumps(recipe)[:1500])
            if ex.regression:
                lines.append(f"    saved as {ex.regression}")
            if ex.stderr:
                lines.append("    stderr: " + ex.stderr.strip().replace("\n", "\n      ")[-1500:])
            if len(lines) > limit * 6:
                break
        return "\n".join(lines)

    def table(self) -> str:
        classes = list(CLASSES) + ["not_run", "skipped"]
        width = max([len(p) for p in self.by_path] + [len(c) for c in self.by_combo] + [10]) + 2
        head = f"{'':{width}}" + "".join(f"{c:>16}" for c in classes)
        out = [
            f"sackli fuzz: seed {self.seed}, {self.seconds:.1f} s, {self.jobs} jobs",
            f"mutants tried: {self.mutants} (plus {self.regressions} regression cases replayed)",
            f"(options, path) pairs evaluated: {sum(self.by_class.values())}, reader calls judged: {self.calls}",
            f"options ({len(self.combos)}): {', '.join(self.combos)}",
            f"oracle at open: " + ", ".join(f"{k} {v}" for k, v in sorted(self.oracle_open.items())),
            "", "per path:", head,
        ]
        # Rows of paths and option sets that no seed of this run reached (a
        # run over some seed kinds only) are named once below, not tabled.
        idle: list[str] = []

        def rows(names: list[str], counts_by_name: dict) -> list[str]:
            lines = []
            for name in names:
                counts = counts_by_name.get(name)
                if counts:
                    lines.append(f"{name:{width}}" + "".join(f"{counts.get(c, 0):>16}" for c in classes))
                else:
                    idle.append(name)
            return lines

        out += rows(self.paths, self.by_path)
        out += ["", "per options:", head] + rows(self.combos, self.by_combo)
        out.append(f"{'total':{width}}" + "".join(f"{self.by_class.get(c, 0):>16}" for c in classes))
        if idle:
            out.append("not reached by this run's seeds: " + ", ".join(idle))
        out += ["", "seeds mutated: " + ", ".join(f"{k} {v}" for k, v in self.by_seed.most_common()),
                "ops applied: " + ", ".join(f"{k} {v}" for k, v in self.by_op.most_common())]
        if self.skipped:
            out.append("skipped paths: " + "; ".join(f"{k}: {v}" for k, v in self.skipped.items()))
        out += self.notes
        out += ["", f"distinct findings: {len(self.distinct)}"]
        for signature, entry in sorted(self.distinct.items(), key=lambda kv: (-CLASSES.index(kv[0][0]), kv[0])):
            ex = entry["example"]
            combos = sorted(entry["combos"])
            out.append(f"  [{ex.cls}] {ex.sub} -- oracle: {signature[2] or 'data'} -- {signature[3]} source; "
                       f"x{entry['count']} in {len(entry['sources'])} inputs")
            out.append(f"      paths {', '.join(sorted(entry['paths']))}; "
                       f"options {', '.join(combos[:4])}{f' +{len(combos) - 4}' if len(combos) > 4 else ''}")
            recipe = ex.minimized or ex.recipe
            if recipe is not None:
                ops = "; ".join(mutators.describe(op) for op in recipe.get("ops", []))
                out.append(f"      {recipe.get('seed')}: {ops}"[:400])
            if ex.regression:
                out.append(f"      regression: {ex.regression}")
        if self.saved:
            out.append("new regression cases: " + ", ".join(self.saved))
        if self.harness_errors:
            out.append(f"harness errors: {len(self.harness_errors)}")
            out += ["  " + e.strip().splitlines()[-1][:300] for e in self.harness_errors[:5]]
        return "\n".join(out)

    def as_json(self) -> dict:
        return {
            "seed": self.seed, "seconds": self.seconds, "jobs": self.jobs, "mutants": self.mutants,
            "regressions": self.regressions, "combos": self.combos, "paths": self.paths,
            "by_path": {k: dict(v) for k, v in self.by_path.items()},
            "by_combo": {k: dict(v) for k, v in self.by_combo.items()},
            "by_class": dict(self.by_class), "by_seed": dict(self.by_seed), "by_op": dict(self.by_op),
            "oracle_open": dict(self.oracle_open), "calls": self.calls,
            "distinct": [{"signature": list(sig), "count": e["count"], "combos": sorted(e["combos"]),
                          "paths": sorted(e["paths"]), "sources": sorted(e["sources"])[:20],
                          "example": e["example"].as_dict()}
                         for sig, e in self.distinct.items()],
            "saved": self.saved, "skipped": self.skipped, "harness_errors": self.harness_errors,
        }


# --- Regression cases ---------------------------------------------------------------------


def _snapshot(folder: str) -> dict[str, Any] | None:
    """The files of a mutant folder, zlib-compressed and base64 (None when
    that is over MAX_INLINE_BYTES, or the folder holds folders with files)."""
    out: dict[str, Any] = {}
    total = 0
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isdir(path):
            if os.listdir(path):  # a partial mutant's work/: replayed from its recipe
                return None
            out[name] = {"dir": True}
            continue
        with open(path, "rb") as f:
            packed = base64.b64encode(zlib.compress(f.read(), 9)).decode()
        total += len(packed)
        if total > MAX_INLINE_BYTES:
            return None
        out[name] = {"zlib": packed}
    return out


def _restore(files: dict[str, Any], folder: str) -> None:
    if os.path.exists(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)
    for name, content in files.items():
        path = os.path.join(folder, name)
        if isinstance(content, dict) and content.get("dir"):
            os.mkdir(path)
            continue
        data = (zlib.decompress(base64.b64decode(content["zlib"])) if isinstance(content, dict)
                else base64.b64decode(content))
        with open(path, "wb") as f:
            f.write(data)


def _ops_key(recipe: dict | None) -> str:
    recipe = recipe or {}
    return json.dumps([recipe.get("seed"), recipe.get("ops")], sort_keys=True)


def load_regressions(folder: pathlib.Path) -> list[dict]:
    cases = []
    if folder.is_dir():
        for path in sorted(folder.glob("*.json")):
            case = json.loads(path.read_text())
            case.setdefault("name", path.stem)
            cases.append(case)
    return cases


# --- The fuzzer ------------------------------------------------------------------------------


class Fuzzer:
    def __init__(self, work_dir: str | os.PathLike | None = None, *, jobs: int = 2, remote: bool = False,
                 idle_timeout: float = 20.0, corpus_seed: int = 0,
                 regressions_dir: str | os.PathLike | None = None,
                 save_dir: str | os.PathLike | None = None, max_minimize: int = 8,
                 paths: list[str] | None = None, remote_every: int = 4,
                 log: Callable[[str], None] | None = None) -> None:
        self.own_work = work_dir is None
        self.work = pathlib.Path(work_dir or tempfile.mkdtemp(prefix="sackli-fuzz-",
                                                              dir=os.environ.get("SACKLI_FUZZ_TMP")))
        self.work.mkdir(parents=True, exist_ok=True)
        self.jobs = max(1, jobs)
        self.idle_timeout = idle_timeout
        self.regressions_dir = pathlib.Path(regressions_dir) if regressions_dir else REGRESSIONS
        self.save_dir = pathlib.Path(save_dir) if save_dir else None
        self.max_minimize = max_minimize
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        self.corpus_dir = self.work / "corpus"
        self.corpus_seed = corpus_seed
        self.metas = load_corpus(self.corpus_dir, corpus_seed)
        self.direct_io = direct_io_works(str(self.work))
        self.server = None
        if remote:
            from .remote import S3Server

            self.server = S3Server().start()
        self.combos = [c.key for c in all_combos(remote=remote, direct_io=self.direct_io)]
        self.map_combos = {kind: map_combos(kind, remote) for kind in MAP_KINDS}
        self.local_combos = [c for c in self.combos if not c.startswith("remote/")]
        # Remote reads are slow (HTTP requests): every remote_every-th mutant
        # (and every regression case) is also read remotely.
        self.remote_every = max(1, remote_every)
        self.paths = paths or list(PATHS) + list(MAP_PATHS) + list(DATASET_PATHS) + list(PARTIAL_PATHS)
        all_map_combos = list(dict.fromkeys(c for combos in self.map_combos.values() for c in combos))
        self.report = Report(jobs=self.jobs, combos=self.combos + all_map_combos + dataset_combos(remote)
                             + [PARTIAL_COMBO], paths=self.paths)
        if not self.direct_io:
            self.report.notes.append(f"DIRECT_IO not covered: {self.work} refuses O_DIRECT")
        self.lock = threading.Lock()
        self.minimized = 0
        # Kinds of failure already kept as regression cases, or tried here.
        self.known = {minimise_key(failure_kind(c.get("class", ""), c.get("sub", ""), c.get("combo", ""),
                                                c.get("expected", "")))
                      for c in load_regressions(self.regressions_dir)}
        self.tried: set = set()
        self.saved_ops = {_ops_key(c.get("recipe")) for c in load_regressions(self.regressions_dir)}
        self.deadline = float("inf")  # no minimising after the fuzzing time
        env = dict(os.environ)
        env["PYTHONSAFEPATH"] = "1"
        # Children find the fuzz package by appending the root themselves;
        # the root first on their path would shadow the installed sackli.
        kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                if p and os.path.abspath(p) != str(REPO)]
        if kept:
            env["PYTHONPATH"] = os.pathsep.join(kept)
        else:
            env.pop("PYTHONPATH", None)
        env.setdefault("PYTHONFAULTHANDLER", "1")
        if self.server is not None:
            env.update(self.server.env())
        self.env = env

    # --- pairs ---------------------------------------------------------------

    def pairs(self, meta: dict, combos: list[str] | None = None) -> list[list[str]]:
        """The (options, path) pairs a mutant of the seed `meta` is read with:
        a bag's with `combos` (default: all), a map's or a dataset's with its own."""
        kind = meta.get("kind", "bag")
        remote = combos is None or any(c.startswith("remote/") for c in combos)
        if kind in MAP_KINDS:
            return [[combo, path] for combo in self.map_combos[kind]
                    if remote or not combo.startswith("remote/")
                    for path in self.paths if path in MAP_PATHS]
        if kind == DATASET_KIND:
            return [[combo, path] for combo in dataset_combos(remote and self.server is not None)
                    for path in self.paths if path in DATASET_PATHS]
        if kind == PARTIAL_KIND:
            return [[PARTIAL_COMBO, path] for path in self.paths if path in PARTIAL_PATHS]
        return [[combo, path] for combo in (combos or self.combos)
                for path in self.paths if path in PATHS]

    def _child(self, name: str) -> Child:
        return Child(str(self.work / f"{name}.stderr.log"), self.env, str(self.work))

    def _task(self, task_id: str, folder: str, meta: dict, pairs: list, seed: int, prefix_name: str) -> dict:
        task = {"id": task_id, "dir": folder, "meta": meta, "pairs": pairs, "seed": seed}
        if self.server is not None and any(p[0].startswith("remote/") for p in pairs):
            task["remote_prefix"] = self.server.upload_folder(folder, prefix_name)
        return task

    def evaluate(self, child: Child, task: dict) -> tuple[list[dict], list[dict], dict | None]:
        """All pairs of a task; crashes and hangs restart the child and the
        remaining pairs go on. Returns (results, incidents, oracle summary)."""
        pending = list(task["pairs"])
        results: list[dict] = []
        incidents: list[dict] = []
        oracle = None
        while pending:
            outcome = child.run(dict(task, pairs=pending), self.idle_timeout,
                                total_timeout=max(600.0, self.idle_timeout * 10))
            results += outcome.results
            oracle = outcome.oracle or oracle
            if outcome.status == "done":
                break
            if outcome.status == "harness_error":
                with self.lock:
                    self.report.harness_errors.append(f"{task['id']}: {outcome.error}")
                break
            done = {(r["combo"], r["path"]) for r in outcome.results}
            if outcome.in_flight is None:
                with self.lock:
                    self.report.harness_errors.append(
                        f"{task['id']}: child {outcome.status} outside any pair: {outcome.stderr[-800:]}")
                break
            combo, path = outcome.in_flight
            signal = -outcome.returncode if outcome.returncode and outcome.returncode < 0 else None
            record = {"combo": combo, "path": path, "class": outcome.status, "calls": 0,
                      "signal": signal, "returncode": outcome.returncode, "stderr": outcome.stderr,
                      "failures": [{"class": outcome.status, "call": path,
                                    "sub": f"child died (signal {signal}, code {outcome.returncode})"
                                    if outcome.status == "crash" else
                                    f"no progress for {self.idle_timeout:.0f} s",
                                    "expected": "", "actual": ""}]}
            results.append(record)
            incidents.append(record)
            index = next(k for k, p in enumerate(pending) if (p[0], p[1]) == (combo, path))
            pending = [p for p in pending[index + 1:] if (p[0], p[1]) not in done]
        return results, incidents, oracle

    # --- findings ------------------------------------------------------------------

    def _findings(self, results: list[dict], recipe: dict | None, source: str) -> list[Finding]:
        out = []
        for r in results:
            if r["class"] in ("agree", "not_run", "skipped"):
                continue
            first = (r.get("failures") or [{}])[0]
            out.append(Finding(r["class"], r["path"], r["combo"], first.get("sub", ""), first.get("call", ""),
                               first.get("expected", ""), first.get("actual", ""), recipe, source,
                               stderr=r.get("stderr", "")))
        return out

    def reproduce(self, recipe: dict, finding: Finding, scratch: str) -> dict | None:
        """The failure (of `finding`'s kind) that `recipe`'s mutant gives on
        `finding`'s pair alone, in a fresh child; None when it does not."""
        meta = mutators.materialize(recipe, str(self.corpus_dir), scratch, self.metas)
        child = self._child(f"min-{threading.get_ident()}")
        try:
            task = self._task("reproduce", scratch, meta, [[finding.combo, finding.path]],
                              recipe.get("mutant", 0), f"min-{threading.get_ident()}")
            results, _, _ = self.evaluate(child, task)
        finally:
            child.close()
        for r in results:
            if r["class"] != finding.cls:
                continue
            for failure in r.get("failures", []):
                if finding.cls != "mismatch" or normalize_sub(failure.get("sub", "")) == normalize_sub(finding.sub):
                    return dict(failure, stderr=r.get("stderr", ""))
        return None

    def minimize(self, finding: Finding, scratch: str) -> tuple[dict, dict] | None:
        """The shortest recipe (greedy op removal) that still reproduces, and
        its failure; None when even the whole recipe does not reproduce alone."""
        recipe = finding.recipe
        failure = self.reproduce(recipe, finding, scratch) if recipe is not None else None
        if failure is None:
            return None
        ops = list(recipe["ops"])
        changed = True
        while changed and len(ops) > 1:
            changed = False
            for k in range(len(ops)):
                candidate = {**recipe, "ops": ops[:k] + ops[k + 1:]}
                found = self.reproduce(candidate, finding, scratch)
                if found is not None:
                    ops, failure = candidate["ops"], found
                    changed = True
                    break
        return {**recipe, "ops": ops}, failure

    def save_regression(self, finding: Finding, recipe: dict, scratch: str) -> str | None:
        folder = self.save_dir or self.regressions_dir
        folder.mkdir(parents=True, exist_ok=True)
        meta = mutators.materialize(recipe, str(self.corpus_dir), scratch, self.metas)
        digest = hashlib.sha1(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:8]
        name = f"{finding.cls}-{finding.path}-{digest}"
        case = {
            "name": name, "class": finding.cls, "path": finding.path, "combo": finding.combo,
            "sub": finding.sub, "call": finding.call, "expected": finding.expected, "actual": finding.actual,
            "stderr": finding.stderr[-3000:],
            "recipe": recipe, "seed_meta": meta, "corpus_seed": self.corpus_seed,
            "ops": [mutators.describe(op) for op in recipe["ops"]],
            "found": {"run_seed": self.report.seed, "source": finding.source,
                      "date": datetime.date.today().isoformat()},
        }
        files = _snapshot(scratch)
        if files is not None:
            case["files"] = files
        path = folder / f"{name}.json"
        path.write_text(json.dumps(case, indent=1) + "\n")
        return str(path)

    def handle(self, findings: list[Finding], scratch: str) -> None:
        """Counts findings; minimises and saves the first of each new kind
        (see Finding.signature): crashes and hangs first, then wrong data."""
        def priority(finding: Finding) -> int:
            if finding.cls in ("crash", "hang"):
                return 0
            return 1 if ("bytes" in finding.sub or "data" in finding.sub) else 2

        for finding in sorted(findings, key=priority):
            key = minimise_key(finding.signature)
            with self.lock:
                self.report.add_finding(finding)
                severe = finding.cls in ("crash", "hang")
                wanted = (finding.cls in FAILING and finding.recipe is not None and key not in self.tried
                          and key not in self.known
                          and self.minimized < self.max_minimize * (3 if severe else 1)
                          and time.monotonic() < self.deadline)
                if wanted:
                    self.minimized += 1
                    self.tried.add(key)
            if not wanted:
                continue
            self.log(f"minimising [{finding.cls}] {finding.path} {finding.combo}: {finding.sub}")
            found = self.minimize(finding, scratch)
            minimized = None
            if found is not None:
                minimized, failure = found
                finding.minimized = minimized
                finding.call, finding.sub = failure.get("call", finding.call), failure.get("sub", finding.sub)
                finding.expected, finding.actual = failure.get("expected", ""), failure.get("actual", "")
                finding.stderr = failure.get("stderr") or finding.stderr
            else:
                self.log("  (did not reproduce alone in a fresh child: saved with its whole recipe)")
            final = minimise_key(finding.signature)
            ops = _ops_key(minimized or finding.recipe)
            with self.lock:
                if final in self.known or ops in self.saved_ops:
                    continue
                self.known.add(final)
                self.saved_ops.add(ops)
            saved = self.save_regression(finding, minimized or finding.recipe, scratch)
            finding.regression = saved
            with self.lock:
                self.report.saved.append(saved)

    # --- the loops -------------------------------------------------------------------

    def _replay_case(self, child: Child, case: dict, scratch: str) -> None:
        if "files" in case:
            _restore(case["files"], scratch)
            meta = case["seed_meta"]
        else:
            meta = mutators.materialize(case["recipe"], str(self.corpus_dir), scratch, self.metas)
        seed = case.get("recipe", {}).get("mutant", 0)
        pairs = self.pairs(meta)
        results: list[dict] = []
        recorded = [case.get("combo"), case.get("path")]
        if case.get("class") in ("crash", "hang") and recorded in pairs:
            # A memory error may only crash in a fresh process (in one that
            # ran other reads first, it may read foreign bytes instead).
            fresh = self._child(f"replay-fresh-{threading.get_ident()}")
            try:
                task = self._task(f"regression {case['name']}", scratch, meta, [recorded], seed,
                                  f"r-{case['name']}")
                results, _, _ = self.evaluate(fresh, task)
            finally:
                fresh.close()
            pairs = [p for p in pairs if p != recorded]
        task = self._task(f"regression {case['name']}", scratch, meta, pairs, seed, f"r-{case['name']}")
        more, _, oracle = self.evaluate(child, task)
        results += more
        with self.lock:
            self.report.regressions += 1
            self.report.add_results(results)
            for finding in self._findings(results, case.get("recipe"), f"regression {case['name']}"):
                finding.regression = case["name"]
                self.report.add_finding(finding)

    def replay(self) -> Report:
        cases = load_regressions(self.regressions_dir)
        queue_ = list(cases)
        started = time.monotonic()

        def worker(j: int) -> None:
            child = self._child(f"replay{j}")
            scratch = str(self.work / f"replay{j}")
            try:
                while True:
                    with self.lock:
                        if not queue_:
                            return
                        case = queue_.pop(0)
                    self._replay_case(child, case, scratch)
            finally:
                child.close()

        self._threads(worker)
        self.report.seconds += time.monotonic() - started
        return self.report

    def _threads(self, worker: Callable[[int], None]) -> None:
        errors = []

        def guarded(j: int) -> None:
            try:
                worker(j)
            except BaseException as error:  # noqa: BLE001
                import traceback

                errors.append(traceback.format_exc())

        threads = [threading.Thread(target=guarded, args=(j,), daemon=True) for j in range(self.jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError("a fuzz worker failed:\n" + errors[0])

    def fuzz(self, seconds: float, seed: int, max_mutants: int | None = None, max_ops: int = 4,
             seeds: list[str] | None = None) -> Report:
        self.report.seed = seed
        started = time.monotonic()
        deadline = self.deadline = started + seconds
        counter = itertools.count()
        names = sorted(seeds or self.metas)
        unknown = [n for n in names if n not in self.metas]
        if unknown:
            raise ValueError(f"no seed named {', '.join(unknown)}; seeds: {', '.join(sorted(self.metas))}")
        weights = [self.metas[n].get("weight", 1.0) for n in names]
        last_log = [started]

        def worker(j: int) -> None:
            child = self._child(f"worker{j}")
            folder = str(self.work / f"w{j}" / "mutant")
            scratch = str(self.work / f"w{j}" / "scratch")
            os.makedirs(os.path.dirname(folder), exist_ok=True)
            try:
                while time.monotonic() < deadline:
                    with self.lock:
                        k = next(counter)
                    if max_mutants is not None and k >= max_mutants:
                        return
                    rng = random.Random(f"{seed}:{k}")
                    name = rng.choices(names, weights)[0]
                    meta = self.metas[name]
                    recipe = mutators.generate(meta, str(self.corpus_dir / name), folder, rng, max_ops)
                    recipe["run_seed"], recipe["mutant"] = seed, k
                    combos = self.combos if k % self.remote_every == 0 else self.local_combos
                    task = self._task(f"m{k}", folder, meta, self.pairs(meta, combos), k, f"w{j}")
                    results, _, oracle = self.evaluate(child, task)
                    findings = self._findings(results, recipe, f"mutant {k}")
                    with self.lock:
                        self.report.mutants += 1
                        self.report.by_seed[name] += 1
                        for op in recipe["ops"]:
                            self.report.by_op[op["op"]] += 1
                        self.report.oracle_open[(oracle or {}).get("oracle_error") or "opens"] += 1
                        self.report.add_results(results)
                        now = time.monotonic()
                        if now - last_log[0] > 30:
                            last_log[0] = now
                            self.log(f"{self.report.mutants} mutants, {now - started:.0f} s, "
                                     f"{dict(self.report.by_class)}")
                    self.handle(findings, scratch)
            finally:
                child.close()

        self._threads(worker)
        self.report.seconds += time.monotonic() - started
        return self.report

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
        if self.own_work:
            shutil.rmtree(self.work, ignore_errors=True)


def run(seconds: float = 60, seed: int = 0, *, jobs: int = 2, remote: bool = False,
        max_mutants: int | None = None, work_dir: str | os.PathLike | None = None,
        replay_first: bool = True, seeds: list[str] | None = None, **kwargs: Any) -> Report:
    """Replays the regressions, then fuzzes for `seconds` (or `max_mutants`)."""
    fuzzer = Fuzzer(work_dir, jobs=jobs, remote=remote, **kwargs)
    try:
        if replay_first:
            fuzzer.replay()
        return fuzzer.fuzz(seconds, seed, max_mutants, seeds=seeds)
    finally:
        fuzzer.close()


def replay(*, jobs: int = 2, remote: bool = False, work_dir: str | os.PathLike | None = None,
           **kwargs: Any) -> Report:
    fuzzer = Fuzzer(work_dir, jobs=jobs, remote=remote, **kwargs)
    try:
        return fuzzer.replay()
    finally:
        fuzzer.close()
