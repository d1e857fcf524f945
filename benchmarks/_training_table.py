"""Issue 50's training table: 13 columns of every kind a data engineer's table holds.

ints with nulls, doubles with NaN, large_string, a dictionary column, a list,
a struct, timestamps with a time zone, date32, decimal128, fixed binary(16)
and a bool. Deterministic for a seed, so every benchmark that imports it (the
table-format comparison, the dictionary sizes) measures the same bytes.

    from _training_table import training_table
    table = training_table(1_000_000)
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa

_WORDS = np.array(["click", "view", "buy", "scroll", "share", "Zürich", "search", "cart",
                   "checkout", "login", "logout", "rate"])
_COUNTRIES = np.array(["CH", "DE", "FR", "IT", "US", "GB", "JP", "BR", "IN", "ES"])


def training_table(rows: int, seed: int = 0) -> pa.Table:
    """A deterministic 13-column table of `rows` narrow rows (about 130 bytes each)."""
    rng = np.random.default_rng(seed)

    def nulls(share: float) -> np.ndarray:
        return rng.random(rows) < share

    def words(count: int) -> np.ndarray:
        return _WORDS[rng.integers(0, len(_WORDS), count)]

    session_words = words(rows * 3).reshape(rows, 3)
    sessions = [" ".join(row) for row in session_words]
    doubles = rng.normal(0.0, 1.0, rows)
    doubles[rng.random(rows) < 0.02] = np.nan
    tag_counts = rng.integers(0, 5, rows)
    tag_offsets = np.concatenate([[0], np.cumsum(tag_counts)]).astype(np.int32)
    cents = rng.integers(0, 10**9, rows)
    return pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "user": pa.array(rng.integers(0, 10**7, rows), pa.int64(), mask=nulls(0.05)),
        "score": pa.array(doubles),
        "session": pa.array(sessions, pa.large_string()),
        "country": pa.array(_COUNTRIES[rng.integers(0, len(_COUNTRIES), rows)]).dictionary_encode(),
        "tags": pa.ListArray.from_arrays(tag_offsets,
                                         pa.array(words(int(tag_offsets[-1]))),
                                         mask=pa.array(nulls(0.1))),
        "point": pa.StructArray.from_arrays(
            [pa.array(rng.random(rows)), pa.array(rng.integers(0, 1000, rows).astype(np.int32))],
            names=["x", "level"], mask=pa.array(nulls(0.1))),
        "event_time": pa.array(1_700_000_000_000_000 + rng.integers(0, 10**13, rows),
                               pa.timestamp("us", "Europe/Zurich")),
        "day": pa.array(rng.integers(19000, 20000, rows).astype(np.int32)).cast(pa.date32()),
        "price": pa.array([decimal.Decimal(int(c)).scaleb(-2) for c in cents],
                          pa.decimal128(12, 2), mask=nulls(0.05)),
        "digest": pa.array([bytes(row) for row in rng.integers(0, 256, (rows, 16), np.uint8)],
                           pa.binary(16)),
        "clicked": pa.array(rng.random(rows) < 0.3, mask=nulls(0.05)),
        "weight": pa.array(rng.random(rows).astype(np.float32), mask=nulls(0.1)),
    })
