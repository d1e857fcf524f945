"""What the sackli.datasets test files share: a spec using every built-in
codec, datapoints for it, and a comparison that understands arrays."""

from __future__ import annotations

import numpy as np

ALL_CODECS_SPEC = {
    "a": "utf8", "b": "int(4)", "c": "utf8[]", "d": "msgpack", "e": "int[]", "f": "bytes",
    "g": "array(float32,10,4)", "h": "jpeg(80)", "i": "png", "j": "mp4(15)",
}


def all_codecs_datapoint(i: int) -> dict:
    """A datapoint for ALL_CODECS_SPEC (small images and a tiny video)."""
    return {
        "a": "hello world", "b": i, "c": [f"word{j}" for j in range(i)],
        "d": {"foo": "bar", "baz": 12}, "e": list(range(i)), "f": b"hello world",
        "g": np.full((10, 4), i, np.float32), "h": np.zeros((32, 24, 3), np.uint8),
        "i": np.full((16, 12, 4), i, np.uint8), "j": np.zeros((4, 32, 16, 3), np.uint8),
    }


def assert_same_datapoint(actual: dict, expected: dict) -> None:
    """Equal keys and values, arrays compared element-wise."""
    assert actual.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(actual[key], value)
        else:
            assert actual[key] == value
