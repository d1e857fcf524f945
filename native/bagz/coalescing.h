// When neighbouring records of a source that is not memory-mapped share one
// read (ReadPlan::FetchStoredBytes).
//
// - Local files (pread): records closer than kMaxGapBytes share a read of at
//   most kMaxRunBytes; a gap costs a few microseconds of copying.
// - Sources whose coalesce_gap_bytes() is smaller (a remote object served
//   from the read cache says 0: a gap costs reading it from disk) bridge
//   gaps only up to that.
// - Remote objects (ByteSource::remote()): records that touch share reads of
//   up to kMaxRunBytes (a scan wastes nothing). Then BridgeGaps joins those
//   runs across gaps, the smallest gaps first, while the bytes fetched but
//   not asked for stay within half of what the batch asks of that source.
//   So a batch fetches at most 1.5x the bytes of its records, whatever their
//   order (a shuffled epoch of small records no longer drags every gap
//   along: each costs transfer, and an epoch pays it in every batch), with
//   the fewest requests that bound allows: the budget goes to the gaps that
//   save a request for the fewest bytes.
//
// Example (remote): records [0, 4K), [5K, 9K), [20K, 24K) ask for 12K, a
// budget of 6K: the 1K gap is bridged, the 11K gap is not: two reads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "bagz/byte_source.h"

namespace sackli {

struct CoalescingRule {
  static constexpr uint64_t kMaxGapBytes = 64 * 1024;
  static constexpr uint64_t kMaxRunBytes = 8 * 1024 * 1024;

  // Remote sources: only touching records join a run as it grows; gaps are
  // bridged afterwards, batch-wide (BridgeGaps).
  bool touching_only = false;
  // The largest gap bridged (ByteSource::coalesce_gap_bytes, at most
  // kMaxGapBytes).
  uint64_t max_gap = kMaxGapBytes;

  static CoalescingRule For(const ByteSource& source) {
    return CoalescingRule{source.remote(),
                          std::min(source.coalesce_gap_bytes(), kMaxGapBytes)};
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
  const uint64_t max_gap = rule.touching_only ? 0 : rule.max_gap;
  if (begin < run.begin || begin > run.end + max_gap) return false;
  const uint64_t new_end = std::max(run.end, end);
  if (new_end - run.begin > CoalescingRule::kMaxRunBytes) return false;
  run.end = new_end;
  run.asked += end - begin;
  return true;
}

// The runs of one remote source in a batch (in offset order, as Coalesce
// made them) joined across gaps, smallest first, while the unasked bytes of
// all of them stay within half of the bytes they ask for; no gap over
// `max_gap` (at most kMaxGapBytes), no read over kMaxRunBytes. Returns, for
// each read, the index of its first run; a read ends where the next begins.
inline std::vector<size_t> BridgeGaps(
    const std::vector<CoalescedRun>& runs,
    uint64_t max_gap = CoalescingRule::kMaxGapBytes) {
  max_gap = std::min(max_gap, CoalescingRule::kMaxGapBytes);
  const size_t n = runs.size();
  uint64_t asked = 0, wasted = 0;
  for (const CoalescedRun& r : runs) {
    asked += r.asked;
    const uint64_t fetched = r.end - r.begin;
    // Overlapping records (corrupt limits) may ask for more than is fetched.
    wasted += fetched > r.asked ? fetched - r.asked : 0;
  }
  uint64_t budget = asked / 2 > wasted ? asked / 2 - wasted : 0;
  // (gap, index of the run after it), for gaps that could be bridged.
  std::vector<std::pair<uint64_t, size_t>> gaps;
  for (size_t i = 1; i < n; ++i) {
    if (runs[i].begin < runs[i - 1].end) continue;  // never backwards
    const uint64_t gap = runs[i].begin - runs[i - 1].end;
    if (gap <= max_gap && gap <= budget) {
      gaps.emplace_back(gap, i);
    }
  }
  std::sort(gaps.begin(), gaps.end());
  // Joined reads as [first run, last run] ranges, kept at both ends: the
  // read ending at run i is head[i] (valid while i ends a read); the read
  // starting at run i ends at tail[i] (valid while i starts one).
  std::vector<size_t> head(n), tail(n);
  std::iota(head.begin(), head.end(), 0);
  std::iota(tail.begin(), tail.end(), 0);
  std::vector<bool> joined(n, false);  // run i shares the read of run i - 1
  for (const auto& [gap, i] : gaps) {
    if (gap > budget) break;  // sorted: no later gap fits either
    const size_t first = head[i - 1], last = tail[i];
    if (runs[last].end - runs[first].begin > CoalescingRule::kMaxRunBytes) continue;
    joined[i] = true;
    budget -= gap;
    tail[first] = last;
    head[last] = first;
  }
  std::vector<size_t> starts;
  for (size_t i = 0; i < n; ++i) {
    if (!joined[i]) starts.push_back(i);
  }
  return starts;
}

}  // namespace sackli
