"""Every read path of sackli, each judged against the oracle.

A *path* is a function `path(ctx, judge)` that opens a fresh sackli.Reader
with the context's options, reads through one API and tells the judge each
call's expected and actual outcome. The judge classifies every call:

  agree            same bytes, or the same error class, as the oracle
  clean_exception  sackli raised a clean exception (named file, expected
                   type) where the oracle had data
  mismatch         anything else: other bytes, bytes where the oracle says
                   corrupt, another error class, an error that names no file
                   of the bag, an unexpected exception type, an iteration
                   that stops before the first corrupt record

The class of a (path, options) pair is the worst of its calls. Crashes and
hangs are seen by the runner (the child process dies or times out).

Rules (see docs/fuzzing.md):
  single reads  r[i], view[j]: the oracle's record or error.
  batch reads   read, read_range, read_indices, view.read, pickled views,
                Index builds, Arrow tables: a corruption error if any
                requested record is corrupt, else exactly the records.
  iteration     iter, reversed, read_range_iter, read_indices_iter: every
                record yielded equals the oracle's at its position, and the
                error comes exactly at the first corrupt record.
  streams       Arrow batches and the Beam source read whole batches: the
                rows yielded are a correct prefix; an error may come up to
                one batch (Arrow) or one offsets chunk (Beam) early; earlier
                than that is a clean_exception.
  scans         index / in / count decode only records of the probe's size,
                so any answer given must be right for the good records, and
                a corruption error needs a corrupt record in the bag.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from .oracle import OracleBag, OracleError, open_bag

__all__ = ["CLASSES", "PATHS", "Combo", "Context", "Judge", "all_combos", "error_kind",
           "judge_read_ahead"]

CLASSES = ("agree", "clean_exception", "mismatch", "hang", "crash")
# Paths that make one call per record look at this many records at most (a
# damaged trailer can make a bag of 100,000s of records).
MAX_CALLS = 1500
_RANK = {c: k for k, c in enumerate(CLASSES)}
MAX_FAILURES = 6


@dataclass(frozen=True)
class Combo:
    """One set of reader options."""

    cache_policy: str = "SYSTEM"
    limits_storage: str = "ON_DISK"
    max_parallelism: int = 1
    remote: bool = False

    @property
    def key(self) -> str:
        where = "remote" if self.remote else self.cache_policy
        return f"{where}/{self.limits_storage}/p{self.max_parallelism}"

    @classmethod
    def from_key(cls, key: str) -> "Combo":
        where, storage, parallelism = key.split("/")
        remote = where == "remote"
        return cls("SYSTEM" if remote else where, storage, int(parallelism[1:]), remote)


def all_combos(remote: bool = False, direct_io: bool = True) -> list[Combo]:
    """Every local option combination (and the remote ones)."""
    policies = ["SYSTEM", "DROP_AFTER_READ"] + (["DIRECT_IO"] if direct_io else [])
    combos = [Combo(policy, storage, parallelism)
              for policy in policies for storage in ("ON_DISK", "IN_MEMORY") for parallelism in (1, 2)]
    if remote:
        combos += [Combo("SYSTEM", storage, parallelism, True)
                   for storage in ("ON_DISK", "IN_MEMORY") for parallelism in (1, 2)]
    return combos


def error_kind(error: BaseException) -> str:
    """The class of an exception sackli raised (see oracle.KINDS), or
    "unexpected:<type>"."""
    import sackli

    if isinstance(error, sackli.CorruptionError):
        return "corrupt"
    if isinstance(error, FileNotFoundError):
        return "not_found"
    if isinstance(error, IndexError):
        return "index"
    if isinstance(error, ValueError):
        return "invalid"
    if isinstance(error, OSError):
        return "os"
    return "unexpected:" + type(error).__name__


class Raised:
    """An exception sackli raised, as an outcome."""

    def __init__(self, error: BaseException) -> None:
        self.kind = error_kind(error)
        self.type = type(error).__name__
        self.message = str(error)

    def __repr__(self) -> str:
        return f"{self.type}({self.message[:200]!r})"


def capture(fn: Callable[[], Any]) -> Any:
    """fn()'s value, or a Raised."""
    try:
        return fn()
    except Exception as error:  # noqa: BLE001 - every exception is an outcome
        return Raised(error)


def short(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value)
        if len(value) <= 24:
            return repr(value)
        return f"<{len(value)} bytes {value[:12].hex()}.. sha1 {hashlib.sha1(value).hexdigest()[:10]}>"
    if isinstance(value, OracleError):
        return f"oracle:{value.kind}({value.message[:120]})"
    if isinstance(value, list):
        inner = ", ".join(short(v) for v in value[:4])
        return f"[{inner}{', ...' if len(value) > 4 else ''}] ({len(value)})"
    return repr(value)[:200]


class Judge:
    """Collects the calls of one (path, options) pair and their classes."""

    def __init__(self, files: Sequence[str]) -> None:
        self.files = list(files)
        self.calls = 0
        self.cls = "agree"
        self.counts: dict[str, int] = {}
        self.failures: list[dict] = []

    def _note(self, cls: str, call: str, sub: str = "", expected: Any = None, actual: Any = None) -> None:
        self.calls += 1
        self.counts[cls] = self.counts.get(cls, 0) + 1
        if _RANK[cls] > _RANK[self.cls]:
            self.cls = cls
        if cls != "agree" and len(self.failures) < MAX_FAILURES:
            self.failures.append({"class": cls, "call": call, "sub": sub,
                                  "expected": short(expected), "actual": short(actual)})

    def agree(self, call: str) -> None:
        self._note("agree", call)

    def fail(self, cls: str, call: str, sub: str, expected: Any = None, actual: Any = None) -> None:
        self._note(cls, call, sub, expected, actual)

    # --- errors ------------------------------------------------------------

    def names_a_file(self, raised: Raised) -> bool:
        return any(f in raised.message for f in self.files)

    def error(self, call: str, expected_kinds: Iterable[str], actual: Any, have_data: bool = False,
              expected: Any = None) -> None:
        """`actual` should be an error of one of `expected_kinds` (or, with
        have_data, it is a disagreement of its own kind)."""
        kinds = set(expected_kinds)
        if not isinstance(actual, Raised):
            self.fail("mismatch", call, "data where the oracle has an error", expected, actual)
            return
        if actual.kind.startswith("unexpected:"):
            self.fail("mismatch", call, "unexpected exception type", expected, actual)
            return
        if actual.kind != "index" and not self.names_a_file(actual):
            self.fail("mismatch", call, "error names no file of the bag", expected, actual)
            return
        if actual.kind in kinds:
            self.agree(call)
            return
        self.fail("mismatch", call, f"wrong error class {actual.kind} (want {'/'.join(sorted(kinds))})",
                  expected, actual)

    def raised_for_data(self, call: str, expected: Any, actual: Raised) -> None:
        """sackli raised where the oracle had data."""
        if actual.kind.startswith("unexpected:"):
            self.fail("mismatch", call, "unexpected exception type", expected, actual)
        elif actual.kind != "index" and not self.names_a_file(actual):
            self.fail("mismatch", call, "error names no file of the bag", expected, actual)
        elif actual.kind == "index":
            self.fail("mismatch", call, "IndexError for a valid index", expected, actual)
        else:
            self.fail("clean_exception", call, f"{actual.kind} where the oracle has data", expected, actual)

    # --- the rules -----------------------------------------------------------

    def value(self, call: str, expected: Any, actual: Any) -> None:
        """A plain value (len, an index, a bool), or an expected error."""
        if isinstance(expected, OracleError):
            self.error(call, [expected.kind], actual, expected=expected)
        elif isinstance(actual, Raised):
            self.raised_for_data(call, expected, actual)
        elif actual == expected and type(actual) is type(expected):
            self.agree(call)
        else:
            self.fail("mismatch", call, "wrong value", expected, actual)

    def record(self, call: str, expected: bytes | OracleError, actual: Any) -> None:
        if isinstance(expected, OracleError):
            self.error(call, [expected.kind], actual, expected=expected)
        elif isinstance(actual, Raised):
            self.raised_for_data(call, expected, actual)
        elif type(actual) is not bytes:
            self.fail("mismatch", call, f"a {type(actual).__name__}, not bytes", expected, actual)
        elif actual != expected:
            self.fail("mismatch", call, "wrong bytes", expected, actual)
        else:
            self.agree(call)

    def batch(self, call: str, expected: list | OracleError, actual: Any) -> None:
        """A batch: an error if any record is one, else the exact records."""
        if isinstance(expected, list):
            errors = [e for e in expected if isinstance(e, OracleError)]
            if errors:
                self.error(call, [errors[0].kind], actual, expected=errors[0])
                return
        if isinstance(expected, OracleError):
            self.error(call, [expected.kind], actual, expected=expected)
        elif isinstance(actual, Raised):
            self.raised_for_data(call, expected, actual)
        elif not isinstance(actual, list) or any(type(a) is not bytes for a in actual):
            self.fail("mismatch", call, "not a list of bytes", expected, actual)
        elif len(actual) != len(expected):
            self.fail("mismatch", call, f"{len(actual)} records, want {len(expected)}", expected, actual)
        elif actual != expected:
            k = next(k for k in range(len(actual)) if actual[k] != expected[k])
            self.fail("mismatch", call, f"wrong bytes at position {k}", expected[k], actual[k])
        else:
            self.agree(call)

    def iteration(self, call: str, expected: list, yielded: list, error: Raised | None,
                  slack: int = 0, slack_class: str = "mismatch") -> None:
        """An iteration: records equal the oracle's at their position, the
        error comes at the first corrupt record. `slack`: how many positions
        early an error may come (a batch); earlier is `slack_class`."""
        first_bad = next((k for k, e in enumerate(expected) if isinstance(e, OracleError)), None)
        for k, got in enumerate(yielded):
            if k >= len(expected):
                self.fail("mismatch", call, f"yielded more than {len(expected)} records", None, got)
                return
            want = expected[k]
            if isinstance(want, OracleError):
                self.fail("mismatch", call, f"yielded a record at corrupt position {k}", want, got)
                return
            if type(got) is not bytes or got != want:
                self.fail("mismatch", call, f"wrong bytes at position {k}", want, got)
                return
        m = len(yielded)
        if error is None:
            if first_bad is not None:
                self.fail("mismatch", call, f"no error; position {first_bad} is corrupt", expected[first_bad], m)
            elif m != len(expected):
                self.fail("mismatch", call, f"stopped after {m} of {len(expected)} records", len(expected), m)
            else:
                self.agree(call)
            return
        if first_bad is None:
            self.raised_for_data(call + f" (after {m})", expected[m] if m < len(expected) else None, error)
            return
        if m == first_bad:
            self.error(call, [expected[first_bad].kind], error, expected=expected[first_bad])
            return
        if error.kind.startswith("unexpected:") or (error.kind != "index" and not self.names_a_file(error)):
            self.error(call, [expected[first_bad].kind], error, expected=expected[first_bad])
            return
        if m >= first_bad - slack and error.kind == expected[first_bad].kind:
            self.agree(call)
            return
        self.fail(slack_class, call, f"error after {m} records; first corrupt at {first_bad}",
                  expected[first_bad], error)


# --- Context: the mutant, the oracle and the reader's options ---------------------------------


class Context:
    """What a path needs: the bag's spec and options, the oracle, an RNG."""

    def __init__(self, spec: str, meta: dict, combo: Combo, oracle: OracleBag | OracleError,
                 dictionary: bytes | None, files: list[str], seed: int,
                 local_paths: list[str] | None = None, beam_paths: list[str] | None = None) -> None:
        self.spec = spec
        self.meta = meta
        self.combo = combo
        self.oracle = oracle
        self.dictionary = dictionary
        self.files = files
        self.rng = random.Random(seed)
        self.local_paths = local_paths or []
        self.beam_paths = beam_paths or []

    def options(self, **extra: Any) -> Any:
        import sackli

        mode = self.meta["compression"]
        compression = (sackli.CompressionNone() if mode == "none" else
                       sackli.CompressionZstd(dictionary=self.dictionary or b"") if mode == "zstd" else
                       sackli.CompressionAutoDetect())
        fields = dict(
            sharding_layout=self.meta["layout"], limits_placement=self.meta["placement"],
            compression=compression, limits_storage=self.combo.limits_storage,
            max_parallelism=self.combo.max_parallelism, cache_policy=self.combo.cache_policy,
        )
        fields.update(extra)
        return sackli.Reader.Options(**fields)

    def open(self, **extra: Any) -> Any:
        import sackli

        return sackli.Reader(self.spec, self.options(**extra))

    @property
    def n(self) -> int:
        return len(self.oracle)  # type: ignore[arg-type]

    def expected(self, indices: Iterable[int]) -> list:
        return [self.oracle.outcome(g) for g in indices]  # type: ignore[union-attr]

    # --- parameters -------------------------------------------------------

    def slices(self, count: int = 3) -> list[slice]:
        n = self.n
        out = [slice(None, None, -1)]
        for _ in range(count - 1):
            step = self.rng.choice([1, 1, 2, 3, -1, -2, 5])
            a = self.rng.choice([None, self.rng.randint(-n - 2, n + 2)])
            b = self.rng.choice([None, self.rng.randint(-n - 2, n + 2)])
            out.append(slice(a, b, step))
        return out

    def some(self, indices: Sequence[int]) -> list[int]:
        """All of `indices`, or MAX_CALLS of them (both ends and a sample)."""
        indices = list(indices)
        if len(indices) <= MAX_CALLS:
            return indices
        third = MAX_CALLS // 3
        middle = indices[third:-third]
        return indices[:third] + sorted(self.rng.sample(middle, third)) + indices[-third:]

    def index_list(self) -> list[int]:
        n = self.n
        if n == 0:
            return []
        size = min(2 * n, 40)
        out = [self.rng.randrange(-n, n) for _ in range(size)]
        out += out[: self.rng.randint(0, 3)]  # repeats
        return out


# --- The paths ----------------------------------------------------------------------


def _norm(indices: Iterable[int], n: int) -> list[int]:
    return [i + n if i < 0 else i for i in indices]


def judge_read_ahead(judge: Judge, call: str, expected: list, yielded: list, error: Raised | None,
                     kinds: Iterable[str], same: Callable[[Any, Any], bool]) -> None:
    """An iteration that reads ahead a batch at a time (`expected`: values,
    or OracleErrors at bad positions): each value yielded is the one
    expected there (`same(got, want)`); the error comes no later than the
    first bad position (earlier is a batch), of one of `kinds`, and only if
    a position is bad."""
    first_bad = next((k for k, e in enumerate(expected) if isinstance(e, OracleError)), None)
    for k, got in enumerate(yielded):
        want = expected[k] if k < len(expected) else None
        if k >= len(expected) or isinstance(want, OracleError) or not same(got, want):
            judge.fail("mismatch", call, f"wrong value at position {k}", want, got)
            return
    if error is None:
        if first_bad is not None:
            judge.fail("mismatch", call, f"no error; position {first_bad} is bad",
                       expected[first_bad], len(yielded))
        elif len(yielded) != len(expected):
            judge.fail("mismatch", call, f"{len(yielded)} of {len(expected)} values",
                       len(expected), len(yielded))
        else:
            judge.agree(call)
    elif first_bad is None:
        judge.raised_for_data(call, expected[len(yielded)] if len(yielded) < len(expected) else None,
                              error)
    else:
        judge.error(call, kinds, error, expected=expected[first_bad])


def _iterate(iterator_factory: Callable[[], Any]) -> tuple[list, Raised | None]:
    """Pulls records one by one: (yielded, the error that stopped it)."""
    yielded = []
    try:
        iterator = iterator_factory()
        for item in iterator:
            yielded.append(item)
    except Exception as error:  # noqa: BLE001
        return yielded, Raised(error)
    return yielded, None


def p_open(ctx: Context, judge: Judge) -> None:
    """Opening the bag, len() and the shard sizes."""
    reader = capture(ctx.open)
    if isinstance(ctx.oracle, OracleError):
        kinds = getattr(ctx.oracle, "alternatives", [ctx.oracle.kind])
        judge.error("open", kinds, reader, expected=ctx.oracle)
        return
    if isinstance(reader, Raised):
        judge.raised_for_data("open", f"a bag of {ctx.n} records", reader)
        return
    judge.value("len(r)", ctx.n, capture(lambda: len(reader)))
    judge.value("r.shard_sizes", list(ctx.oracle.sizes), capture(lambda: list(reader.shard_sizes)))
    judge.value("len(r[::2])", len(range(ctx.n)[::2]), capture(lambda: len(reader[::2])))


def p_getitem(ctx: Context, judge: Judge) -> None:
    r = ctx.open()
    n = ctx.n
    for i in ctx.some(range(n)):
        judge.record(f"r[{i}]", ctx.oracle.outcome(i), capture(lambda: r[i]))
    for i in ctx.some(range(-n, 0)):
        judge.record(f"r[{i}]", ctx.oracle.outcome(i), capture(lambda: r[i]))
    for i in (n, -n - 1, n + 7):
        judge.error(f"r[{i}]", ["index"], capture(lambda: r[i]))


def p_view_getitem(ctx: Context, judge: Judge) -> None:
    r = ctx.open()
    for s in ctx.slices():
        chosen = list(range(ctx.n))[s]
        view = capture(lambda: r[s])
        if isinstance(view, Raised):
            judge.raised_for_data(f"r[{s}]", "a view", view)
            continue
        judge.value(f"len(r[{s}])", len(chosen), capture(lambda: len(view)))
        for j in ctx.some(range(len(chosen))):
            judge.record(f"r[{s}][{j}]", ctx.oracle.outcome(chosen[j]), capture(lambda: view[j]))
        inner = chosen[::2]
        nested = capture(lambda: view[::2])
        if not isinstance(nested, Raised):
            for j in ctx.some(range(len(inner))):
                judge.record(f"r[{s}][::2][{j}]", ctx.oracle.outcome(inner[j]), capture(lambda: nested[j]))


def p_view_read(ctx: Context, judge: Judge) -> None:
    r = ctx.open()
    for s in ctx.slices():
        chosen = list(range(ctx.n))[s]
        judge.batch(f"r[{s}].read()", ctx.expected(chosen), capture(lambda: r[s].read()))
        judge.batch(f"r[{s}][1:].read()", ctx.expected(chosen[1:]), capture(lambda: r[s][1:].read()))


def p_read(ctx: Context, judge: Judge) -> None:
    r = ctx.open()
    judge.batch("r.read()", ctx.expected(range(ctx.n)), capture(r.read))


def p_read_range(ctx: Context, judge: Judge) -> None:
    r = ctx.open()
    n = ctx.n
    ranges = [(0, n), (0, 0)]
    for _ in range(3):
        start = ctx.rng.randint(0, n)
        ranges.append((start, ctx.rng.randint(0, n - start)))
    for start, count in ranges:
        judge.batch(f"r.read_range({start}, {count})", ctx.expected(range(start, start + count)),
                    capture(lambda: r.read_range(start, count)))
    judge.error(f"r.read_range({n}, 1)", ["index"], capture(lambda: r.read_range(n, 1)))


def p_read_range_iter(ctx: Context, judge: Judge) -> None:
    r = ctx.open()
    n = ctx.n
    for read_ahead in (None, 1, 3):
        judge.iteration(f"r.read_range_iter(0, {n}, read_ahead={read_ahead})", ctx.expected(range(n)),
                        *_iterate(lambda: r.read_range_iter(0, n, read_ahead=read_ahead)))
    start = ctx.rng.randint(0, n)
    count = ctx.rng.randint(0, n - start)
    judge.iteration(f"r.read_range_iter({start}, {count})", ctx.expected(range(start, start + count)),
                    *_iterate(lambda: r.read_range_iter(start, count, read_ahead=2)))


def p_read_indices(ctx: Context, judge: Judge) -> None:
    r = ctx.open()
    n = ctx.n
    indices = ctx.index_list()
    judge.batch(f"r.read_indices({indices})", ctx.expected(_norm(indices, n)),
                capture(lambda: r.read_indices(indices)))
    judge.batch("r.read_indices(tuple)", ctx.expected(_norm(indices, n)),
                capture(lambda: r.read_indices(tuple(indices))))
    judge.batch(f"r.read_indices(range({n}))", ctx.expected(range(n)), capture(lambda: r.read_indices(range(n))))
    judge.batch("r.read_indices(slice(None, None, -1))", ctx.expected(range(n - 1, -1, -1)),
                capture(lambda: r.read_indices(slice(None, None, -1))))
    judge.batch("r.read_indices([])", [], capture(lambda: r.read_indices([])))
    if n:
        judge.error(f"r.read_indices([0, {n}])", ["index"], capture(lambda: r.read_indices([0, n])))


def p_read_indices_numpy(ctx: Context, judge: Judge) -> None:
    import numpy as np

    r = ctx.open()
    n = ctx.n
    indices = ctx.index_list()
    for dtype in ("int64", "int32", "int16"):
        if n > np.iinfo(dtype).max:
            continue
        array = np.array(indices, dtype=dtype)
        judge.batch(f"r.read_indices(np.array({dtype}))", ctx.expected(_norm(indices, n)),
                    capture(lambda: r.read_indices(array)))
    positive = _norm(indices, n)
    for dtype in ("uint64", "uint32"):
        array = np.array(positive, dtype=dtype)
        judge.batch(f"r.read_indices(np.array({dtype}))", ctx.expected(positive),
                    capture(lambda: r.read_indices(array)))
    strided = np.arange(n, dtype=np.int64)[::-2]
    judge.batch("r.read_indices(np.arange(n)[::-2])", ctx.expected(strided.tolist()),
                capture(lambda: r.read_indices(strided)))


def p_read_indices_iter(ctx: Context, judge: Judge) -> None:
    r = ctx.open()
    n = ctx.n
    indices = ctx.index_list()
    for read_ahead in (None, 1, 4):
        judge.iteration(f"r.read_indices_iter({indices}, read_ahead={read_ahead})",
                        ctx.expected(_norm(indices, n)),
                        *_iterate(lambda: r.read_indices_iter(indices, read_ahead=read_ahead)))
    judge.iteration("r.read_indices_iter(generator)", ctx.expected(range(n)),
                    *_iterate(lambda: r.read_indices_iter(iter(range(n)), read_ahead=3)))


def p_iter(ctx: Context, judge: Judge) -> None:
    r = ctx.open()
    judge.iteration("iter(r)", ctx.expected(range(ctx.n)), *_iterate(lambda: iter(r)))
    judge.iteration("iter(r[1:])", ctx.expected(range(1, ctx.n)), *_iterate(lambda: iter(r[1:])))


def p_iter_sync(ctx: Context, judge: Judge) -> None:
    r = ctx.open(read_ahead_bytes=0)
    judge.iteration("iter(r) read_ahead_bytes=0", ctx.expected(range(ctx.n)), *_iterate(lambda: iter(r)))
    judge.iteration("r.read_range_iter read_ahead_bytes=0", ctx.expected(range(ctx.n)),
                    *_iterate(lambda: r.read_range_iter(0, ctx.n)))


def p_reversed(ctx: Context, judge: Judge) -> None:
    r = ctx.open()
    judge.iteration("reversed(r)", ctx.expected(range(ctx.n - 1, -1, -1)), *_iterate(lambda: reversed(r)))


def _distinct(ctx: Context, indices: Sequence[int]) -> dict[bytes, list[int]]:
    positions: dict[bytes, list[int]] = {}
    for j, g in enumerate(indices):
        value = ctx.oracle.outcome(g)
        if isinstance(value, bytes):
            positions.setdefault(value, []).append(j)
    return positions


def _index_path(ctx: Context, judge: Judge, multi: bool) -> None:
    import sackli

    cls = sackli.MultiIndex if multi else sackli.Index
    name = cls.__name__
    r = ctx.open()
    for label, indices, target in (("r", list(range(ctx.n)), lambda: r),
                                   ("r[::-2]", list(range(ctx.n))[::-2], lambda: r[::-2])):
        expected = ctx.expected(indices)
        built = capture(lambda: cls(target()))
        call = f"sackli.{name}({label})"
        errors = [e for e in expected if isinstance(e, OracleError)]
        if errors:
            judge.error(call, [errors[0].kind], built, expected=errors[0])
            continue
        if isinstance(built, Raised):
            judge.raised_for_data(call, f"an index of {len(indices)} records", built)
            continue
        judge.agree(call)
        positions = _distinct(ctx, indices)
        judge.value(f"len({call})", len(positions), capture(lambda: len(built)))
        looked_up = ctx.some(sorted(positions, key=lambda v: positions[v][0]))
        for value in looked_up:
            where = positions[value]
            want = where if multi else where[0]
            judge.value(f"{call}[{short(value)}]", want, capture(lambda: built[value]))
            judge.value(f"{short(value)} in {call}", True, capture(lambda: value in built))
        absent = b"\xff absent \x00" * 3
        while absent in positions:
            absent += b"!"
        judge.value(f"{call}.get(absent)", None, capture(lambda: built.get(absent)))
        judge.value(f"absent in {call}", False, capture(lambda: absent in built))


def p_index(ctx: Context, judge: Judge) -> None:
    _index_path(ctx, judge, multi=False)


def p_multiindex(ctx: Context, judge: Judge) -> None:
    _index_path(ctx, judge, multi=True)


def p_scan(ctx: Context, judge: Judge) -> None:
    """r.index / in / count: any answer given must be right for the good records."""
    r = ctx.open()
    n = ctx.n
    outcomes = ctx.expected(range(n))
    good = _distinct(ctx, range(n))
    has_bad = any(isinstance(o, OracleError) for o in outcomes)
    probes = list(good)
    ctx.rng.shuffle(probes)
    probes = probes[:5]
    absent = b"#" * ctx.rng.choice([0, 1, 5, 32, 100])
    while absent in good:
        absent += b"#"
    probes.append(absent)
    for probe in probes:
        where = good.get(probe, [])
        label = short(probe)

        def judge_answer(call: str, actual: Any, right: Callable[[Any], bool], want: Any,
                         absent_ok: bool = False) -> None:
            if isinstance(actual, Raised):
                if actual.kind == "corrupt" and has_bad:
                    judge.error(call, ["corrupt"], actual)
                elif absent_ok and actual.type == "ValueError":
                    judge.agree(call)  # "value is not in the sackli.Reader"
                else:
                    judge.raised_for_data(call, want, actual)
            elif right(actual):
                judge.agree(call)
            else:
                judge.fail("mismatch", call, "wrong answer for the good records", want, actual)

        judge_answer(f"r.index({label})", capture(lambda: r.index(probe)),
                     lambda a: bool(where) and a == where[0], where[0] if where else "ValueError",
                     absent_ok=not where)
        judge_answer(f"{label} in r", capture(lambda: probe in r), lambda a: a is bool(where), bool(where))
        judge_answer(f"r.count({label})", capture(lambda: r.count(probe)), lambda a: a == len(where), len(where))
        if n:
            start = ctx.rng.randrange(n)
            inside = [k for k in where if k >= start]
            judge_answer(f"r.index({label}, {start})", capture(lambda: r.index(probe, start)),
                         lambda a: bool(inside) and a == inside[0], inside[0] if inside else "ValueError",
                         absent_ok=not inside)


def p_pickle(ctx: Context, judge: Judge) -> None:
    r = ctx.open()
    for s in ctx.slices(2):
        chosen = list(range(ctx.n))[s]
        copy = capture(lambda: pickle.loads(pickle.dumps(r[s])))
        if isinstance(copy, Raised):
            judge.raised_for_data(f"pickle(r[{s}])", "a reader", copy)
            continue
        judge.batch(f"pickle(r[{s}]).read()", ctx.expected(chosen), capture(copy.read))


def _arrow_records(table: Any) -> list[bytes]:
    return table.column("record").to_pylist()


def _unwrap_arrow(outcome: Any) -> Any:
    if isinstance(outcome, Raised) and outcome.type == "ArrowInvalid" and "(byte offset" in outcome.message:
        outcome.kind = "corrupt"
    return outcome


def p_arrow_table(ctx: Context, judge: Judge) -> None:
    import pyarrow as pa

    from sackli import arrow as sarrow

    r = ctx.open()
    expected = ctx.expected(range(ctx.n))
    judge.batch("sackli.arrow.read_table(r)", expected, capture(lambda: _arrow_records(sarrow.read_table(r))))
    # The Arrow C stream interface cannot carry Python exception types:
    # pyarrow turns any error inside the stream into ArrowInvalid.
    judge.batch("pyarrow.table(r)", expected, _unwrap_arrow(capture(lambda: _arrow_records(pa.table(r)))))
    s = ctx.slices(2)[1]
    chosen = list(range(ctx.n))[s]
    judge.batch(f"read_table(r[{s}])", ctx.expected(chosen),
                capture(lambda: _arrow_records(sarrow.read_table(r[s]))))


def _stream(batches_factory: Callable[[], Any]) -> tuple[list, Raised | None, list]:
    rows: list = []
    positions: list = []
    try:
        for batch in batches_factory():
            rows += batch.column("record").to_pylist()
            if "index" in batch.schema.names:
                positions += batch.column("index").to_pylist()
    except Exception as error:  # noqa: BLE001
        return rows, Raised(error), positions
    return rows, None, positions


def p_arrow_batches(ctx: Context, judge: Judge) -> None:
    from sackli import arrow as sarrow

    r = ctx.open()
    n = ctx.n
    expected = ctx.expected(range(n))
    for size in sorted({1, 3, max(1, n // 2)}):
        rows, error, positions = _stream(lambda: sarrow.read_batches(r, batch_size=size, with_index=True))
        judge.iteration(f"read_batches(r, batch_size={size})", expected, rows, error,
                        slack=2 * size, slack_class="clean_exception")
        if positions != list(range(len(positions))) or len(positions) != len(rows):
            judge.fail("mismatch", f"read_batches(r, batch_size={size}).index", "wrong index column",
                       list(range(len(rows))), positions)


def p_arrow_indices(ctx: Context, judge: Judge) -> None:
    import numpy as np

    from sackli import arrow as sarrow

    r = ctx.open()
    n = ctx.n
    indices = ctx.index_list()
    for label, given in (("list", indices), ("numpy", np.array(indices, dtype=np.int64))):
        for size in (2, 64):
            rows, error, positions = _stream(
                lambda: sarrow.read_batches(r, indices=given, batch_size=size, with_index=True))
            judge.iteration(f"read_batches(r, indices={label}, batch_size={size})",
                            ctx.expected(_norm(indices, n)), rows, error,
                            slack=2 * size, slack_class="clean_exception")
            if positions != _norm(indices, n)[:len(positions)]:
                judge.fail("mismatch", f"read_batches(indices={label}).index", "wrong index column",
                           _norm(indices, n), positions)


def p_beam(ctx: Context, judge: Judge) -> None:
    """The Beam source's reading of byte ranges of each file
    (sackli.beam._source.read_range), without a pipeline."""
    from sackli.beam import _source

    options = ctx.options()
    for path, local in zip(ctx.beam_paths, ctx.local_paths):
        try:
            single = open_bag([local], ctx.meta["placement"], "CONCATENATED", ctx.meta["compression"],
                              ctx.dictionary, remote=ctx.combo.remote)
        except OracleError as error:
            single = error

        def read(start: int, stop: int) -> tuple[list, Raised | None]:
            return _iterate(lambda: _source.read_range(path, options, start, stop, lambda p: True, bytes, True))

        name = os.path.basename(local)
        items, error = read(0, 2**62)
        call = f"beam read_range({name}, 0, 2**62)"
        if isinstance(single, OracleError):
            if items:
                judge.fail("mismatch", call, "records from a file that does not open", single, items)
            else:
                judge.error(call, getattr(single, "alternatives", [single.kind]), error, expected=single)
            continue
        n = len(single)
        expected = [single.outcome(i) for i in range(n)]
        numbers = [item[1] for item in items]
        if numbers != list(range(len(items))) or any(item[0] != path for item in items):
            judge.fail("mismatch", call, "records out of order or mislabelled", list(range(len(items))), numbers)
            continue
        # Offsets are validated a chunk of 4096 ahead: an error may come early.
        judge.iteration(call, expected, [item[2] for item in items], error,
                        slack=4096, slack_class="clean_exception")
        # Split into byte ranges as a runner would: each record exactly once.
        size = single.shards[0].records_end + 8 * n
        cuts = sorted({0, size, ctx.rng.randint(0, size), ctx.rng.randint(0, size)})
        seen: list = []
        failed = None
        for a, b in zip(cuts, cuts[1:]):
            part, part_error = read(a, b)
            seen += part
            if part_error is not None:
                failed = (a, b, part_error)
        call = f"beam read_range({name}) split at {cuts[1:-1]}"
        wrong = [item for item in seen if item[1] >= n or expected[item[1]] != item[2]]
        if wrong:
            judge.fail("mismatch", call, "a record differs from the oracle's", expected[wrong[0][1]]
                       if wrong[0][1] < n else None, wrong[0][2])
        elif failed is not None:
            first_bad = next((k for k, e in enumerate(expected) if isinstance(e, OracleError)), None)
            if first_bad is None:
                judge.raised_for_data(call + f" [{failed[0]}, {failed[1]})", "records", failed[2])
            else:
                judge.error(call, [expected[first_bad].kind], failed[2], expected=expected[first_bad])
        elif any(isinstance(e, OracleError) for e in expected):
            judge.fail("mismatch", call, "no error although a record is corrupt",
                       next(e for e in expected if isinstance(e, OracleError)), len(seen))
        elif [item[1] for item in seen] != list(range(n)):
            judge.fail("mismatch", call, "records lost or repeated across ranges", list(range(n)),
                       [item[1] for item in seen])
        else:
            judge.agree(call)


# name -> (function, the module it needs or None)
PATHS: dict[str, tuple[Callable[[Context, Judge], None], str | None]] = {
    "open": (p_open, None),
    "getitem": (p_getitem, None),
    "view_getitem": (p_view_getitem, None),
    "view_read": (p_view_read, None),
    "read": (p_read, None),
    "read_range": (p_read_range, None),
    "read_range_iter": (p_read_range_iter, None),
    "read_indices": (p_read_indices, None),
    "read_indices_numpy": (p_read_indices_numpy, "numpy"),
    "read_indices_iter": (p_read_indices_iter, None),
    "iter": (p_iter, None),
    "iter_sync": (p_iter_sync, None),
    "reversed": (p_reversed, None),
    "index": (p_index, None),
    "multiindex": (p_multiindex, None),
    "scan": (p_scan, None),
    "pickle": (p_pickle, None),
    "arrow_table": (p_arrow_table, "pyarrow"),
    "arrow_batches": (p_arrow_batches, "pyarrow"),
    "arrow_indices": (p_arrow_indices, "pyarrow"),
    "beam": (p_beam, "apache_beam"),
}
