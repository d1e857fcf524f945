// refs.bag records of `bags` datasets (sackli.datasets): one msgpack array
// per datapoint with one ref per field, in the spec's sorted field order. A
// scalar field's ref is the index of its record in the field's bag; a list
// field's is [start, length] (a run of records), or [] when empty.
//
// ParseDatasetRefs reads the forms msgpack gives those values (an array of
// any width, non-negative integers of any width) and nothing else: anything
// it does not accept (another type, a negative number, trailing bytes, a
// truncated record) makes it return false, and the caller goes the slower
// way that names the problem. Bounds against the field bags are the
// caller's to check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sackli {

struct DatasetRef {
  uint64_t start = 0;   // the record index (a scalar field) or the run's start
  uint64_t length = 0;  // the run's length (list fields; 0 for [])
};

// Parses the refs record data[0, n) of a datapoint whose fields are lists
// where is_list says so, into out[0, is_list.size()). False, with out in an
// unspecified state, unless the record is exactly one such array.
bool ParseDatasetRefs(const char* data, size_t n, const std::vector<bool>& is_list,
                      DatasetRef* out);

}  // namespace sackli
