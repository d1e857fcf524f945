// What the module's initialisation (module.cc) calls: each file of the
// bindings registers its own classes and functions. Order matters only
// where noted.
#pragma once

#include <pybind11/pybind11.h>

namespace sackli::python {

// translate_errors.cc, first: defines CorruptionError, registers the
// translation of engine errors.
void RegisterErrors(pybind11::module_& m);
void RegisterBuffers(pybind11::module_& m);    // buffers.cc
void RegisterOptions(pybind11::module_& m);    // options.cc
void RegisterReader(pybind11::module_& m);     // reader_core.cc
// index.cc: RecordIndex(reader, keep_all, max_memory_bytes) and, in the
// `_engine.testing` submodule, record_index_with_hash_mask(...): the hash
// mask is a test knob (0 makes every hash collide), kept out of the
// production constructor.
void RegisterIndex(pybind11::module_& m);
void RegisterWriter(pybind11::module_& m);     // writer.cc
// block_cache.cc: the read cache's entries (before the readers use them).
void RegisterBlockCache(pybind11::module_& m);
void RegisterArrowStream(pybind11::module_& m);  // arrow_stream.cc (after reader)
void RegisterFastPaths(pybind11::module_& m);  // fast_paths.cc (after reader, index)
void RegisterIntMap(pybind11::module_& m);     // int_map.cc: sackli.maps' core
void RegisterRowCodec(pybind11::module_& m);   // row_codec.cc: sackli.arrow's rows
void RegisterDatapoints(pybind11::module_& m);  // datapoints.cc: sackli.datasets' batches

}  // namespace sackli::python
