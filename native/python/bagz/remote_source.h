// Remote objects as engine byte sources, read through Python handles, so
// every storage back-end (sackli/_storage) shares one reader engine.
#pragma once

#include <pybind11/pybind11.h>

#include "bagz/byte_source.h"
#include "bagz/local_file.h"

namespace sackli::python {

// Opens local files through the engine (with `access` and `cache`), and the
// paths the Python `remote` callback claims through it: remote(path) returns
// a handle with `size` (int) and `read_many([(offset, length), ...])` -> one
// buffer of that many bytes per range (one call per batch: the handle keeps
// the ranges in flight at once; retries are its business), or None for a
// local path;
// remote.exists(path) returns a bool, or None for a local path. None as
// `remote`: local files only. Pool threads call the handles with the GIL
// taken; the Python clients release it while they wait on the network, so
// reads overlap. A short read raises kIo naming the path and offset.
SourceOpener MakeOpener(pybind11::object remote, AccessPattern access,
                        CachePolicy cache);

}  // namespace sackli::python
