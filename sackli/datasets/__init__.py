"""sackli.datasets: multi-field datasets, a drop-in for danijar's `bags` 0.5.1.

A dataset is a folder of shard folders `000000/`, `000001/`, ...; each shard
holds `spec.json` (field -> type), `refs.bag` (per datapoint, where each
field's values are) and one `<field>.bag` per field. The files are
byte-identical to those `bags` writes, so either package reads the other's
datasets; sackli reads and writes them with its engine (a `bags` file is a
Bagz file whose first record is empty) and adds batch reads.

    >>> from sackli import datasets
    >>> spec = {"label": "int(8)", "words": "utf8[]"}
    >>> with datasets.ShardedDatasetWriter("ds", spec, shard_length=1000) as writer:
    ...     writer.append({"label": 1, "words": ["a", "b"]})
    >>> reader = datasets.ShardedDatasetReader("ds")
    >>> reader[0, {"words": range(1)}]
    {'words': ['a']}
    >>> batch = reader.read_indices([0, 0], mask={"label": True})

See docs/datasets.md.

Other sackli packages (Arrow, Beam, the command line) import, besides this
module, only `_fields` (field types and values) and `_layout` (where a
dataset's data lies).
Internal interface: _fields, _layout
"""

from ._bag import BagReader, BagWriter
from ._builtin_codecs import decoders, encoders
from ._dataset_reader import DatasetReader
from ._dataset_writer import DatasetWriter
from ._sharded import ShardedDatasetReader, ShardedDatasetWriter
from ._spec import FieldType

__all__ = [
    "BagReader",
    "BagWriter",
    "DatasetReader",
    "DatasetWriter",
    "FieldType",
    "ShardedDatasetReader",
    "ShardedDatasetWriter",
    "decoders",
    "encoders",
]
