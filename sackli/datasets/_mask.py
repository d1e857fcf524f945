"""Masks: which fields (and which items of list fields) a read returns.

A mask maps field names to `True` / `False`, or for list fields to a
`range` / `slice` of the list (start >= 0, stop >= 0, step 1; the stop is
clipped to the list's length). Fields not in the mask are not read. `None`
reads every field whole.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Mapping, Union

from ._spec import FieldType

__all__ = ["MaskPlans", "Plan", "Selection", "resolve_mask"]

# True: the whole value or list; (start, stop): that part of a list.
Selection = Union[bool, tuple[int, "int | None"]]


def _list_part(field: str, value: range | slice, where: str) -> tuple[int, int | None]:
    start = 0 if value.start is None else value.start
    stop = value.stop
    if (value.step not in (None, 1) or not isinstance(start, int) or start < 0
            or (stop is not None and (not isinstance(stop, int) or stop < 0))):
        raise ValueError(
            f"{where}: the mask of list field {field!r} must have start >= 0, stop >= 0 and "
            f"step 1, not {value}")
    return start, stop


def resolve_mask(
    mask: Mapping[str, Any] | None, fields: Mapping[str, FieldType], where: str
) -> list[tuple[int, str, FieldType, Selection]]:
    """(position in the spec, field, type, selection) of each field to read.

    Raises TypeError for a mask that is not a dict, a non-bool for a scalar
    field or an unsupported value (as `bags` does), ValueError for a field
    the spec does not have or a bad range. `where` (the dataset folder)
    prefixes messages.
    """
    if mask is None:
        return [(i, field, ftype, True) for i, (field, ftype) in enumerate(fields.items())]
    if not isinstance(mask, Mapping):
        raise TypeError(f"{where}: a mask must be a dict, not {type(mask).__name__}")
    unknown = [field for field in mask if field not in fields]
    if unknown:
        raise ValueError(
            f"{where}: the mask names fields the dataset does not have: "
            f"{', '.join(map(repr, unknown))} (fields: {', '.join(map(repr, fields))})")
    plan = []
    for i, (field, ftype) in enumerate(fields.items()):
        value = mask.get(field, False)
        if ftype.is_list and not isinstance(value, slice) and not value:
            continue  # as `bags`: a falsy mask (False, an empty range) skips a list field
        if isinstance(value, bool):
            if value:
                plan.append((i, field, ftype, value))
        elif ftype.is_list and isinstance(value, (range, slice)):
            plan.append((i, field, ftype, _list_part(field, value, where)))
        elif ftype.is_list:
            raise TypeError(
                f"{where}: the mask of list field {field!r} must be a bool, range or slice, "
                f"not {type(value).__name__}")
        else:
            raise TypeError(
                f"{where}: the mask of scalar field {field!r} must be a bool, "
                f"not {type(value).__name__}")
    return plan


Plan = list[tuple[int, str, FieldType, Selection]]

# Distinct hashable masks whose plans a reader keeps.
_CACHED_PLANS = 64


class MaskPlans:
    """`resolve_mask` for one dataset's fields, then `compile` of the plan,
    remembering the results for recent masks: a loop reading `r[i, mask]`
    with the same mask resolves and compiles it once. Masks with unhashable
    values (slices) are resolved each time."""

    def __init__(self, fields: Mapping[str, FieldType], where: str,
                 compile: Callable[[Plan], Any]) -> None:
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
