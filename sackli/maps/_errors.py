"""The exception of a map that is not what its header and index promise."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .. import CorruptionError


class ValidationError(CorruptionError):
    """A map is damaged or not a map: wrong magic, unknown version or
    compression, an index that is truncated or out of order, a value whose
    crc32c does not match or that does not decompress. The message names the
    file (or ``<bytes>``), the byte offset and the key where one is concerned.
    A `sackli.CorruptionError`, hence a `ValueError`."""


def as_validation_error(error: CorruptionError) -> ValidationError:
    """The engine's corruption error as the `ValidationError` `mapbuffer`
    users catch (for hot paths, where a context manager costs too much)."""
    return error if isinstance(error, ValidationError) else ValidationError(str(error))


@contextlib.contextmanager
def corruption_as_validation_error() -> Iterator[None]:
    """Re-raises the engine's corruption errors as `ValidationError`."""
    try:
        yield
    except CorruptionError as error:
        raise as_validation_error(error) from None
