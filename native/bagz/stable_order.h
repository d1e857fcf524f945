// The order that sorts a batch's keys, ties kept in position order: how a
// read plan visits records by (shard, index) and finds repeats.
#pragma once

#include <cstdint>
#include <vector>

namespace sackli {

// order[0, keys.size()): positions such that keys[order[i]] never
// decreases, equal keys in increasing position. A radix sort on the bits
// the largest key has: linear, and several times faster than a comparison
// sort for the batches of thousands of records a read plan sorts.
void StableOrder(const std::vector<uint64_t>& keys, std::vector<uint32_t>& order);

}  // namespace sackli
