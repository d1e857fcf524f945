// The writer's records streamed into a Python upload (sackli/_storage's
// upload streams, or a Beam file): the engine's AppendSink for a remote bag.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "bagz/append_sink.h"

namespace sackli::python {

// A sink that hands the appended bytes, in chunks of at most about
// AppendFile::kAppendBufferBytes, to `stream.write(bytes)`, taking the GIL
// only around that call. Whatever the stream raises propagates unchanged
// (the writer then fails for good). Closing the sink does not close the
// stream: completing (or aborting) the upload is its owner's job. `url`
// names the destination in errors.
//
// The writer calls its sink under its own lock, so a binding that takes
// that lock must not hold the GIL while it waits for it (deadlock
// otherwise): the writer bindings release the GIL first for a streamed
// writer.
std::unique_ptr<AppendSink> MakeUploadSink(pybind11::object stream, std::string url);

}  // namespace sackli::python
