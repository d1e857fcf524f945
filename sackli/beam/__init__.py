"""Apache Beam connectors for bags (needs the `beam` extra:
`pip install 'sackli[beam]'`). See `sackli.beam.sacklio`."""

try:
    import apache_beam  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "sackli.beam needs Apache Beam: install it with pip install 'sackli[beam]'"
    ) from error

from ._file_sink import SackliSink
from .sacklio import ReadAllFromSackli, ReadFromSackli, ReadFromSackliBatched, WriteToSackli

__all__ = ["ReadAllFromSackli", "ReadFromSackli", "ReadFromSackliBatched", "SackliSink",
           "WriteToSackli"]
