"""The built-in codecs of sackli.datasets: the bytes `bags` writes for each,
and the optional libraries imported only when used."""

from __future__ import annotations

import bags
import numpy as np
import pytest

from sackli import datasets


@pytest.mark.parametrize("dtype, args, value", [
    ("bytes", (), b"\0raw"),
    ("utf8", (), "grüße"),
    ("msgpack", (), {"a": [1, 2.5, None, b"x"]}),
    ("int", (), 0), ("int", (), 255), ("int", (), 256), ("int", (), 2 ** 40 + 3),
    ("int", ("4",), 7), ("int", ("2", "big"), 258),
    ("array", ("float32", "2", "3"), np.arange(6, dtype=np.float32).reshape(2, 3)),
    ("array", ("uint8",), np.array(5, np.uint8)),
    ("png", (), np.arange(48, dtype=np.uint8).reshape(4, 4, 3)),
    ("jpeg", ("80",), np.full((8, 8, 3), 100, np.uint8)),
])
def test_encoders_write_the_bytes_bags_writes(dtype, args, value):
    ours = datasets.encoders[dtype](value, *args)
    assert ours == bags.encoders[dtype](value, *args)
    decoded = datasets.decoders[dtype](ours, *args)
    expected = bags.decoders[dtype](ours, *args)
    if isinstance(expected, np.ndarray):
        np.testing.assert_array_equal(decoded, expected)
    else:
        assert decoded == expected


def test_int_without_size_takes_the_fewest_bytes():
    values = (0, 1, 255, 256, 65535, 65536, 2 ** 64 - 1)
    assert [len(datasets.encoders["int"](v)) for v in values] == [0, 1, 1, 2, 2, 3, 8]
    assert datasets.decoders["int"](datasets.encoders["int"](2 ** 64 - 1)) == 2 ** 64 - 1
    assert datasets.decoders["int"](b"") == 0


def test_dataset_without_media_fields_imports_no_media_library(run_python):
    result = run_python("""
        import sys
        from sackli import datasets
        spec = {"a": "utf8", "b": "int(4)", "c": "bytes[]", "d": "msgpack"}
        with datasets.DatasetWriter("ds", spec) as writer:
            writer.append({"a": "x", "b": 1, "c": [b"y"], "d": [1]})
        assert datasets.DatasetReader("ds")[0] == {"a": "x", "b": 1, "c": [b"y"], "d": [1]}
        report(lambda: sorted(m for m in ("numpy", "PIL", "av") if m in sys.modules))
    """)
    assert result.outcome() == {"ok": "[]"}


@pytest.mark.parametrize("library, spec, extra", [
    ("PIL", "png", "sackli-bagz[images]"), ("PIL", "jpeg(90)", "sackli-bagz[images]"),
    ("av", "mp4(15)", "sackli-bagz[video]"),
])
def test_missing_media_library_names_the_extra(run_python, library, spec, extra):
    result = run_python(f"""
        import sys
        import numpy as np
        sys.modules[{library!r}] = None  # as if it were not installed
        from sackli import datasets
        writer = datasets.DatasetWriter("ds", {{"x": {spec!r}}})
        report(lambda: writer.append({{"x": np.zeros((2, 8, 8, 3), np.uint8)}}))
    """)
    outcome = result.outcome()
    assert outcome["error"] == "ImportError"
    assert extra in outcome["message"]
