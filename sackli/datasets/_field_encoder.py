"""`FieldEncoder`: encodes one field's values for a dataset writer, with
errors that name the field and its file."""

from __future__ import annotations

from typing import Any, Callable

from ._spec import FieldType

__all__ = ["FieldEncoder", "all_bytes"]


def all_bytes(values: list[Any]) -> bool:
    """Whether every value is bytes (one C-level pass over their types)."""
    return set(map(type, values)) <= {bytes} or all(isinstance(v, bytes) for v in values)


class FieldEncoder:
    """Calls the field's encoder (its type arguments bound) on a value, or on
    each item of a list field, and checks that it returned bytes.

    Raises ValueError when the encoder raises (an ImportError of a missing
    codec library passes as it is), TypeError when it returns something
    else than bytes or a list field's value is not iterable.
    """

    __slots__ = ("field", "ftype", "path", "_encode")

    def __init__(self, field: str, ftype: FieldType, encode: Callable[[Any], Any],
                 path: str) -> None:
        self.field = field
        self.ftype = ftype
        self.path = path
        self._encode = encode

    def __call__(self, value: Any) -> Any:
        if not self.ftype.is_list:
            try:
                encoded = self._encode(value)
            except ImportError:
                raise  # a missing codec library is not the value's fault
            except Exception as error:
                raise self._rejected(error) from error
            if type(encoded) is not bytes and not isinstance(encoded, bytes):
                raise self._not_bytes(encoded)
            return encoded
        try:
            items = iter(value)
        except TypeError:
            raise TypeError(f"{self._where()} is a list field; got {type(value).__name__}") from None
        try:
            encoded_items = list(map(self._encode, items))
        except ImportError:
            raise
        except Exception as error:
            raise self._rejected(error) from error
        if not all_bytes(encoded_items):
            raise self._not_bytes(next(x for x in encoded_items if not isinstance(x, bytes)))
        return encoded_items

    def _where(self) -> str:
        return f"field {self.field!r} ({self.path})"

    def _rejected(self, error: Exception) -> ValueError:
        return ValueError(
            f"{self._where()}: the {self.ftype.dtype} encoder rejected a value: {error!r}")

    def _not_bytes(self, encoded: Any) -> TypeError:
        return TypeError(
            f"{self._where()}: the {self.ftype.dtype} encoder returned "
            f"{type(encoded).__name__}, not bytes")
