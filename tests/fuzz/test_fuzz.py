"""Bounded differential fuzzing of sackli (see docs/fuzzing.md).

Replays every regression case of fuzz/regressions, then reads fresh mutants
of the seed corpus (fixed seed) through every read path and option
combination in child processes, comparing each outcome with the pure-Python
oracle of docs/format.md. Fails on any crash, hang or mismatch, listing them
with their recipes. New kinds of failure are minimised into the test's temp
folder (not into the repository): copy them to fuzz/regressions to keep them.
"""

from __future__ import annotations

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

SEED = 20251123
FUZZ_SECONDS = 35
MAX_MUTANTS = 400


def _runner():
    # Tests run with --import-mode=importlib and PYTHONSAFEPATH=1: the fuzz
    # package is found through the repository root, appended (not inserted),
    # so that `import sackli` still finds the installed package, not the
    # source tree's (which has no compiled engine).
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))
    from fuzz import runner

    return runner


def test_fuzz(tmp_path):
    runner = _runner()
    fuzzer = runner.Fuzzer(tmp_path / "work", jobs=2, save_dir=tmp_path / "new-regressions",
                           max_minimize=1, idle_timeout=20)
    try:
        fuzzer.replay()
        report = fuzzer.fuzz(FUZZ_SECONDS, SEED, MAX_MUTANTS)
    finally:
        fuzzer.close()
    print(report.table())
    assert report.mutants > 0
    assert not report.harness_errors, "\n".join(report.harness_errors)
    failing = report.failing()
    assert not failing, (
        f"{len(failing)} crash/hang/mismatch outcomes in {report.mutants} mutants and "
        f"{report.regressions} regression cases:\n{report.format_failures()}")


# --- The oracle itself ----------------------------------------------------------------


def test_oracle_reads_the_golden_files():
    """The oracle decodes every bagz 0.3.8 golden file to its MANIFEST records."""
    import json

    _runner()
    from fuzz import oracle

    data = ROOT / "tests" / "data"
    manifest = json.loads((data / "MANIFEST.json").read_text())
    sets = {name: [bytes.fromhex(h) for h in hexes] for name, hexes in manifest["record_sets"].items()}
    for name, entry in manifest["files"].items():
        bag = oracle.open_bag(str(data / name), entry.get("limits_placement", "TAIL"),
                              entry.get("layout", "CONCATENATED"))
        if "records" in entry or "records_hex" in entry:
            want = sets[entry["records"]] if "records" in entry else [bytes.fromhex(h) for h in entry["records_hex"]]
        else:
            sizes = entry["shard_sizes"]
            shards = [[b"%d:%d" % (s, i) for i in range(size)] for s, size in enumerate(sizes)]
            if entry["layout"] == "INTERLEAVED":
                want = [shards[g % len(sizes)][g // len(sizes)] for g in range(sum(sizes))]
            else:
                want = [record for shard in shards for record in shard]
        assert bag.outcomes() == want, name


def test_oracle_frame_rules(tmp_path):
    """The strict record rules of docs/fuzzing.md, on frames made byte by byte."""
    _runner()
    from fuzz import bagbytes as bb
    from fuzz.oracle import OracleError, decode_record, open_bag

    good = bb.frame(b"hello")
    assert decode_record(b"") == b""
    assert decode_record(good) == b"hello"
    assert decode_record(bb.frame(b"hello", sized=False, block_bytes=2)) == b"hello"
    assert decode_record(bb.frame(b"hello", checksum=True)) == b"hello"
    assert decode_record(bb.frame(b"")) == b""
    assert decode_record(bb.frame(b"\x07" * 300_000, rle=True)) == b"\x07" * 300_000
    corrupt = {
        "content size 0 with data": bb.frame_header(0) + bb.block(b"hello"),
        "content size too small": bb.frame(b"hello", claimed=4),
        "content size too large": bb.frame(b"hello", claimed=6),
        "impossible content size": bb.frame(b"hello", claimed=2**40),
        "then a skippable frame": good + bb.skippable_frame(b"x"),
        "then an empty frame": good + bb.frame(b""),
        "then junk": good + b"junk",
        "only a skippable frame": bb.skippable_frame(b"x"),
        "prefixed by a skippable frame": bb.skippable_frame(b"x") + good,
        "truncated": good[:-1],
        "bad checksum": bb.frame(b"hello", checksum=True)[:-1] + b"\0",
        "reserved bit": bytes([*good[:4], good[4] | 0x08]) + good[5:],
        "reserved block type": bb.frame_header(5) + bb.block(b"hello", block_type=3),
        "not a frame": b"hello",
    }
    for what, stored in corrupt.items():
        try:
            decode_record(stored)
        except OracleError as error:
            assert error.kind == "corrupt", what
        else:
            raise AssertionError(f"{what}: accepted")
    # Per-record limits: neighbours of a bad limit stay readable.
    path = tmp_path / "x.bag"
    bb.write_bag(str(path), [b"ab", b"cd", b"ef", b"gh"], limits=[2, 1, 6, 8])
    bag = open_bag(str(path))
    outcomes = bag.outcomes()
    assert outcomes[0] == b"ab" and outcomes[2] == b"bcdef" and outcomes[3] == b"gh"
    assert isinstance(outcomes[1], OracleError) and outcomes[1].kind == "corrupt"


def test_oracle_checks_the_crc32c_sidecar(tmp_path):
    """The sidecar rules of docs/format.md section 12, as sackli writes them:
    a record whose bytes changed is corrupt alone; a sidecar for another
    version of the bag, or without its trailer, fails the open."""
    _runner()
    import sackli
    from fuzz.oracle import OracleError, open_bag

    path = tmp_path / "x.bag"
    with sackli.Writer(str(path), record_checksums=True) as writer:
        writer.write_many([b"ab", b"", b"cdef"])
    assert open_bag(str(path)).outcomes() == [b"ab", b"", b"cdef"]
    data = bytearray(path.read_bytes())
    data[3] ^= 0x01  # inside record 2
    path.write_bytes(bytes(data))
    outcomes = open_bag(str(path)).outcomes()
    assert outcomes[:2] == [b"ab", b""]
    assert isinstance(outcomes[2], OracleError) and outcomes[2].kind == "corrupt"
    with pytest.raises(sackli.CorruptionError):
        sackli.Reader(str(path))[2]
    sidecar = tmp_path / "x.bag.crc32c"
    for broken in (sidecar.read_bytes()[:-1], sidecar.read_bytes()[4:], b""):
        sidecar.write_bytes(broken)
        with pytest.raises(OracleError) as error:
            open_bag(str(path))
        assert error.value.kind == "corrupt"
        with pytest.raises(sackli.CorruptionError):
            sackli.Reader(str(path))
    sidecar.unlink()
    assert open_bag(str(path)).outcomes()[2] == b"ceef"  # unchecked, as bagz reads it


def test_corpus_is_deterministic(tmp_path):
    runner = _runner()
    from fuzz.corpus import build_corpus

    def digest(folder):
        import hashlib

        return {p.relative_to(folder).as_posix(): hashlib.sha1(p.read_bytes()).hexdigest()
                for p in sorted(folder.rglob("*")) if p.is_file()}

    build_corpus(tmp_path / "a", seed=5)
    build_corpus(tmp_path / "b", seed=5)
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    assert runner.REGRESSIONS.is_dir()


def test_map_oracle_reads_mapbuffer_maps(tmp_path):
    """The map oracle reads what the real `mapbuffer` 1.2.0 writes, every
    compression, and IntMaps."""
    import random

    mapbuffer = pytest.importorskip("mapbuffer")
    _runner()
    from fuzz.map_oracle import ABSENT, open_map

    rng = random.Random(5)
    items = {rng.getrandbits(63): rng.randbytes(rng.randrange(1, 300)) for _ in range(50)}
    for compress in (None, "gzip", "br", "zstd", "lzma"):
        path = tmp_path / f"{compress}.mb"
        path.write_bytes(mapbuffer.MapBuffer(items, compress=compress).tobytes())
        oracle = open_map(str(path), intmap=False)
        assert oracle.ordered() and oracle.structure_error() is None, compress
        assert {key: oracle.outcome(p) for p, key in enumerate(oracle.keys)} == items, compress
        assert all(oracle.lookup(key) == [value] for key, value in items.items()), compress
        assert oracle.lookup(2**64 - 1) == [ABSENT]
    numbers = {key: rng.getrandbits(64) for key in items}
    path = tmp_path / "ints.im"
    path.write_bytes(mapbuffer.IntMap(numbers).tobytes())
    oracle = open_map(str(path), intmap=True)
    assert {key: oracle.outcome(p) for p, key in enumerate(oracle.keys)} == numbers


def test_dataset_oracle_reads_bags_datasets(tmp_path):
    """The dataset oracle reads what the real `bags` 0.5.1 writes as `bags`
    reads it, masks and Arrow columns included."""
    bags = pytest.importorskip("bags")
    import bags.formats

    _runner()
    from fuzz.dataset_oracle import column, open_dataset

    spec = {"b": "bytes", "n": "int(8)", "t": "utf8", "w": "utf8[]", "m": "msgpack"}
    points = [{"b": bytes([i]) * i, "n": i * 7, "t": "é" * i, "w": ["x"] * i, "m": {"i": i}}
              for i in range(6)]
    folder = str(tmp_path / "ds")
    with bags.DatasetWriter(folder, spec, bags.formats.encoders) as writer:
        for point in points:
            writer.append(point)
    oracle = open_dataset(folder)
    theirs = bags.DatasetReader(folder, bags.formats.decoders)
    assert len(oracle) == len(points)
    assert [oracle.datapoint(i) for i in range(6)] == [theirs[i] for i in range(6)] == points
    assert oracle.datapoint(4, {"w": (1, 3)}) == {"w": ["x", "x"]}
    assert oracle.datapoint(4, {"n": True, "w": False}) == {"n": 28}
    assert column(oracle, "t") == [p["t"] for p in points]
    import msgpack

    stored = column(oracle, "m")  # Arrow has no msgpack type: the stored bytes
    assert [msgpack.unpackb(value) for value in stored] == [p["m"] for p in points]
