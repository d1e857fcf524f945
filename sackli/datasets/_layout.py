"""Part of `sackli.datasets`' internal interface: where a dataset's data
lies, for `sackli.arrow`, `sackli.beam` and `sackli.cli`.

Who may use it: those packages (`DatasetReader`, `ShardedDatasetReader`
and the other public names come from `sackli.datasets` itself). No
stability promise. Each name is defined and documented where it says:

- shard folders: their names and spec file, removing one (`_shard_folders`);
- dataset folders: which a path is (`dataset_layout`, `dataset_folders`,
  `layout_folders`) and which a reader reads (`reader_folders`)
  (`_recognise`); a sharded dataset's shard folders and their sizes,
  `shard_folder_bytes` (`_sharded`);
- bag files: one opened as records, `open_records`, and what one costs on
  disk, `bags_file_bytes` (`_bag`);
- refs read in bulk, one field at a time: `ShardFiles`, `FieldRefs` and
  `read_field_refs` (`_ref_columns`);
- calls run in parallel for a remote dataset, in turn for a local one:
  `concurrently_on` (`_concurrent`).
"""

from __future__ import annotations

from ._bag import bags_file_bytes, open_records
from ._concurrent import concurrently_on
from ._recognise import dataset_folders, dataset_layout, layout_folders, reader_folders
from ._ref_columns import FieldRefs, ShardFiles, read_field_refs
from ._shard_folders import SPEC_FILE, remove_shard_folder, shard_name
from ._sharded import shard_folder_bytes

__all__ = ["SPEC_FILE", "FieldRefs", "ShardFiles", "bags_file_bytes", "concurrently_on",
           "dataset_folders", "dataset_layout", "layout_folders", "open_records",
           "read_field_refs", "reader_folders", "remove_shard_folder", "shard_folder_bytes",
           "shard_name"]
