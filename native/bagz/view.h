// A reader view: every `step`-th record of a bag starting at `start`, `length`
// records long. Slicing composes views in O(1); the bag is never copied.
#pragma once

#include <cstdint>
#include <string>

#include "bagz/errors.h"

namespace sackli {

struct View {
  uint64_t start = 0;  // global index of view index 0
  int64_t step = 1;    // may be negative
  uint64_t length = 0;

  // The global index of view index j (0 <= j < length).
  uint64_t Global(uint64_t j) const {
    return static_cast<uint64_t>(static_cast<int64_t>(start) +
                                 static_cast<int64_t>(j) * step);
  }

  // Python-style index (negative counts from the end) -> view index in *j;
  // false when it is outside the view.
  bool TryResolve(int64_t i, uint64_t* j) const {
    const int64_t n = static_cast<int64_t>(length);
    const int64_t wrapped = i < 0 ? i + n : i;
    if (wrapped < 0 || wrapped >= n) return false;
    *j = static_cast<uint64_t>(wrapped);
    return true;
  }

  // Like TryResolve, but throws kOutOfRange.
  uint64_t Resolve(int64_t i) const {
    uint64_t j;
    if (!TryResolve(i, &j)) {
      ThrowOutOfRange("index " + std::to_string(i) +
                      " out of range for a reader of " +
                      std::to_string(length) + " records");
    }
    return j;
  }

  // The view of view indices start, start + step, ... (`length` of them),
  // as computed by Python's slice.indices().
  View Slice(int64_t slice_start, int64_t slice_step,
             uint64_t slice_length) const {
    if (slice_length == 0) return View{0, 1, 0};
    return View{Global(static_cast<uint64_t>(slice_start)), step * slice_step,
                slice_length};
  }
};

}  // namespace sackli
