// When neighbouring records of a source that is not memory-mapped share one
// read (ReadPlan::FetchStoredBytes).
//
// - Local files (pread): records closer than kMaxGapBytes share a read of at
//   most kMaxRunBytes; a gap costs a few microseconds of copying.
// - Remote objects (ByteSource::remote()): the same bounds, and a gap is
//   bridged only while the bytes fetched but not asked for stay at most half
//   of the bytes asked for in that run. So a batch fetches at most 1.5x the
//   bytes of its records, whatever their order: a shuffled epoch of small
//   records no longer drags the gaps between them along (each one costs
//   transfer, and an epoch pays it for every batch). Records that touch
//   (a scan) waste nothing and still share reads of up to kMaxRunBytes.
//
// Example (remote): records [0, 4K) and [12K, 16K) ask for 8K; bridging the
// 8K gap would fetch 16K, 8K of it unasked: more than half of 8K, so they
// are two reads. Records [0, 4K), [6K, 10K) ask for 8K, waste 2K: one read.
#pragma once

#include <algorithm>
#include <cstdint>

#include "bagz/byte_source.h"

namespace sackli {

struct CoalescingRule {
  static constexpr uint64_t kMaxGapBytes = 64 * 1024;
  static constexpr uint64_t kMaxRunBytes = 8 * 1024 * 1024;

  // Remote sources bound the unasked bytes of a run (see above).
  bool bound_waste = false;

  static CoalescingRule For(const ByteSource& source) {
    return CoalescingRule{source.remote()};
  }
};

// One coalesced read: bytes [begin, end), of which `asked` belong to the
// records it holds.
struct CoalescedRun {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t asked = 0;
};

// Grows `run` by the record [begin, end) and returns true when `rule` lets
// them share a read; otherwise leaves `run` alone and returns false. A
// record that starts before the run (a neighbour's corrupt limit) never
// joins it.
inline bool Coalesce(const CoalescingRule& rule, CoalescedRun& run,
                     uint64_t begin, uint64_t end) {
  if (begin < run.begin || begin > run.end + CoalescingRule::kMaxGapBytes) {
    return false;
  }
  const uint64_t new_end = std::max(run.end, end);
  if (new_end - run.begin > CoalescingRule::kMaxRunBytes) return false;
  const uint64_t asked = run.asked + (end - begin);
  if (rule.bound_waste) {
    const uint64_t fetched = new_end - run.begin;
    // Overlapping records (corrupt limits) may ask for more than is fetched.
    const uint64_t waste = fetched > asked ? fetched - asked : 0;
    if (waste > asked / 2) return false;
  }
  run.end = new_end;
  run.asked = asked;
  return true;
}

}  // namespace sackli
