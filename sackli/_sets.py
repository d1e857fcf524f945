"""The internal shard-set API: bag file names, shard specs and sets, for
sackli's own layers.

Who may use it: `sackli.arrow`, `sackli.beam`, `sackli.cli`,
`sackli.datasets` and `sackli.maps` (with `_bulk` and `_engine`, the only
core modules they import besides `sackli` itself). Core modules import the
modules below directly, never this one. No stability promise. What is here
(each name is defined, documented and tested where it says):

- file names and format facts (`_format`): where a bag's limits go, the
  local-path prefix, the zstd suffix, unfinished writes' hidden folders,
  the largest shard count;
- shard specs (`_shard_spec`): `name@N.ext`, `name@*.ext` and comma lists,
  split, expanded and matched against what is on disk;
- set conflicts (`_set_conflicts`): another set of the same name, with the
  messages users see;
- writing a set (`_shard_set`, `_shard_writer`): the one shard-set writer
  and a bag shard's opener; a set's files;
- unfinished writes (`_unfinished`) and their recovery (`_recover`,
  on buckets `_bucket_recover`): the hidden write folders and journals,
  and the messages naming them;
- names beside a set (`_schema_names`, `_consistency`): the Arrow schema
  file, the set manifest;
- what a file that does not open as a bag is instead (`_sniff`): Parquet,
  a map, JSON Lines..., named with the command that converts or reads it
  (the same rules `sackli.Reader`'s open errors use).
"""

from __future__ import annotations

from ._bucket_recover import BucketRecovery, missing_error, recover_bucket_writes
from ._consistency import manifest_url
from ._format import (
    LIMITS_PREFIX, MAX_SHARDS, checksums_path_for, has_zstd_suffix, limits_path_for, move_checks,
    partial_folder_prefix,
    without_local_prefix,
)
from ._recover import recover_write
from ._schema_names import SUFFIX as SCHEMA_SUFFIX, find_schema_file, schema_path, set_file_path
from ._set_conflicts import (
    check_shard_count, other_sets_error, refuse_other_sets, set_files, spec_of,
)
from ._shard_set import OpenShard, ShardSetWriter, files_of
from ._shard_spec import (
    choose_shard_set, existing_shard_sets, expand_file_spec, refuse_glob, shard_name,
    split_shard_entry, strip_local_prefix,
)
from ._shard_writer import bag_shard_opener
from ._sniff import describe as describe_kind, explain_open_failure, sniff_folder
from ._storage import is_remote
from ._unfinished import (
    JOURNAL, UnfinishedWrite, explained_missing, make_write_folder, unfinished_writes,
    unfinished_writes_in_spec, unfinished_writes_of, write_journal, write_of_folder,
)

__all__ = [
    "BucketRecovery", "JOURNAL", "describe_kind", "explain_open_failure", "sniff_folder", "LIMITS_PREFIX", "MAX_SHARDS", "OpenShard", "SCHEMA_SUFFIX", "ShardSetWriter",
    "UnfinishedWrite", "bag_shard_opener", "check_shard_count", "choose_shard_set",
    "existing_shard_sets", "expand_file_spec", "explained_missing", "files_of",
    "checksums_path_for", "find_schema_file", "has_zstd_suffix", "limits_path_for", "make_write_folder", "move_checks",
    "is_remote", "manifest_url", "missing_error", "other_sets_error", "partial_folder_prefix", "recover_write",
    "recover_bucket_writes", "refuse_glob", "refuse_other_sets", "schema_path", "set_file_path", "set_files", "shard_name",
    "spec_of", "split_shard_entry", "strip_local_prefix", "unfinished_writes",
    "unfinished_writes_in_spec", "unfinished_writes_of", "without_local_prefix",
    "write_journal", "write_of_folder",
]
