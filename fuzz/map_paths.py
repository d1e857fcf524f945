"""The read paths of sackli.maps, each judged against map_oracle.

A map mutant (a seed of kind "map" or "intmap": one `.mb` / `.im` file) is
read through every path with every *source* sackli.maps takes: the path
(mapped by the engine), the file's bytes, an open file object, and an object
that only answers `obj[a:b]` (values fetched by ranges); MapBuffers with
crc32c checks on and off.

Rules (see docs/fuzzing.md, "Maps"):
  lookups   mb[key], get, `in`: one of the oracle's acceptable answers (in a
            well-ordered index exactly the key's value or absent); an error
            only where the answer is one.
  batches   get_many (a list, a uint64 array), todict(): an error when some
            key has only errors for answers, else an acceptable answer each.
  scans     keys(), items(), values(): the index order; items and values read
            a batch at a time, so an error may come before the first bad value
            but the values yielded must be right.
  validate  raises exactly when the index is out of order or an extent is bad.
  sizes     datasize() and size(key): the oracle's sizes; datasize() of an
            object without __len__ is a TypeError naming it.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import Any, Callable

from .map_oracle import ABSENT, OracleMap, open_map
from .oracle import OracleError
from .paths import MAX_CALLS, Judge, Raised, _iterate, capture, judge_read_ahead

__all__ = ["MAP_KINDS", "MAP_PATHS", "MapContext", "evaluate_pair", "map_combos", "open_oracle",
           "size_known"]

# The seed kinds these paths read.
MAP_KINDS = ("map", "intmap")

_MISSING = object()  # the default passed to get / get_many
_COMPRESS_NAMES = {"none": None, "gzip": "gzip", "00br": "br", "zstd": "zstd", "lzma": "lzma"}


class Slices:
    """A map held by an object that only answers obj[a:b] with bytes (how
    `mapbuffer` users wrap remote files)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __getitem__(self, window: slice) -> bytes:
        return self._data[window]


@dataclass(frozen=True)
class MapCombo:
    kind: str  # "map" or "intmap"
    source: str  # "path", "bytes", "file", "slices" or "remote" (s3://, the fuzzer's moto)
    check_crc: bool = True

    @property
    def key(self) -> str:
        # Remote keys start with "remote/", as the bags' do: the runner
        # uploads the mutant for them, and reads them every few mutants.
        head = f"remote/{self.kind}" if self.source == "remote" else f"{self.kind}/{self.source}"
        return head + ("" if self.check_crc else "/nocrc")

    @classmethod
    def from_key(cls, key: str) -> "MapCombo":
        parts = key.split("/")
        if parts[0] == "remote":
            return cls(parts[1], "remote", len(parts) < 3)
        return cls(parts[0], parts[1], len(parts) < 3)


def map_combos(kind: str, remote: bool = False) -> list[str]:
    """The option sets a map of `kind` is read with (`remote`: s3:// too)."""
    sources = ["path", "bytes", "slices"] if kind == "intmap" else ["path", "bytes", "file", "slices"]
    sources += ["remote"] if remote else []
    crcs = (True,) if kind == "intmap" else (True, False)
    return [MapCombo(kind, source, crc).key for source in sources for crc in crcs]


class MapContext:
    """What a map path needs: the file, the combo, the oracle, an RNG."""

    def __init__(self, path: str, combo: MapCombo, oracle: OracleMap | OracleError,
                 seed: int, url: str | None = None) -> None:
        self.path = path
        self.url = url  # the uploaded copy, for the remote source
        self.combo = combo
        self.oracle = oracle
        self.rng = random.Random(seed)
        self._files: list[Any] = []

    def open(self) -> Any:
        """A fresh sackli map over the file, from this combo's source."""
        import sackli.maps

        source: Any = self.path
        if self.combo.source == "remote":
            source = self.url
        elif self.combo.source == "file":
            source = open(self.path, "rb")
            self._files.append(source)
        elif self.combo.source in ("bytes", "slices"):
            with open(self.path, "rb") as file:
                data = file.read()
            source = Slices(data) if self.combo.source == "slices" else data
        if self.combo.kind == "intmap":
            return sackli.maps.IntMap(source)
        return sackli.maps.MapBuffer(source, check_crc=self.combo.check_crc)

    def close(self) -> None:
        for file in self._files:
            file.close()

    def answers(self, key: int) -> list[Any]:
        assert isinstance(self.oracle, OracleMap)
        return self.oracle.lookup(key, self.combo.check_crc)

    def outcomes(self) -> list[Any]:
        assert isinstance(self.oracle, OracleMap)
        return [self.oracle.outcome(p, self.combo.check_crc) for p in range(len(self.oracle))]

    def probe_keys(self) -> list[int]:
        """Keys of the index (at most MAX_CALLS) and keys it lacks."""
        assert isinstance(self.oracle, OracleMap)
        keys = list(dict.fromkeys(self.oracle.keys))[:MAX_CALLS]
        absent = [0, 1, 2**63, 2**64 - 1, self.rng.getrandbits(64)]
        absent += [k + 1 for k in keys[:3] if k + 1 < 2**64]
        return keys + absent


# --- judging --------------------------------------------------------------------------------


def _as_answer(actual: Any) -> Any:
    """A lookup's outcome as the oracle writes answers: KeyError and the
    default are ABSENT."""
    if actual is _MISSING or (isinstance(actual, Raised) and actual.type == "KeyError"):
        return ABSENT
    return actual


def _is_answer(actual: Any, answers: list[Any]) -> bool:
    return any(actual is answer if answer is ABSENT else
               (not isinstance(answer, OracleError) and type(actual) is type(answer)
                and actual == answer) for answer in answers)


def _judge_error(judge: Judge, call: str, answer_sets: list[list[Any]], actual: Raised) -> None:
    """`actual` raised: right when some key's answers include that error."""
    kinds = {a.kind for answers in answer_sets for a in answers if isinstance(a, OracleError)}
    if kinds:
        judge.error(call, kinds, actual)
    else:
        judge.raised_for_data(call, answer_sets[0][0] if answer_sets else None, actual)


def judge_lookup(judge: Judge, call: str, answers: list[Any], actual: Any) -> None:
    actual = _as_answer(actual)
    if _is_answer(actual, answers):
        judge.agree(call)
    elif isinstance(actual, Raised):
        _judge_error(judge, call, [answers], actual)
    else:
        judge.fail("mismatch", call, "not one of the acceptable answers", answers, actual)


def judge_batch(judge: Judge, call: str, answer_sets: list[list[Any]], actual: Any) -> None:
    if isinstance(actual, Raised):
        _judge_error(judge, call, answer_sets, actual)
        return
    if not isinstance(actual, list) or len(actual) != len(answer_sets):
        judge.fail("mismatch", call, f"not a list of {len(answer_sets)} values", None, actual)
        return
    for k, (answers, got) in enumerate(zip(answer_sets, actual)):
        if not _is_answer(_as_answer(got), answers):
            judge.fail("mismatch", call, f"position {k}: not one of the acceptable answers",
                       answers, got)
            return
    judge.agree(call)


def _judge_scan(judge: Judge, call: str, expected: list[Any], yielded: list[Any],
                error: Raised | None) -> None:
    """A scan in index order (see judge_read_ahead): the error is the first bad value's."""
    first_bad = next((e for e in expected if isinstance(e, OracleError)), None)
    judge_read_ahead(judge, call, expected, yielded, error, [first_bad.kind] if first_bad else [],
                     lambda got, want: _is_answer(got, [want]))


# --- the paths ------------------------------------------------------------------------------


def m_open(ctx: MapContext, judge: Judge) -> None:
    """Opening the map (paths open at once, buffers on first use) and len()."""
    mapped = capture(ctx.open)
    length = mapped if isinstance(mapped, Raised) else capture(lambda: len(mapped))
    if isinstance(ctx.oracle, OracleError):
        judge.error("open, len(m)", [ctx.oracle.kind], length, expected=ctx.oracle)
        return
    judge.value("open, len(m)", len(ctx.oracle), length)
    if isinstance(length, Raised) or ctx.combo.kind == "intmap":
        return
    judge.value("m.format_version", ctx.oracle.version, capture(lambda: mapped.format_version))
    judge.value("m.compress", _COMPRESS_NAMES[ctx.oracle.compression],
                capture(lambda: mapped.compress))


def m_lookup(ctx: MapContext, judge: Judge) -> None:
    """m[key], m.get(key, default) and `key in m` for every key and absent ones."""
    mapped = ctx.open()
    for key in ctx.probe_keys():
        answers = ctx.answers(key)
        judge_lookup(judge, f"m[{key}]", answers, capture(lambda: mapped[key]))
        judge_lookup(judge, f"m.get({key})", answers, capture(lambda: mapped.get(key, _MISSING)))
        present = {answer is not ABSENT for answer in answers}
        contains = capture(lambda: key in mapped)
        if contains in present:
            judge.agree(f"{key} in m")
        else:
            judge.fail("mismatch", f"{key} in m", "wrong answer", sorted(present), contains)


def m_get_many(ctx: MapContext, judge: Judge) -> None:
    """get_many of the keys (shuffled, repeated, absent ones mixed in) as a
    list and as a uint64 array."""
    if ctx.combo.kind == "intmap":
        return
    mapped = ctx.open()
    keys = ctx.probe_keys()
    ctx.rng.shuffle(keys)
    keys += keys[: ctx.rng.randint(0, 3)]
    answer_sets = [ctx.answers(key) for key in keys]
    judge_batch(judge, "get_many(list)", answer_sets,
                capture(lambda: mapped.get_many(keys, default=_MISSING)))
    try:
        import numpy
    except ImportError:
        return
    array = numpy.array(keys, dtype=numpy.uint64)
    judge_batch(judge, "get_many(uint64 array)", answer_sets,
                capture(lambda: mapped.get_many(array, default=_MISSING)))


def m_scan(ctx: MapContext, judge: Judge) -> None:
    """keys(), iteration, items(), values() and todict(), in index order."""
    assert isinstance(ctx.oracle, OracleMap)
    mapped = ctx.open()
    keys = list(ctx.oracle.keys)
    judge.value("list(m.keys())", keys, capture(lambda: list(mapped.keys())))
    judge.value("list(m)", keys, capture(lambda: list(mapped)))
    expected = ctx.outcomes()
    pairs, error = _iterate(mapped.items)
    if [key for key, _ in pairs] != keys[:len(pairs)]:
        judge.fail("mismatch", "m.items()", "wrong keys", keys, [key for key, _ in pairs])
    else:
        _judge_scan(judge, "m.items()", expected, [value for _, value in pairs], error)
    values, error = _iterate(mapped.values)
    _judge_scan(judge, "m.values()", expected, values, error)
    todict = capture(mapped.todict)
    if isinstance(todict, Raised):
        judge_batch(judge, "m.todict()", [[e] for e in expected], todict)
    else:
        bad = next((e for e in expected if isinstance(e, OracleError)), None)
        want = bad if bad is not None else dict(zip(keys, expected))
        judge.value("m.todict()", want, todict)


def m_validate(ctx: MapContext, judge: Judge) -> None:
    """validate(): the index's order and every value's extent."""
    assert isinstance(ctx.oracle, OracleMap)
    mapped = ctx.open()
    expected = ctx.oracle.structure_error()
    judge.value("m.validate()", True if expected is None else expected, capture(mapped.validate))


def m_sizes(ctx: MapContext, judge: Judge) -> None:
    """datasize() and size(key) of the index's keys and absent ones."""
    assert isinstance(ctx.oracle, OracleMap)
    if ctx.combo.kind == "intmap":
        return
    mapped = ctx.open()
    datasize = capture(mapped.datasize)
    if ctx.oracle.size_known:
        judge.value("m.datasize()", len(ctx.oracle.data) - ctx.oracle.data_offset, datasize)
    elif isinstance(datasize, Raised) and datasize.type == "TypeError" and judge.names_a_file(datasize):
        judge.agree("m.datasize()")  # the size is unknown: a clear error, naming the map
    else:
        judge.fail("mismatch", "m.datasize()", "want a TypeError naming the map (size unknown)",
                   None, datasize)
    for key in ctx.probe_keys():
        judge_lookup(judge, f"m.size({key})", ctx.oracle.size_answers(key),
                     capture(lambda: mapped.size(key)))


MAP_PATHS: dict[str, Callable[[MapContext, Judge], None]] = {
    "map_open": m_open,
    "map_lookup": m_lookup,
    "map_get_many": m_get_many,
    "map_scan": m_scan,
    "map_validate": m_validate,
    "map_sizes": m_sizes,
}


def size_known(combo_key: str) -> bool:
    """Whether the combo's source tells sackli the map's size (slices do not)."""
    return MapCombo.from_key(combo_key).source != "slices"


def evaluate_pair(folder: str, meta: dict, oracle: OracleMap | OracleError, combo_key: str,
                  path: str, seed: int, remote_prefix: str | None = None) -> Judge:
    """Runs one (combo, path) pair of a map mutant against `oracle` (opened
    with the combo's size_known); the judge holds the verdict."""
    file = os.path.join(folder, meta["files"][0])
    url = f"{remote_prefix}/{meta['files'][0]}" if remote_prefix else None
    combo = MapCombo.from_key(combo_key)
    ctx = MapContext(file, combo, oracle, seed, url)
    judge = Judge([file, "<bytes>", f"<{Slices.__name__}>"] + ([url] if url else []))
    try:
        MAP_PATHS[path](ctx, judge)
    finally:
        ctx.close()
    return judge


def open_oracle(folder: str, meta: dict, known_size: bool = True) -> OracleMap | OracleError:
    return open_map(os.path.join(folder, meta["files"][0]), meta["kind"] == "intmap", known_size)

