"""Masks: which fields (and which items of list fields) a read returns.

A mask maps field names to `True` / `False`, or for list fields to a
`range` / `slice` of the list (start >= 0, stop >= 0, step 1; the stop is
clipped to the list's length). Fields not in the mask are not read. `None`
reads every field whole.

The rules are the engine's (native/datasets/dataset_read_plan.h): a mask
becomes a `DatasetReadPlan` once, and every read with that mask uses it.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Mapping

from .. import _engine

__all__ = ["FieldSpecs", "MaskPlans", "check_mask", "resolve_mask"]

# A dataset's fields in spec order as the engine's plans take them: (name,
# is_list, value kind, int size, big-endian) (see _batch_values.native_kind).
FieldSpecs = list[tuple[str, bool, int, int, bool]]


def resolve_mask(
    mask: Mapping[str, Any] | None, fields: FieldSpecs, where: str
) -> _engine.DatasetReadPlan:
    """The engine's read plan of `mask` (native/datasets/dataset_read_plan.h):
    the fields to read (their spec positions), list ranges and codecs.

    Raises TypeError for a mask that is not a dict, a non-bool for a scalar
    field or an unsupported value (as `bags` does), ValueError for a field
    the spec does not have or a bad range. `where` (the dataset folder)
    prefixes messages.
    """
    return _engine.DatasetReadPlan(fields, mask, where)


def check_mask(mask: Any) -> dict[str, Any] | None:
    """A mask's shape, checked without a spec (by the engine's rules; field
    names and list ranges are checked against the spec when shards are
    read): a copy as a dict, None for None. Raises TypeError for a mask that
    is not a dict or a value that is not a bool, range or slice."""
    return None if mask is None else _engine.check_dataset_mask(mask)


# Distinct hashable masks whose plans a reader keeps.
_CACHED_PLANS = 64


class MaskPlans:
    """`resolve_mask` for one dataset's fields, then `compile` of the plan,
    remembering the results for recent masks: a loop reading `r[i, mask]`
    with the same mask resolves and compiles it once. Masks with unhashable
    values (slices) are resolved each time."""

    def __init__(self, fields: FieldSpecs, where: str,
                 compile: Callable[[_engine.DatasetReadPlan], Any]) -> None:
        self._fields = fields
        self._where = where
        self._compile = compile
        self._all = compile(resolve_mask(None, fields, where))
        # mask items -> (their values, the values' types, their ranges'
        # steps or None, compiled plan)
        self._plans: dict[Any, tuple[tuple[Any, ...], tuple[type, ...], Any, Any]] = {}

    def get(self, mask: Mapping[str, Any] | None) -> Any:
        """`compile` of the plan of `mask` (see resolve_mask); raises as
        resolve_mask does."""
        if mask is None:
            return self._all
        try:
            cached = self._plans.get(tuple(mask.items()))
        except (TypeError, AttributeError):  # unhashable values, or not a dict
            return self._compile(resolve_mask(mask, self._fields, self._where))
        if cached is not None:
            values, types, steps, compiled = cached
            # Equal masks are not always the same mask: True == 1, but only
            # True is a mask; range(3, 4) == range(3, 4, 2), but only the
            # first is valid. The very values cached are (a loop reading with
            # one mask: the first test, the cheap one); others must match in
            # type and in their ranges' steps.
            if all(map(operator.is_, values, mask.values())) or (
                    types == tuple(map(type, mask.values()))
                    and (steps is None or steps == _range_steps(mask))):
                return compiled
        compiled = self._compile(resolve_mask(mask, self._fields, self._where))
        if len(self._plans) >= _CACHED_PLANS:
            self._plans.clear()
        values = tuple(mask.values())
        types = tuple(map(type, values))
        self._plans[tuple(mask.items())] = (
            values, types, _range_steps(mask) if range in types else None, compiled)
        return compiled


def _range_steps(mask: Mapping[str, Any]) -> tuple[int, ...]:
    """The steps of the mask's range values, in order."""
    return tuple(value.step for value in mask.values() if type(value) is range)
