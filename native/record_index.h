// A reverse index of a reader view: record bytes -> the view indices holding
// them. It stores 64-bit hashes and record positions, not records, so it fits
// in memory for bags that do not; equality is always confirmed against the
// stored record, so a hash collision never gives a wrong answer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bag.h"
#include "view.h"

namespace sackli {

class RecordIndex {
 public:
  // Reads the whole view once. With `keep_all`, every index of every record
  // is kept (MultiIndex); otherwise only the first (Index).
  RecordIndex(std::shared_ptr<const Bag> bag, const View& view, bool keep_all,
              const std::function<void()>& checkpoint);

  // Number of distinct records.
  size_t num_unique() const { return class_first_.size(); }

  // The first view index holding `record`.
  std::optional<uint64_t> First(std::string_view record) const;

  // All view indices holding `record`, ascending; empty when absent.
  // Requires keep_all.
  std::vector<uint64_t> All(std::string_view record) const;

 private:
  static constexpr uint64_t kNone = ~uint64_t{0};
  // The class (distinct record) equal to `record` whose hash is `hash`, or
  // kNone. `scratch` receives candidates read back from the bag.
  uint64_t FindClass(uint64_t hash, std::string_view record,
                     std::string& scratch) const;

  std::shared_ptr<const Bag> bag_;
  View view_;
  bool keep_all_;
  // hash -> first class with that hash; further classes with the same hash
  // (true collisions, rare) are chained through class_next_collision_.
  std::unordered_map<uint64_t, uint64_t> class_by_hash_;
  std::vector<uint64_t> class_next_collision_;
  std::vector<uint64_t> class_first_;  // first view index of each class
  std::vector<uint64_t> class_last_;   // keep_all: last view index so far
  std::vector<uint64_t> next_same_;    // keep_all: next index with same record
};

}  // namespace sackli
