"""Bad input: truncated and malformed bags, bad limits, bad zstd frames, wrong
dictionaries, missing files and shard sets that do not fit their layout.

Every case runs in a subprocess (a crash fails the test instead of killing
pytest) and must raise one precise exception naming the file, and for
corruption the byte offset; a corrupt record is never returned empty or wrong,
and the records around it stay readable. Files are built byte by byte here, so
the cases do not depend on the zstd version or on sackli's writer.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import random
import struct
import textwrap

import pytest
import zstandard

import sackli

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SUFFIXES = pytest.mark.parametrize("suffix", [".bag", ".bagz"])
PLACEMENTS = pytest.mark.parametrize("placement", ["TAIL", "SEPARATE"])


# --- Building files --------------------------------------------------------------


def u64s(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}Q", *values)


def cumulative(stored: list[bytes]) -> list[int]:
    """The limits of records stored as `stored`."""
    ends, total = [], 0
    for record in stored:
        total += len(record)
        ends.append(total)
    return ends


def limits_path(path: pathlib.Path) -> pathlib.Path:
    return path.with_name("limits." + path.name)


def build_bag(path: pathlib.Path, stored: list[bytes], placement: str = "TAIL",
              limits: list[int] | None = None) -> pathlib.Path:
    """Writes a bag holding exactly `stored` (already encoded records) and
    `limits` (default: the true ones), byte by byte."""
    limits = cumulative(stored) if limits is None else limits
    records = b"".join(stored)
    if placement == "TAIL":
        path.write_bytes(records + u64s(*limits))
    else:
        path.write_bytes(records)
        limits_path(path).write_bytes(u64s(*limits))
    return path


def zstd_block(payload: bytes, last: bool = True, block_type: int = 0) -> bytes:
    """A zstd block (type 0: raw) holding `payload`."""
    return ((len(payload) << 3) | (block_type << 1) | int(last)).to_bytes(3, "little") + payload


def sized_frame(payload: bytes, claimed: int | None = None) -> bytes:
    """A valid zstd frame (one raw block) whose header says `claimed` bytes
    (default: the true size), as bagz writes them."""
    size = len(payload) if claimed is None else claimed
    if size < 256:
        header = bytes([0x20, size])
    elif size < 65792:
        header = b"\x60" + struct.pack("<H", size - 256)
    else:
        header = b"\xe0" + u64s(size)
    return ZSTD_MAGIC + header + zstd_block(payload)


def unsized_frame(payload: bytes) -> bytes:
    """A valid zstd frame without a content size: two raw blocks."""
    half = len(payload) // 2
    return ZSTD_MAGIC + b"\x00\x00" + zstd_block(payload[:half], last=False) + zstd_block(payload[half:])


def compressed_frames(tmp_path: pathlib.Path, records: list[bytes]) -> list[bytes]:
    """The stored frames sackli's writer produces for `records`, without
    checksums (the tests rewrite their headers; a checksum covers only the
    content)."""
    path = tmp_path / "frames.bagz"
    with sackli.Writer(path, checksum=False) as writer:
        writer.write_many(records)
    return sackli.Reader(path, compression=sackli.CompressionNone()).read()


def encode(suffix: str, records: list[bytes]) -> list[bytes]:
    """`records` as stored in a file named *suffix (deterministic frames)."""
    return records if suffix == ".bag" else [sized_frame(r) if r else b"" for r in records]


# --- Running cases in a subprocess -------------------------------------------------


def run_cases(run_python, folder: pathlib.Path, cases: dict, setup: str = "") -> dict:
    """Evaluates each expression of `cases` (name -> Python expression) in one
    fresh interpreter after `setup`; returns each outcome by name as
    {"ok": repr} or {"error": type name, "message": ..., "mro": [...]}.
    The code goes through a file in `folder`: it can be too long for argv."""
    code = "\n".join(
        ["import sackli", textwrap.dedent(setup)]
        + [f"report(lambda: {expression})" for expression in cases.values()]
    )
    script = folder / "cases.py"
    script.write_text(code)
    result = run_python(f"exec(compile(open({str(script)!r}).read(), 'cases.py', 'exec'))", timeout=120)
    result.outcome()  # fails the test if the interpreter crashed
    lines = result.stdout.splitlines()
    assert len(lines) == len(cases), result.stdout + result.stderr
    return {name: json.loads(line) for name, line in zip(cases, lines)}


def corruption_problem(outcome: dict, path: pathlib.Path | str, offset: int | None = None) -> str | None:
    """Why `outcome` is not a CorruptionError naming `path` (and `offset`)."""
    if outcome.get("error") != "CorruptionError":
        return f"expected CorruptionError, got {outcome}"
    if outcome["mro"][:2] != ["CorruptionError", "ValueError"]:
        return f"CorruptionError is not a ValueError: {outcome['mro']}"
    message = outcome["message"]
    if str(path) not in message:
        return f"{path} not named in {message!r}"
    wanted = "byte offset" if offset is None else f"(byte offset {offset})"
    if wanted not in message:
        return f"{wanted!r} not in {message!r}"
    return None


def assert_corruption(outcome: dict, path: pathlib.Path | str, offset: int | None = None) -> None:
    problem = corruption_problem(outcome, path, offset)
    assert problem is None, problem


def assert_error(outcome: dict, error: str, *fragments: str) -> None:
    assert outcome.get("error") == error, outcome
    for fragment in fragments:
        assert fragment in outcome["message"], (fragment, outcome)


def reader_expr(path: pathlib.Path | str, extra: str = "", **options: str) -> str:
    """The source of `sackli.Reader(path, **options)` (plus `extra` arguments)."""
    arguments = "".join(f", {key}={value!r}" for key, value in options.items())
    return f"sackli.Reader({str(path)!r}{arguments}{extra})"


# --- Truncated files ----------------------------------------------------------------

# No cut of the TAIL bags made from these records leaves 8 trailing bytes that
# happen to form a valid trailer (checked for .bag and for .bagz built with
# `sized_frame`), so every cut must be reported.
_rng = random.Random(7)
TRUNCATION_RECORDS = [bytes(_rng.randrange(1, 256) for _ in range(n)) for n in (37, 0, 301, 5, 61, 1, 203)]


@SUFFIXES
def test_truncated_tail_bag(tmp_path, run_python, suffix):
    full = build_bag(tmp_path / ("full" + suffix), encode(suffix, TRUNCATION_RECORDS)).read_bytes()
    cases = {"full": reader_expr(tmp_path / ("full" + suffix)) + ".read()"}
    cuts = {}
    for cut in range(1, len(full)):  # through the records, the limits and the trailer
        path = tmp_path / f"cut{cut}{suffix}"
        path.write_bytes(full[:cut])
        cuts[cut] = path
        cases[cut] = reader_expr(path) + ".read()"
    outcomes = run_cases(run_python, tmp_path, cases)
    assert outcomes.pop("full") == {"ok": repr(TRUNCATION_RECORDS)}
    problems = {
        cut: corruption_problem(outcome, cuts[cut], max(cut - 8, 0))
        for cut, outcome in outcomes.items()
    }
    assert {cut: p for cut, p in problems.items() if p} == {}


@SUFFIXES
@pytest.mark.parametrize("cache_policy", ["SYSTEM", "DROP_AFTER_READ"])
def test_truncated_separate_records_file(tmp_path, run_python, suffix, cache_policy):
    stored = encode(suffix, TRUNCATION_RECORDS)
    ends = cumulative(stored)
    full = b"".join(stored)
    cases, expected = {}, {}
    for cut in range(len(full)):
        path = build_bag(tmp_path / f"cut{cut}{suffix}", stored, "SEPARATE")
        path.write_bytes(full[:cut])
        reader = reader_expr(path, limits_placement="SEPARATE", cache_policy=cache_policy)
        cases[cut, "len"] = f"len({reader})"
        expected[cut, "len"] = {"ok": repr(len(stored))}
        cases[cut, "read"] = f"{reader}.read()"
        expected[cut, "read"] = path.name
        for i, end in enumerate(ends):
            cases[cut, i] = f"{reader}[{i}]"
            expected[cut, i] = {"ok": repr(TRUNCATION_RECORDS[i])} if end <= cut else path.name
    outcomes = run_cases(run_python, tmp_path, cases)
    problems = {}
    for key, outcome in outcomes.items():
        if isinstance(expected[key], dict):
            problem = None if outcome == expected[key] else f"expected {expected[key]}, got {outcome}"
        else:
            # The error names the limits file or the records file; both
            # contain the records file's name.
            problem = corruption_problem(outcome, expected[key])
        if problem:
            problems[key] = problem
    assert problems == {}


@SUFFIXES
def test_truncated_separate_limits_file(tmp_path, run_python, suffix):
    stored = encode(suffix, TRUNCATION_RECORDS)
    limits = u64s(*cumulative(stored))
    cases, paths = {}, {}
    for cut in range(len(limits)):
        path = build_bag(tmp_path / f"cut{cut}{suffix}", stored, "SEPARATE")
        limits_path(path).write_bytes(limits[:cut])
        paths[cut] = path
        cases[cut] = reader_expr(path, limits_placement="SEPARATE") + ".read()"
    outcomes = run_cases(run_python, tmp_path, cases)
    for cut, outcome in outcomes.items():
        if cut % 8:
            assert_corruption(outcome, limits_path(paths[cut]), cut - cut % 8)
        else:  # whole entries: a shorter bag, never a wrong record
            assert outcome == {"ok": repr(TRUNCATION_RECORDS[: cut // 8])}, cut


@SUFFIXES
def test_files_of_1_to_7_bytes(tmp_path, run_python, suffix):
    cases, paths = {}, {}
    for size in range(1, 8):
        for fill in (0x00, 0x08, 0xFF):
            path = paths[size, fill] = tmp_path / f"short{size}_{fill}{suffix}"
            path.write_bytes(bytes([fill]) * size)
            cases[size, fill] = reader_expr(path)
            cases[size, fill, "in_memory"] = reader_expr(path, limits_storage="IN_MEMORY")
    for key, outcome in run_cases(run_python, tmp_path, cases).items():
        assert_corruption(outcome, paths[key[:2]], 0)


@SUFFIXES
@PLACEMENTS
def test_zero_byte_file_is_an_empty_bag(tmp_path, run_python, suffix, placement):
    path = build_bag(tmp_path / ("empty" + suffix), [], placement)
    assert path.stat().st_size == 0
    cases = {}
    for storage in ("ON_DISK", "IN_MEMORY"):
        reader = reader_expr(path, limits_placement=placement, limits_storage=storage)
        cases.update({
            (storage, "all"): f"(len({reader}), {reader}.read(), list({reader}), {reader}.read_indices([]))",
            (storage, "index"): f"{reader}[0]",
        })
    outcomes = run_cases(run_python, tmp_path, cases)
    for storage in ("ON_DISK", "IN_MEMORY"):
        assert outcomes[storage, "all"] == {"ok": repr((0, [], [], []))}
        assert_error(outcomes[storage, "index"], "IndexError")


# Whole TAIL files whose last 8 bytes do not point at a limits section.
BAD_TRAILERS = {
    "points_past_file": b"abcdef" + u64s(1000),
    "points_into_trailer": b"abcdef" + u64s(7),
    "misaligned": b"abcdef" + u64s(5),
    "limit_2_63": b"abcdef" + u64s(2**63),
    "limit_2_64_minus_1": b"abcdef" + u64s(2**64 - 1),
    "eight_bytes_pointing_at_8": u64s(8),
    "last_of_two_is_2_63": b"abcdef" + u64s(3, 2**63),
    "last_is_2_63_plus_records_end": b"abcdef" + u64s(3, 2**63 + 6),
}


@SUFFIXES
@pytest.mark.parametrize("case", sorted(BAD_TRAILERS))
def test_bad_tail_trailer(tmp_path, run_python, suffix, case):
    path = tmp_path / (case + suffix)
    path.write_bytes(BAD_TRAILERS[case])
    size = len(BAD_TRAILERS[case])
    outcomes = run_cases(run_python, tmp_path, {
        storage: reader_expr(path, limits_storage=storage) for storage in ("ON_DISK", "IN_MEMORY")
    })
    for outcome in outcomes.values():
        assert_corruption(outcome, path, size - 8)


# --- Bad limits: records section, limits, and the outcome of r[i] (bytes, or
# the index of the limit the error must point at). TAIL files need their last
# limit to be the records section's size, so only SEPARATE has the last ones.

BAD_LIMITS = {
    "past_end": (b"abcdefgh", [3, 50, 8], {0: b"abc", 1: 1, 2: 1}, "TAIL SEPARATE"),
    "limit_2_63": (b"abcdefgh", [3, 2**63, 8], {0: b"abc", 1: 1, 2: 1}, "TAIL SEPARATE"),
    "first_2_64_minus_1": (b"abcdefgh", [2**64 - 1, 8], {0: 0, 1: 0}, "TAIL SEPARATE"),
    "non_monotonic": (b"abcdefgh", [5, 2, 8], {0: b"abcde", 1: 1}, "TAIL SEPARATE"),
    "drops_to_zero": (b"abcdefgh", [3, 6, 0, 8], {0: b"abc", 1: b"def", 2: 2}, "TAIL SEPARATE"),
    "last_past_end": (b"abcdefgh", [3, 8, 9], {0: b"abc", 1: b"defgh", 2: 2}, "SEPARATE"),
    "last_2_63": (b"abcdefgh", [3, 8, 2**63], {0: b"abc", 1: b"defgh", 2: 2}, "SEPARATE"),
}
BAD_LIMIT_CASES = [
    (case, placement) for case, spec in sorted(BAD_LIMITS.items()) for placement in spec[3].split()
]


@pytest.mark.parametrize("case, placement", BAD_LIMIT_CASES)
def test_bad_limits(tmp_path, run_python, case, placement):
    records, limits, expected, _ = BAD_LIMITS[case]
    path = tmp_path / "bad.bag"
    build_bag(path, [records], placement, limits=limits)
    holder, base = (path, len(records)) if placement == "TAIL" else (limits_path(path), 0)
    cases = {}
    for storage in ("ON_DISK", "IN_MEMORY"):
        reader = reader_expr(path, limits_placement=placement, limits_storage=storage)
        cases[storage, "len"] = f"len({reader})"
        cases[storage, "read"] = f"{reader}.read()"
        cases.update({(storage, i): f"{reader}[{i}]" for i in expected})
    outcomes = run_cases(run_python, tmp_path, cases)
    first_bad = min(v for v in expected.values() if isinstance(v, int))
    for storage in ("ON_DISK", "IN_MEMORY"):
        assert outcomes[storage, "len"] == {"ok": repr(len(limits))}
        assert_corruption(outcomes[storage, "read"], holder, base + 8 * first_bad)
        for i, want in expected.items():
            if isinstance(want, bytes):
                assert outcomes[storage, i] == {"ok": repr(want)}, (storage, i)
            else:
                assert_corruption(outcomes[storage, i], holder, base + 8 * want)


# --- Corruption seen through every read path -------------------------------------

N = 50
BAD = 30
RECORD_SIZE = 32
PROBE = b"#" * RECORD_SIZE  # absent, and as long as the bad record claims to be
GOOD = [b"" if i % 7 == 3 else (b"record %02d|" % i * 4)[:RECORD_SIZE] for i in range(N)]
ORIGINAL = GOOD[BAD]
assert ORIGINAL and PROBE not in GOOD

# kind -> the stored bytes of record BAD in a .bagz file.
BAD_FRAMES = {
    "garbage": lambda real: b"this is not a zstd frame at all!",
    "magic_only": lambda real: ZSTD_MAGIC,
    "header_only": lambda real: sized_frame(ORIGINAL)[:6],
    "truncated_raw_block": lambda real: sized_frame(ORIGINAL)[:-3],
    "truncated_compressed_frame": lambda real: real[:-2],
    "huge_content_size": lambda real: sized_frame(ORIGINAL, claimed=2**62),
    "content_size_1_tib": lambda real: sized_frame(ORIGINAL, claimed=2**40),
    "content_size_too_small": lambda real: sized_frame(ORIGINAL + b"!", claimed=RECORD_SIZE),
    "content_size_too_large": lambda real: sized_frame(ORIGINAL[:-1], claimed=RECORD_SIZE),
    "trailing_bytes": lambda real: sized_frame(ORIGINAL) + b"junk",
    "unsized_truncated": lambda real: unsized_frame(ORIGINAL)[:-4],
    "unsized_missing_last_block": lambda real: ZSTD_MAGIC + b"\x00\x00" + zstd_block(ORIGINAL, last=False),
    "unsized_trailing_bytes": lambda real: unsized_frame(ORIGINAL) + b"junk",
    "bad_checksum": lambda real: ZSTD_MAGIC + bytes([0x24, RECORD_SIZE]) + zstd_block(ORIGINAL) + b"\0\0\0\0",
    "reserved_block_type": lambda real: ZSTD_MAGIC + bytes([0x20, RECORD_SIZE]) + zstd_block(ORIGINAL, block_type=3),
}
# kind -> (new value of limit BAD given the true limits, records that may not
# be checked besides BAD: the record after a bad limit starts at it).
BAD_LIMIT_KINDS = {
    "limit_past_end": lambda ends: ends[-1] + 1000,
    "limit_2_63": lambda ends: 2**63,
    "limit_below_previous": lambda ends: ends[BAD - 1] - 1,
}


def build_corrupt_bag(tmp_path: pathlib.Path, kind: str, placement: str) -> tuple[pathlib.Path, pathlib.Path, int]:
    """A bag of GOOD with record BAD damaged by `kind`: (path, file named by
    the error, byte offset the error names)."""
    if kind in BAD_LIMIT_KINDS:
        ends = cumulative(GOOD)
        ends[BAD] = BAD_LIMIT_KINDS[kind](ends)
        path = build_bag(tmp_path / "corrupt.bag", GOOD, placement, limits=ends)
        if placement == "TAIL":
            return path, path, sum(map(len, GOOD)) + 8 * BAD
        return path, limits_path(path), 8 * BAD
    # Good records as sackli compresses them, raw-block frames and unsized
    # frames, so every kind of valid frame surrounds the bad one.
    real = compressed_frames(tmp_path, GOOD)
    stored = [
        frame if not record or i % 3 == 0 else sized_frame(record) if i % 3 == 1 else unsized_frame(record)
        for i, (record, frame) in enumerate(zip(GOOD, real))
    ]
    stored[BAD] = BAD_FRAMES[kind](real[BAD])
    path = build_bag(tmp_path / "corrupt.bagz", stored, placement)
    return path, path, sum(map(len, stored[:BAD]))


CORRUPT = object()


@pytest.mark.parametrize("kind", sorted(BAD_FRAMES) + sorted(BAD_LIMIT_KINDS))
@PLACEMENTS
def test_corruption_through_every_read_path(tmp_path, run_python, kind, placement):
    path, holder, offset = build_corrupt_bag(tmp_path, kind, placement)
    # A bad limit also spoils the start of the next record.
    after = BAD + 2 if kind in BAD_LIMIT_KINDS else BAD + 1
    clean = [i for i in range(N) if i < BAD or i >= after]
    paths = {
        "r[bad]": (f"r[{BAD}]", CORRUPT),
        "r[negative bad]": (f"r[{BAD - N}]", CORRUPT),
        "r[i] before": (f"[r[i] for i in range({BAD})]", GOOD[:BAD]),
        "r[i] after": (f"[r[i] for i in range({after}, {N})]", GOOD[after:]),
        "len": ("len(r)", N),
        "read": ("r.read()", CORRUPT),
        "iter": ("list(r)", CORRUPT),
        "iter without read-ahead": ("list(r_sync)", CORRUPT),
        "iter one by one": ("[x for x in r_sync]", CORRUPT),
        "reversed": ("list(reversed(r))", CORRUPT),
        "read_range before": (f"r.read_range(0, {BAD})", GOOD[:BAD]),
        "read_range across": (f"r.read_range({BAD - 2}, 4)", CORRUPT),
        "read_range_iter": (f"list(r.read_range_iter(0, {N}, read_ahead=7))", CORRUPT),
        "read_indices": (f"r.read_indices([0, {BAD}, 1])", CORRUPT),
        "read_indices range": (f"r.read_indices(range({N}))", CORRUPT),
        "read_indices slice": ("r.read_indices(slice(None, None, -1))", CORRUPT),
        "read_indices clean": (f"r.read_indices({clean})", [GOOD[i] for i in clean]),
        "read_indices_iter": (f"list(r.read_indices_iter([0, 1, {BAD}]))", CORRUPT),
        "read_indices_iter generator": (f"list(r.read_indices_iter(iter(range({N})), read_ahead=4))", CORRUPT),
        "read_indices_iter clean": (f"list(r.read_indices_iter({clean}))", [GOOD[i] for i in clean]),
        "view read": (f"r[{BAD - 5}:{BAD + 5}].read()", CORRUPT),
        "view item": (f"r[::-1][{N - 1 - BAD}]", CORRUPT),
        "view after": (f"r[{after}:].read()", GOOD[after:]),
        "index": ("r.index(probe)", CORRUPT),
        "index present after": (f"r.index({GOOD[-1]!r})", CORRUPT),
        "count": ("r.count(probe)", CORRUPT),
        "in": ("probe in r", CORRUPT),
        "Index": ("sackli.Index(r)", CORRUPT),
        "MultiIndex": ("sackli.MultiIndex(r)", CORRUPT),
        "still usable": (f"r.read_range(0, {BAD})", GOOD[:BAD]),
    }
    storages = ("ON_DISK", "IN_MEMORY")
    setup = "readers = {}\n" + "".join(
        f"readers[{storage!r}] = ({reader_expr(path, limits_placement=placement, limits_storage=storage)}, "
        f"{reader_expr(path, limits_placement=placement, limits_storage=storage, read_ahead_bytes=0)})\n"
        for storage in storages
    ) + f"probe = {PROBE!r}\n"
    cases = {
        (storage, name): f"(lambda r, r_sync: {expression})(*readers[{storage!r}])"
        for storage in storages
        for name, (expression, _) in paths.items()
    }
    outcomes = run_cases(run_python, tmp_path, cases, setup)
    problems = {}
    for (storage, name), outcome in outcomes.items():
        want = paths[name][1]
        if want is CORRUPT:
            problem = corruption_problem(outcome, holder, offset)
        else:
            problem = None if outcome == {"ok": repr(want)} else f"expected {want!r}, got {outcome}"
        if problem:
            problems[storage, name] = problem
    assert problems == {}


# --- zstd dictionaries ------------------------------------------------------------


def _json_records(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [
        json.dumps({"id": i, "user": "user%d" % rng.randrange(1000), "kind": ["alpha", "beta", "gamma"][i % 3],
                    "score": round(rng.random(), 4)}).encode()
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def dictionaries(tmp_path_factory) -> dict[str, pathlib.Path]:
    """Two trained dictionaries (distinct IDs) and two raw-content ones."""
    folder = tmp_path_factory.mktemp("dictionaries")
    found = {}
    for name, seed, dict_id in (("trained_a", 1, 1001), ("trained_b", 2, 1002)):
        out = folder / (name + ".dict")
        trained = zstandard.train_dictionary(2048, _json_records(600, seed), dict_id=dict_id)
        out.write_bytes(trained.as_bytes())
        assert out.read_bytes()[:4] == b"\x37\xa4\x30\xec"  # a trained dictionary
        found[name] = out
    for name, seed in (("raw_a", 3), ("raw_b", 4)):
        rng = random.Random(seed)
        found[name] = folder / (name + ".dict")
        found[name].write_bytes(bytes(rng.randrange(256) for _ in range(4096)))
    return found


def _dictionary_records(writer_dictionary: str, content: bytes) -> list[bytes]:
    """Records that cannot be compressed without the dictionary: JSON like
    the training samples, or pieces of a raw-content dictionary."""
    if writer_dictionary.startswith("trained"):
        return _json_records(40, 9)
    return [content[k * 97: k * 97 + 300] + b"%d" % k for k in range(40)]


@pytest.mark.parametrize("writer_dictionary", ["trained_a", "raw_a"])
def test_wrong_or_missing_dictionary(tmp_path, run_python, dictionaries, writer_dictionary):
    content = dictionaries[writer_dictionary].read_bytes()
    records = _dictionary_records(writer_dictionary, content)
    path = tmp_path / "dict.bagz"
    with sackli.Writer(path, compression=sackli.CompressionZstd(dictionary=content)) as writer:
        writer.write_many(records)
    frames = sackli.Reader(path, compression=sackli.CompressionNone()).read()
    offset_of_7 = sum(map(len, frames[:7]))
    setup = "import pathlib\nd = {}\n" + "".join(
        f"d[{name!r}] = sackli.CompressionZstd(dictionary=pathlib.Path({str(p)!r}).read_bytes())\n"
        for name, p in dictionaries.items()
    ) + "d['none'] = sackli.CompressionZstd()\nd['auto'] = sackli.CompressionAutoDetect()\n"
    cases = {}
    for reader_dictionary in [*dictionaries, "none", "auto"]:
        reader = reader_expr(path, f", compression=d[{reader_dictionary!r}]")
        cases[reader_dictionary, "read"] = f"{reader}.read()"
        cases[reader_dictionary, 7] = f"{reader}[7]"
        cases[reader_dictionary, "iter"] = f"list({reader}.read_indices_iter(range(40)))"
    outcomes = run_cases(run_python, tmp_path, cases, setup)
    for (reader_dictionary, what), outcome in outcomes.items():
        if reader_dictionary == writer_dictionary:
            assert outcome == {"ok": repr(records[7] if what == 7 else records)}, what
        else:
            assert_corruption(outcome, path, offset_of_7 if what == 7 else 0)


# --- Files that are not there ---------------------------------------------------------


def _valid(path: pathlib.Path, placement: str = "TAIL") -> pathlib.Path:
    return build_bag(path, [b"abc", b"de"], placement)


def _mkdir(path: pathlib.Path) -> pathlib.Path:
    path.mkdir()
    return path


SEPARATE = {"limits_placement": "SEPARATE"}


def _missing_limits_file(d):
    return _valid(d / "x.bag"), SEPARATE, d / "limits.x.bag"


def _missing_records_file(d):
    _valid(d / "y.bag", "SEPARATE").unlink()
    return d / "y.bag", SEPARATE, d / "y.bag"


def _missing_shard(d):
    for i in (0, 2):
        _valid(d / f"s-0000{i}-of-00003.bag")
    return f"{d}/s@3.bag", {}, d / "s-00001-of-00003.bag"


def _limits_file_is_directory(d):
    _mkdir(d / "limits.z.bag")
    return _valid(d / "z.bag"), SEPARATE, d / "limits.z.bag"


def _directory_shard(d):
    _valid(d / "t-00000-of-00002.bag")
    return f"{d}/t@2.bag", {}, _mkdir(d / "t-00001-of-00002.bag")


# name -> (make(folder) -> (spec, options, path the message names), exception)
MISSING = {
    "missing_file": (lambda d: (d / "missing.bag", {}, d / "missing.bag"), "FileNotFoundError"),
    "missing_bagz_separate": (lambda d: (d / "missing.bagz", SEPARATE, d / "missing.bagz"), "FileNotFoundError"),
    "missing_limits_file": (_missing_limits_file, "FileNotFoundError"),
    "missing_records_file": (_missing_records_file, "FileNotFoundError"),
    # Tests run as root, where permission bits are not checked; a path inside
    # a folder that does not exist stands in for an unreadable path.
    "inside_missing_folder": (lambda d: (d / "nowhere" / "x.bag", {}, d / "nowhere" / "x.bag"), "FileNotFoundError"),
    "inside_a_file": (lambda d: (_valid(d / "f.bag") / "x.bag", {}, d / "f.bag" / "x.bag"), "NotADirectoryError"),
    "missing_shard": (_missing_shard, "FileNotFoundError"),
    "missing_in_list": (lambda d: (f"{_valid(d / 'a.bag')},{d / 'gone.bag'}", {}, d / "gone.bag"), "FileNotFoundError"),
    "no_shard_for_star": (lambda d: (f"{d}/none@*.bag", {}, f"{d}/none@*.bag"), "FileNotFoundError"),
    "directory": (lambda d: (_mkdir(d / "dir.bag"), {}, d / "dir.bag"), "IsADirectoryError"),
    "directory_bagz_separate": (lambda d: (_mkdir(d / "dir.bagz"), SEPARATE, d / "dir.bagz"), "IsADirectoryError"),
    "limits_file_is_directory": (_limits_file_is_directory, "IsADirectoryError"),
    "directory_shard": (_directory_shard, "IsADirectoryError"),
}


@pytest.mark.parametrize("case", sorted(MISSING))
def test_missing_and_unreadable_files(tmp_path, run_python, case):
    make, error = MISSING[case]
    spec, options, named = make(tmp_path)
    outcome = run_cases(run_python, tmp_path, {"open": reader_expr(spec, **options)})["open"]
    assert_error(outcome, error, str(named))
    assert "OSError" in outcome["mro"]


# --- Shard sets that do not fit INTERLEAVED -----------------------------------------

# shard sizes -> the shard the error must name.
BAD_INTERLEAVED = {
    (3, 5): 1,
    (5, 3): 1,
    (0, 1): 1,
    (5, 6, 6): 1,
    (6, 4, 4): 1,
    (2, 1, 0): 2,
    (3, 3, 1): 2,
    (1, 1, 2): 2,
    (4, 4, 4, 3, 4): 4,
}


@pytest.mark.parametrize("sizes", sorted(BAD_INTERLEAVED), ids=lambda s: "-".join(map(str, s)))
@SUFFIXES
def test_interleaved_shard_sizes_that_do_not_fit(tmp_path, run_python, sizes, suffix):
    count = len(sizes)
    shards = []
    for s, size in enumerate(sizes):
        path = tmp_path / f"inter-{s:05d}-of-{count:05d}{suffix}"
        build_bag(path, encode(suffix, [b"%d:%d" % (s, i) for i in range(size)]))
        shards.append(path)
    spec = f"{tmp_path}/inter@{count}{suffix}"
    outcomes = run_cases(run_python, tmp_path, {
        "interleaved": reader_expr(spec, sharding_layout="INTERLEAVED"),
        "concatenated": f"len({reader_expr(spec)})",
    })
    outcome = outcomes["interleaved"]
    assert_error(outcome, "ValueError", "INTERLEAVED", str(shards[BAD_INTERLEAVED[sizes]]))
    assert outcome["mro"] == ["ValueError", "Exception", "BaseException", "object"]
    assert outcomes["concatenated"] == {"ok": repr(sum(sizes))}


# --- Regression cases found by fuzzing (issue 13) ------------------------------------

CACHE_POLICIES = ("SYSTEM", "DROP_AFTER_READ", "DIRECT_IO")


def _zero_size_frame(frame: bytes, how: str) -> bytes:
    """`frame` (1-byte Frame_Content_Size, as zstd writes short records) with a
    header that parses to a content size of 0 while the frame still holds data."""
    assert frame[:4] == ZSTD_MAGIC and frame[4] == 0x20, frame[:6]
    if how == "content_size_0":
        return frame[:5] + b"\x00" + frame[6:]
    # The dictionary-ID flag (1-byte ID) turns the size byte into the ID and
    # the next byte into the size, which is set to 0.
    assert how == "dictionary_id_flag"
    return frame[:4] + b"\x21" + frame[5:6] + b"\x00" + frame[7:]


@pytest.mark.parametrize("how", ["content_size_0", "dictionary_id_flag"])
@pytest.mark.parametrize("cache_policy", CACHE_POLICIES)
def test_frame_claiming_zero_bytes_is_corrupt_on_every_path(tmp_path, run_python, how, cache_policy):
    records = [b"first record " * 3, b"the record whose header lies " * 3, b"last record " * 3]
    frames = compressed_frames(tmp_path, records)
    frames[1] = _zero_size_frame(frames[1], how)
    path = build_bag(tmp_path / "lying.bagz", frames)
    offset = len(frames[0])
    reader = reader_expr(path, cache_policy=cache_policy)
    cases = {
        "r[1]": f"{reader}[1]",
        "r[-2]": f"{reader}[-2]",
        "view": f"{reader}[1:][0]",
        "read_indices": f"{reader}.read_indices([1])",
        "read": f"{reader}.read()",
        "iter": f"list({reader})",
        "neighbours": f"[{reader}[0], {reader}[2]]",
    }
    outcomes = run_cases(run_python, tmp_path, cases)
    assert outcomes.pop("neighbours") == {"ok": repr([records[0], records[2]])}
    for name, outcome in outcomes.items():
        assert_corruption(outcome, path, offset), name


@pytest.mark.parametrize("cache_policy", CACHE_POLICIES)
def test_frame_claiming_two_to_the_64_minus_one_bytes_is_corrupt(tmp_path, run_python, cache_policy):
    """A Frame_Content_Size field of 2^64 - 1, which zstd reports as it
    reports a frame without the field ("unknown"): the header lies, so the
    record is corrupt rather than decoded as a frame of unknown size."""
    records = [b"first record " * 3, b"the record whose header lies " * 3, b"last record " * 3]
    frames = compressed_frames(tmp_path, records)
    assert frames[1][4] == 0x20, frames[1][:6]  # single segment, 1-byte size
    # Not a single segment (so a Window_Descriptor of 1 KiB follows), with
    # an 8-byte Frame_Content_Size field, all ones.
    frames[1] = frames[1][:4] + b"\xc0\x00" + b"\xff" * 8 + frames[1][6:]
    path = build_bag(tmp_path / "lying.bagz", frames)
    reader = reader_expr(path, cache_policy=cache_policy)
    outcomes = run_cases(run_python, tmp_path, {
        "r[1]": f"{reader}[1]",
        "read_indices": f"{reader}.read_indices([1])",
        "read": f"{reader}.read()",
        "iter": f"list({reader})",
        "neighbours": f"[{reader}[0], {reader}[2]]",
    })
    assert outcomes.pop("neighbours") == {"ok": repr([records[0], records[2]])}
    for name, outcome in outcomes.items():
        assert_corruption(outcome, path, len(frames[0])), name


def test_index_candidate_check_of_a_frame_claiming_zero_bytes(tmp_path, run_python):
    """Index lookups that read their candidate back (no memory budget) decode
    it for real: a header edited under the index gives an error, not b""."""
    # The last record, incompressible, makes the file larger than the 4 KiB
    # that are read whole at open: it is mapped, and sees the edit.
    records = [b"alpha " * 8, b"beta " * 8, b"gamma " * 8, random.Random(0).randbytes(5000)]
    path = tmp_path / "index.bagz"
    with sackli.Writer(path, checksum=False) as writer:  # as compressed_frames
        writer.write_many(records)
    frames = compressed_frames(tmp_path, records)
    header_at = len(frames[0]) + 5  # record 1's content-size byte
    result = run_python(f"""
        import sackli
        r = sackli.Reader({str(path)!r})
        index = sackli.Index(r, max_memory_bytes=0)
        assert index[{records[2]!r}] == 2
        with open({str(path)!r}, "r+b") as f:  # same size: the mapping sees it
            f.seek({header_at})
            f.write(b"\\x00")
        report(lambda: index[{records[1]!r}])
    """)
    assert_corruption(result.outcome(), path, len(frames[0]))


def _non_monotonic_bag(tmp_path: pathlib.Path, record_size: int, bad_limit: int, placement: str = "TAIL"):
    """10 records of `record_size` bytes whose limits[5] is `bad_limit`."""
    rng = random.Random(record_size)
    records = [bytes(rng.randrange(256) for _ in range(64)) * (record_size // 64) for _ in range(10)]
    ends = cumulative(records)
    ends[5] = bad_limit
    path = build_bag(tmp_path / "nonmono.bag", records, placement, limits=ends)
    return path, b"".join(records)


@pytest.mark.parametrize("cache_policy", CACHE_POLICIES)
@pytest.mark.parametrize("storage", ["ON_DISK", "IN_MEMORY"])
def test_non_monotonic_limits_never_read_foreign_bytes(tmp_path, run_python, cache_policy, storage):
    """limits[5] = 3: record 5 is corrupt, record 6 spans [3, 7000) of the
    records section, on every path and cache policy (the coalesced read of
    records 4 and 6 used to point before its buffer)."""
    path, section = _non_monotonic_bag(tmp_path, 1024, 3)
    reader = reader_expr(path, cache_policy=cache_policy, limits_storage=storage)
    six = section[3:7 * 1024]
    cases = {
        "pair": f"{reader}.read_indices([4, 6])",
        "pair reversed": f"{reader}.read_indices([6, 4, 6])",
        "r[6]": f"{reader}[6]",
        "r[5]": f"{reader}[5]",
        "iter from 6": f"list({reader}.read_range_iter(6, 4))",
        "indices iter": f"list({reader}.read_indices_iter([4, 6, 7]))",
        "iter": f"list({reader})",
    }
    outcomes = run_cases(run_python, tmp_path, cases)
    assert outcomes["pair"] == {"ok": repr([section[4096:5120], six])}
    assert outcomes["pair reversed"] == {"ok": repr([six, section[4096:5120], six])}
    assert outcomes["r[6]"] == {"ok": repr(six)}
    assert outcomes["iter from 6"] == {"ok": repr([six] + [section[k * 1024:(k + 1) * 1024] for k in (7, 8, 9)])}
    assert outcomes["indices iter"] == {"ok": repr([section[4096:5120], six, section[7168:8192]])}
    assert_corruption(outcomes["r[5]"], path, 10 * 1024 + 8 * 5)
    assert_corruption(outcomes["iter"], path, 10 * 1024 + 8 * 5)


@pytest.mark.parametrize("cache_policy", CACHE_POLICIES)
def test_non_monotonic_limits_with_megabyte_records(tmp_path, run_python, cache_policy):
    """1 MiB records with limits[5] = 0 used to kill the process (SIGSEGV)."""
    path, section = _non_monotonic_bag(tmp_path, 1 << 20, 0)
    result = run_python(f"""
        import hashlib, sackli
        r = sackli.Reader({str(path)!r}, cache_policy={cache_policy!r})
        report(lambda: [hashlib.sha256(x).hexdigest() for x in r.read_indices([4, 6])])
    """)
    mib = 1 << 20
    expected = [hashlib.sha256(section[4 * mib:5 * mib]).hexdigest(), hashlib.sha256(section[:7 * mib]).hexdigest()]
    assert result.outcome() == {"ok": repr(expected)}


@pytest.mark.parametrize("cache_policy", CACHE_POLICIES)
def test_iterating_views_of_a_separate_bag_with_one_bad_limit(tmp_path, run_python, cache_policy):
    """Views of a SEPARATE bag with one bad limit, iterated with read-ahead on
    pool threads: a clean error after every record before the bad one (this
    used to crash a pool thread about half the time)."""
    path, section = _non_monotonic_bag(tmp_path, 4096, 0, placement="SEPARATE")
    records = [section[k * 4096:(k + 1) * 4096] for k in range(10)]
    result = run_python(f"""
        import sackli
        r = sackli.Reader({str(path)!r}, limits_placement="SEPARATE", cache_policy={cache_policy!r},
                          max_parallelism=4)
        outcomes = []
        for attempt in range(20):
            for view in (r[::1], r[1::2], r[3:8]):
                got = []
                try:
                    for record in view:
                        got.append(record)
                except sackli.CorruptionError as error:
                    got.append(("error", str(error)))
                outcomes.append(got)
        report(lambda: outcomes)
    """)
    outcomes = eval(result.outcome()["ok"])
    error = ("error",)
    expected = {
        0: records[:5],  # r[::1]: 0..4, then record 5 is corrupt
        1: [records[1], records[3]],  # r[1::2]: 1, 3, then 5
        2: [records[3], records[4]],  # r[3:8]: 3, 4, then 5
    }
    for k, got in enumerate(outcomes):
        assert got[:-1] == expected[k % 3], k
        assert got[-1][0] == error[0] and str(limits_path(path)) in got[-1][1], got[-1]
