#include "bagz/stable_order.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <utility>

namespace sackli {
namespace {

// Below this many keys a comparison sort beats the radix passes' counters.
constexpr size_t kRadixMinKeys = 512;
constexpr int kDigitBits = 11;
constexpr size_t kBuckets = size_t{1} << kDigitBits;

}  // namespace

void StableOrder(const std::vector<uint64_t>& keys, std::vector<uint32_t>& order) {
  const size_t n = keys.size();
  order.resize(n);
  std::iota(order.begin(), order.end(), 0);
  if (n < kRadixMinKeys) {
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
    return;
  }
  uint64_t largest = 0;
  for (uint64_t key : keys) largest = std::max(largest, key);
  int bits = 0;
  while (bits < 64 && (largest >> bits) != 0) ++bits;
  // Least significant digit first; each pass is stable, so equal keys keep
  // the position order they start in.
  std::vector<uint32_t> scratch(n);
  for (int shift = 0; shift < bits; shift += kDigitBits) {
    std::array<size_t, kBuckets> starts{};
    for (uint32_t p : order) ++starts[(keys[p] >> shift) & (kBuckets - 1)];
    size_t total = 0;
    for (size_t& start : starts) total += std::exchange(start, total);
    for (uint32_t p : order) scratch[starts[(keys[p] >> shift) & (kBuckets - 1)]++] = p;
    order.swap(scratch);
  }
}

}  // namespace sackli
