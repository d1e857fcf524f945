"""refs.bag: one msgpack list per datapoint, one entry per field in sorted
field order: the record index for a scalar field, `[start, length]` for a
non-empty list field and `[]` for an empty one (as `bags` 0.5.1 writes)."""

from __future__ import annotations

from typing import Any

import msgpack

__all__ = ["pack_refs", "unpack_refs"]

Ref = Any  # int | list[int]


def pack_refs(refs: list[Ref]) -> bytes:
    """A datapoint's refs as stored in refs.bag."""
    return msgpack.packb(refs)


# A refs.bag record as the list of refs: msgpack's own function, as a
# wrapper would cost a Python call per datapoint read.
unpack_refs = msgpack.unpackb
