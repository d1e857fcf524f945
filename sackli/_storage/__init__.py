"""Storage: every file and object sackli reads or writes outside the engine,
by path. Three stores sit behind one set of functions: local files
(`LocalStore`), `gs://` objects (google-cloud-storage) and `s3://` objects
(boto3). A path's store is decided here, where the path comes in: callers
pass any path and never ask which kind it is.

A writer takes the path's `WriteDestination` once, where the path enters
(`write_destination`: a `LocalDestination` or an `UploadDestination`), and
calls its methods for what differs: whether a name is taken, where a write
is staged (`stage_file`: a `StagedFile`; `staging_folder`, `scratch_path`,
`output`), how it is published and discarded, whether a write cut short is
kept for recovery, how many files to open at once. Other callers ask the
store for what it holds (`local_entries`, `open_local`: nothing of a
bucket) or what it can do (`parallel_requests`, `by_upload`,
`on_this_machine`), never which store it is. A path argument is checked
here too, once, with one message (`path_argument`).

Requests that wait on the network and do not depend on each other run
concurrently on one bounded, fork-safe pool per process (`in_parallel`,
`Prefetch`: `_executor`).

What every store offers: listings (`list_objects`, and folders:
`list_folders`, `folder_bytes`, `folder_entries`, `names_starting`, globs
with `expand_glob`), sizes and identities (`stat_object`), whole reads
(`read_object`), atomic writes (`write_object`, and streamed:
`atomic_output`; a local file under a temporary name renamed into place,
fsynced when durable; an object that appears on commit), uploads
(`open_upload`, `put_file`), places to stage a write (`make_staging_folder`),
deletions and existence.

Bags themselves are read by the engine: local ones it opens and maps
itself; for remote ones it calls `RemoteOpener` (see `opener_for`), whose
handles (`RemoteObject`) have a `size`, `read(offset, length)` and
`read_many(ranges)`; its read planner coalesces neighbouring records into
ranged GETs and hands each object all of a batch's in one `read_many`, which
keeps up to the reader's `remote_parallelism` of them in flight
(`Store.read_many`, on the process-wide request threads of `_executor`). With a cache folder (`read_cache`: `SACKLI_CACHE_DIR`, or a reader's
`cache_dir`) those reads go through a block cache on local disk shared by
every process of the host (`_read_cache`), whose entries the engine reads
(`use_cache_engine`: the core gives it `_engine.BlockCache`). Remote writers stream into
`open_upload` streams (only a bag's limits wait in a local file) and commit
them on close.

Clients come from the SDKs' standard configuration (the environment), or
from the `StorageSettings` in effect (`using`, see `_settings`): each
distinct settings get a store (and clients) of their own.

This package imports nothing of the rest of sackli: the core, formats and
every other package build on it. The rest of sackli imports only this
module.
Internal interface: none
"""

from __future__ import annotations

from ._folders import (
    folder_bytes, folder_entries, folder_path, is_file, is_folder, join_path, list_folders,
    local_entries, make_staging_folder, make_unique_folder, names_starting, remove_folder,
)
from ._executor import MAX_THREADS as MAX_REQUEST_THREADS, Prefetch, in_parallel
from ._destinations import (
    LocalDestination, UploadDestination, WriteDestination, write_destination,
)
from ._globs import OwnFile, expand_glob, is_glob
from ._links import resolve_write_links
from ._local import LocalStore
from ._paths import path_argument
from ._objects import (
    CHECKS_KEY, REMOTE_OPENER, TAIL_BYTES, TRAILER_BYTES, RemoteObject, RemoteOpener, abort_upload,
    atomic_output,
    copy_object, delete_object, delete_objects, list_modified, list_objects, object_exists, open_local, open_upload, opener_for, put_file, read_object,
    remembering_listings, reset_clients, stat_object, sync_folders, unfinished_uploads, write_object,
)
from ._read_cache import ENV_DIR as ENV_CACHE_DIR, check_cache_dir, read_cache, use_cache_engine
from ._uncached_reads import UncachedReadWarning
from ._executor import DEFAULT_PARALLELISM as DEFAULT_REMOTE_PARALLELISM
from ._settings import GcsSettings, S3Settings, StorageSettings, current_settings, using
from ._store import ListedObject, ObjectStat, Store, UnfinishedUpload
from ._staged import StagedFile
from ._traits import MAX_PARALLEL_REQUESTS, by_upload, on_this_machine, parallel_requests
from ._upload import OpenUpload, Upload, UploadFile
from ._urls import RemotePath, base_name, canonical_path, is_remote, normalize, parse

__all__ = ["CHECKS_KEY", "DEFAULT_REMOTE_PARALLELISM", "ENV_CACHE_DIR", "GcsSettings", "ListedObject", "LocalDestination", "LocalStore", "MAX_PARALLEL_REQUESTS",
           "MAX_REQUEST_THREADS", "ObjectStat", "OpenUpload", "OwnFile", "Prefetch", "REMOTE_OPENER", "TAIL_BYTES", "TRAILER_BYTES", "RemoteObject", "RemoteOpener", "RemotePath",
           "S3Settings", "StagedFile", "StorageSettings", "Store", "UncachedReadWarning", "UnfinishedUpload", "Upload",
           "UploadDestination", "UploadFile", "WriteDestination", "abort_upload", "atomic_output", "base_name", "by_upload",
           "canonical_path", "check_cache_dir", "copy_object", "current_settings", "delete_object", "delete_objects",
           "expand_glob", "folder_bytes", "folder_entries", "folder_path", "in_parallel", "is_file",
           "is_folder", "is_glob", "is_remote", "join_path", "list_folders", "list_modified", "list_objects", "local_entries",
           "make_staging_folder", "make_unique_folder", "names_starting", "normalize",
           "object_exists", "on_this_machine", "open_local", "open_upload", "opener_for",
           "parallel_requests", "parse", "path_argument", "put_file", "read_cache", "read_object",
           "remembering_listings", "remove_folder", "reset_clients", "resolve_write_links", "stat_object",
           "sync_folders", "unfinished_uploads", "use_cache_engine", "using", "write_destination", "write_object"]
