"""Apache Beam connectors for bags and datasets (needs the `beam` extra:
`pip install 'sackli-bagz[beam]'`). See `sackli.beam.sacklio` and
`sackli.beam.datasetio`.

No other package imports Beam.
Internal interface: none
"""

try:
    import apache_beam  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "sackli.beam needs Apache Beam: install it with pip install 'sackli-bagz[beam]'"
    ) from error

from ._file_sink import SackliSink
from .datasetio import ReadFromSackliDataset, WriteToSackliDataset
from .sacklio import ReadAllFromSackli, ReadFromSackli, ReadFromSackliBatched, WriteToSackli

__all__ = ["ReadAllFromSackli", "ReadFromSackli", "ReadFromSackliBatched",
           "ReadFromSackliDataset", "SackliSink", "WriteToSackli", "WriteToSackliDataset"]
