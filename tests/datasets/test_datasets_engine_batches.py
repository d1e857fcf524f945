"""Batches of datapoints built by the engine (_engine.read_datapoints): the
same datapoints as reading each one alone, for every built-in codec, masks
and repeats; and every batch the engine does not take (bad refs, values that
do not decode) still raises the error that names the problem."""

from __future__ import annotations

import os
import random

import msgpack
import numpy as np
import pytest

import sackli
import sackli._engine
from sackli import datasets

from datasets_helpers import assert_same_datapoint

SPEC = {
    "bytes": "bytes", "text": "utf8", "u1": "int(1)", "u2be": "int(2,big)", "u8": "int(8)",
    "words": "utf8[]", "blobs": "bytes[]", "numbers": "int(4)[]", "meta": "msgpack",
    "vector": "array(float32,3)", "tags": "msgpack[]",
}
N = 300


def datapoint(i: int) -> dict:
    rng = random.Random(i)
    return {
        "bytes": rng.randbytes(rng.randrange(0, 200)),
        "text": "".join(rng.choice("aé漢🙂 ") for _ in range(rng.randrange(0, 12))),
        "u1": i % 256, "u2be": (i * 37) % 65536, "u8": rng.randrange(1 << 64),
        "words": [f"w{i}-{j}" for j in range(rng.randrange(0, 6))],
        "blobs": [rng.randbytes(rng.randrange(0, 9)) for _ in range(rng.randrange(0, 4))],
        "numbers": [rng.randrange(1 << 32) for _ in range(rng.randrange(0, 5))],
        "meta": {"i": i, "odd": bool(i % 2)},
        "vector": np.full(3, i, np.float32),
        "tags": [[i, "t"]] * rng.randrange(0, 3),
    }


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("engine-batches") / "ds")
    with datasets.DatasetWriter(path, SPEC) as writer:
        for i in range(N):
            writer.append(datapoint(i))
    return path


class EngineCalls(list):
    """Each call of _engine.read_datapoints and its result; with `declining`
    set, every call returns None, as the engine does for a batch out of the
    ordinary (so reads take the field-by-field way: the reference here)."""

    declining = False


@pytest.fixture
def engine_calls(monkeypatch) -> EngineCalls:
    calls = EngineCalls()
    real = sackli._engine.read_datapoints

    def counted(*args):
        result = None if calls.declining else real(*args)
        calls.append(result)
        return result
    monkeypatch.setattr(sackli._engine, "read_datapoints", counted)
    return calls


def field_by_field(reader, engine_calls, read):
    """read() with the engine declining every batch."""
    engine_calls.declining = True
    try:
        return read()
    finally:
        engine_calls.declining = False


MASKS = [
    None, {"text": True}, {"words": range(1, 3)}, {"words": slice(2, None), "u8": True},
    {"blobs": range(0, 1), "numbers": True, "meta": True}, {"tags": range(5, 9)},
    {"vector": True, "u1": True, "u2be": True, "bytes": True},
]


@pytest.mark.parametrize("mask", MASKS, ids=str)
def test_engine_reads_match_field_by_field_reads(folder, engine_calls, mask) -> None:
    reader = datasets.DatasetReader(folder)
    rng = random.Random(5)
    rows = [rng.randrange(N) for _ in range(200)] + [7, 7, -1, -N]
    batch = reader.read_indices(rows, mask)
    assert engine_calls and type(engine_calls[-1]) is list  # the engine built it
    assert len(batch) == len(rows)
    single = [reader[row] if mask is None else reader[row, mask] for row in rows]
    expected = field_by_field(reader, engine_calls, lambda: [
        reader[row] if mask is None else reader[row, mask] for row in rows])
    for got, alone, reference in zip(batch, single, expected):
        assert_same_datapoint(got, reference)
        assert_same_datapoint(alone, reference)
    # Repeated rows are separate dicts with separate lists.
    first, second = batch[200], batch[201]
    assert first is not second
    if "words" in first:
        assert first["words"] == second["words"] and first["words"] is not second["words"]


def test_engine_batches_match_bags(folder, engine_calls) -> None:
    bags = pytest.importorskip("bags")
    import bags.formats
    theirs = bags.DatasetReader(folder, bags.formats.decoders)
    ours = datasets.DatasetReader(folder)
    rows = list(range(0, N, 3))
    batch = ours.read_indices(rows)
    assert type(engine_calls[-1]) is list
    for row, got in zip(rows, batch):
        assert_same_datapoint(got, theirs[row])


def _rewrite(folder: str, tmp_path, field: str, records: dict[int, bytes]) -> str:
    """A copy of the dataset whose bags file `field` has `records` replaced."""
    copy = str(tmp_path / "copy")
    os.makedirs(copy)
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as src, \
                open(os.path.join(copy, name), "wb") as dst:
            dst.write(src.read())
    path = os.path.join(copy, f"{field}.bag")
    old = datasets.BagReader(path)
    values = [records.get(i, old[i]) for i in range(len(old))]
    old.close()
    os.remove(path)
    with datasets.BagWriter(path) as writer:
        for value in values:
            writer.append(value)
    return copy


def test_refs_the_engine_does_not_take_raise_as_before(folder, tmp_path, engine_calls) -> None:
    refs = datasets.BagReader(os.path.join(folder, "refs.bag"))
    good = msgpack.unpackb(refs[40])
    refs.close()
    bad = list(good)
    bad[0] = -3  # a negative record index for `blobs` (sorted field order)
    copy = _rewrite(folder, tmp_path, "refs", {40: msgpack.packb(bad)})
    reader = datasets.DatasetReader(copy)
    with pytest.raises(sackli.CorruptionError, match="datapoint 40"):
        reader.read_indices(range(30, 60))
    # The engine stopped (row 10 of the batch: datapoint 40); the slower way raised.
    stopped = engine_calls[-1]
    assert isinstance(stopped, sackli._engine.DatasetReadError)
    assert (stopped.row, stopped.field, stopped.reason) == (10, None, "bad refs")
    assert len(reader.read_indices(range(0, 30))) == 30


def test_a_ref_past_its_field_raises_naming_the_field(folder, tmp_path, engine_calls) -> None:
    refs = datasets.BagReader(os.path.join(folder, "refs.bag"))
    good = msgpack.unpackb(refs[12])
    fields = sorted(SPEC)
    refs.close()
    bad = list(good)
    bad[fields.index("text")] = N + 5
    copy = _rewrite(folder, tmp_path, "refs", {12: msgpack.packb(bad)})
    with pytest.raises(sackli.CorruptionError, match="text"):
        datasets.DatasetReader(copy).read_indices(range(0, 40))
    stopped = engine_calls[-1]
    assert isinstance(stopped, sackli._engine.DatasetReadError)
    assert (stopped.row, stopped.field, stopped.reason) == (
        12, fields.index("text"), "ref outside the field")


def test_text_that_is_not_utf8_raises_naming_the_record(folder, tmp_path, engine_calls) -> None:
    copy = _rewrite(folder, tmp_path, "text", {9: b"\xff\xfe"})
    with pytest.raises(ValueError, match="record 9 of field 'text'"):
        datasets.DatasetReader(copy).read_indices(range(0, 40))
    stopped = engine_calls[-1]
    assert isinstance(stopped, sackli._engine.DatasetReadError)
    assert (stopped.row, stopped.field, stopped.reason) == (
        9, sorted(SPEC).index("text"), "value not decoded")


def test_an_int_of_another_size_decodes_as_bags_does(folder, tmp_path, engine_calls) -> None:
    copy = _rewrite(folder, tmp_path, "u1", {3: b"\x01\x02"})
    batch = datasets.DatasetReader(copy).read_indices(range(0, 40), {"u1": True})
    stopped = engine_calls[-1]
    assert isinstance(stopped, sackli._engine.DatasetReadError)
    assert (stopped.row, stopped.field, stopped.reason) == (3, 0, "value not decoded")
    assert batch[3] == {"u1": 0x0201}  # int.from_bytes, little-endian
    assert batch[4] == {"u1": 4}


def test_a_decoder_that_fails_raises_naming_the_record(folder, tmp_path) -> None:
    copy = _rewrite(folder, tmp_path, "meta", {20: b"\xc1"})  # never valid msgpack
    with pytest.raises(ValueError, match="record 20 of field 'meta'"):
        datasets.DatasetReader(copy).read_indices(range(0, 40))


def test_custom_decoders_run_on_engine_batches(folder, engine_calls) -> None:
    decoders = dict(datasets.decoders)
    decoders["utf8"] = lambda buffer: buffer.decode("utf-8").upper()
    reader = datasets.DatasetReader(folder, decoders=decoders)
    batch = reader.read_indices(range(0, 50), {"text": True, "words": True})
    assert type(engine_calls[-1]) is list
    assert [d["text"] for d in batch] == [datapoint(i)["text"].upper() for i in range(50)]
    assert [d["words"] for d in batch] == [[w.upper() for w in datapoint(i)["words"]]
                                           for i in range(50)]


@pytest.mark.parametrize("target", ["refs", "words", "text", "u8", "bytes"])
def test_random_damage_never_crashes_a_batch(folder, tmp_path, engine_calls, target) -> None:
    """Random bytes changed in one file of the dataset: a batch read returns
    datapoints or raises a clean error, never crashes or hangs; where it
    returns, every datapoint equals what reading it alone returns."""
    rng = random.Random(hash(target) & 0xFFFF)
    path = os.path.join(folder, f"{target}.bag")
    with open(path, "rb") as file:
        original = file.read()
    copy = tmp_path / "damaged"
    for trial in range(40):
        damaged = bytearray(original)
        for _ in range(rng.randrange(1, 6)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        if copy.exists():
            for name in os.listdir(copy):
                os.remove(copy / name)
        else:
            copy.mkdir()
        for name in os.listdir(folder):
            data = bytes(damaged) if name == f"{target}.bag" else open(
                os.path.join(folder, name), "rb").read()
            (copy / name).write_bytes(data)
        try:
            reader = datasets.DatasetReader(str(copy))
        except (sackli.CorruptionError, ValueError):
            continue
        rows = [rng.randrange(N) for _ in range(64)]
        try:
            batch = reader.read_indices(rows)
        except (sackli.CorruptionError, ValueError, IndexError):
            reader.close()
            continue
        for row, got in zip(rows, batch):
            try:
                alone = field_by_field(reader, engine_calls, lambda: reader[row])
            except (sackli.CorruptionError, ValueError):
                pytest.fail(f"trial {trial}: row {row} reads in a batch but not field by field")
            assert_same_datapoint(got, alone)
        reader.close()


def test_engine_refs_columns_match_the_per_record_parse(folder) -> None:
    """The refs as columns (sackli.arrow's dataset tables, sackli verify):
    the engine's bulk parse gives what msgpack record by record gives."""
    from sackli import _bulk
    from sackli.datasets import _ref_columns
    with _ref_columns.ShardFiles(folder) as shard:
        rows = [5, 0, 299, 17, 17, 120]
        fields = ["words", "u8", "tags", "bytes"]
        bulk = _ref_columns.read_field_refs(shard, rows, fields)
        data, offsets = _bulk.start_read_indices(shard.refs, rows).packed()
        wanted = [(f, sorted(SPEC).index(f), SPEC[f].endswith("[]")) for f in fields]
        one_by_one = _ref_columns._parse_records(shard, rows, data, offsets, wanted)
    for field in fields:
        assert list(bulk[field].starts) == list(one_by_one[field].starts), field
        if bulk[field].lengths is None:
            assert one_by_one[field].lengths is None
        else:
            assert list(bulk[field].lengths) == list(one_by_one[field].lengths), field


LIST_MASKS = [None, {"words": True}, {"words": range(1, 3)}, {"numbers": slice(1, None), "u8": True},
              {"tags": True, "blobs": range(0, 2)}]


@pytest.mark.parametrize("mask", LIST_MASKS, ids=str)
def test_a_single_datapoint_with_a_list_field_is_one_engine_call(folder, engine_calls,
                                                                 mask) -> None:
    reader = datasets.DatasetReader(folder)
    rows = [0, 17, N - 1, -2]
    read = [reader[row] if mask is None else reader[row, mask] for row in rows]
    assert len(engine_calls) == len(rows) and all(type(call) is list for call in engine_calls)
    expected = field_by_field(reader, engine_calls, lambda: [
        reader[row] if mask is None else reader[row, mask] for row in rows])
    for got, reference in zip(read, expected):
        assert_same_datapoint(got, reference)


def test_a_single_datapoint_of_scalars_is_read_record_by_record(folder, engine_calls) -> None:
    reader = datasets.DatasetReader(folder)
    assert reader[5, {"u8": True, "text": True}] == {
        "u8": datapoint(5)["u8"], "text": datapoint(5)["text"]}
    assert engine_calls == []


def test_a_list_item_that_is_not_utf8_raises_for_a_single_datapoint(folder, tmp_path,
                                                                     engine_calls) -> None:
    refs = datasets.BagReader(os.path.join(folder, "refs.bag"))
    position = sorted(SPEC).index("words")
    words_refs = [msgpack.unpackb(refs[i])[position] for i in range(N)]  # [] or [start, count]
    row = next(i for i, ref in enumerate(words_refs) if ref and ref[1] > 0)
    record = words_refs[row][0]
    refs.close()
    copy = _rewrite(folder, tmp_path, "words", {record: b"\xff\xfe"})
    reader = datasets.DatasetReader(copy)
    with pytest.raises(ValueError, match=f"record {record} of field 'words'"):
        reader[row, {"words": True}]
    stopped = engine_calls[-1]  # the engine stopped; the slower way raised
    assert isinstance(stopped, sackli._engine.DatasetReadError)
    assert (stopped.row, stopped.field, stopped.reason) == (0, 0, "value not decoded")
    assert reader[row, {"u8": True}] == {"u8": datapoint(row)["u8"]}


@pytest.mark.parametrize("field", ["text", "bytes"])
def test_a_bool_ref_is_damage_in_batches_as_in_single_reads(folder, tmp_path, field) -> None:
    # msgpack's True would index record 1 if taken for an int (found by the fuzzer).
    refs = datasets.BagReader(os.path.join(folder, "refs.bag"))
    bad = list(msgpack.unpackb(refs[4]))
    refs.close()
    bad[sorted(SPEC).index(field)] = True
    copy = _rewrite(folder, tmp_path, "refs", {4: msgpack.packb(bad)})
    reader = datasets.DatasetReader(copy)
    with pytest.raises(sackli.CorruptionError, match="datapoint 4 refers to True"):
        reader[4]
    with pytest.raises(sackli.CorruptionError, match="datapoint 4 refers to True"):
        reader.read_indices(range(0, 10))


def test_a_read_plan_holds_a_masks_fields_and_list_ranges() -> None:
    """The engine's DatasetReadPlan, as the readers use it: the spec
    positions a mask reads, and each list's items clipped to its range."""
    fields = [("label", False, 2, 8, False), ("tags", True, 0, 0, False),
              ("words", True, 1, 0, False)]
    plan = sackli._engine.DatasetReadPlan(fields, {"words": slice(1, 3), "label": True}, "W")
    assert plan.positions == [0, 2] and plan.any_list
    # Lists [10, 15), [20, 21) and [30, 30) of `words`: items 1 and 2 of each.
    assert plan.list_items(1, [10, 20, 30], [15, 21, 30]) == ([11, 21, 31], [13, 21, 31])
    whole = sackli._engine.DatasetReadPlan(fields, None, "W")
    assert whole.positions == [0, 1, 2]
    assert whole.list_items(1, [10], [15]) == ([10], [15])
    assert not sackli._engine.DatasetReadPlan(fields, {"label": True}, "W").any_list


@pytest.mark.parametrize("mask,error,message", [
    ([("label", True)], TypeError, "W: a mask must be a dict, not list"),
    ({"label": 1}, TypeError, "W: the mask of scalar field 'label' must be a bool, not int"),
    ({"tags": "x"}, TypeError,
     "W: the mask of list field 'tags' must be a bool, range or slice, not str"),
    ({"tags": range(0, 4, 2)}, ValueError,
     "W: the mask of list field 'tags' must have start >= 0, stop >= 0 and step 1, "
     "not range(0, 4, 2)"),
    ({"caption": True, 3: False}, ValueError,
     "W: the mask names fields the dataset does not have: 'caption', 3 "
     "(fields: 'label', 'tags')"),
])
def test_a_read_plan_refuses_a_bad_mask_with_the_message_users_see(mask, error,
                                                                    message) -> None:
    fields = [("label", False, 2, 8, False), ("tags", True, 0, 0, False)]
    with pytest.raises(error) as raised:
        sackli._engine.DatasetReadPlan(fields, mask, "W")
    assert str(raised.value) == message


def test_a_falsy_list_mask_is_asked_its_truth_only_for_a_list_field() -> None:
    # numpy refuses a truth for arrays: a list field asks (as `bags` does,
    # raising numpy's error), a scalar field refuses the type first.
    fields = [("label", False, 2, 8, False), ("tags", True, 0, 0, False)]
    with pytest.raises(ValueError, match="truth value"):
        sackli._engine.DatasetReadPlan(fields, {"tags": np.array([1, 2])}, "W")
    with pytest.raises(TypeError, match="must be a bool, not ndarray"):
        sackli._engine.DatasetReadPlan(fields, {"label": np.array([1, 2])}, "W")
    # Falsy values skip a list field, as in `bags`.
    for falsy in (0, None, "", range(0)):
        assert sackli._engine.DatasetReadPlan(fields, {"tags": falsy}, "W").positions == []
