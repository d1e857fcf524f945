#include "record_index.h"

#include <functional>

#include "read_plan.h"

namespace sackli {
namespace {

uint64_t HashRecord(std::string_view record) {
  return std::hash<std::string_view>{}(record);
}

}  // namespace

RecordIndex::RecordIndex(std::shared_ptr<const Bag> bag, const View& view,
                         bool keep_all,
                         const std::function<void()>& checkpoint)
    : bag_(std::move(bag)), view_(view), keep_all_(keep_all) {
  if (keep_all_) next_same_.assign(view_.length, kNone);
  std::string scratch;
  VisitRecords(
      bag_, view_, 0, view_.length, [](uint64_t) { return true; },
      [&](uint64_t j, const char* data, uint64_t size) {
        const std::string_view record(data, static_cast<size_t>(size));
        const uint64_t hash = HashRecord(record);
        uint64_t cls = FindClass(hash, record, scratch);
        if (cls == kNone) {
          cls = class_first_.size();
          class_first_.push_back(j);
          class_next_collision_.push_back(kNone);
          if (keep_all_) class_last_.push_back(j);
          auto [it, inserted] = class_by_hash_.emplace(hash, cls);
          if (!inserted) {
            // A different record with the same hash: chain it.
            uint64_t tail = it->second;
            while (class_next_collision_[tail] != kNone) {
              tail = class_next_collision_[tail];
            }
            class_next_collision_[tail] = cls;
          }
        } else if (keep_all_) {
          next_same_[class_last_[cls]] = j;
          class_last_[cls] = j;
        }
        return true;
      },
      checkpoint);
}

uint64_t RecordIndex::FindClass(uint64_t hash, std::string_view record,
                                std::string& scratch) const {
  const auto it = class_by_hash_.find(hash);
  if (it == class_by_hash_.end()) return kNone;
  for (uint64_t cls = it->second; cls != kNone;
       cls = class_next_collision_[cls]) {
    ReadOneInto(*bag_, view_.Global(class_first_[cls]), scratch);
    if (scratch == record) return cls;
  }
  return kNone;
}

std::optional<uint64_t> RecordIndex::First(std::string_view record) const {
  std::string scratch;
  const uint64_t cls = FindClass(HashRecord(record), record, scratch);
  if (cls == kNone) return std::nullopt;
  return class_first_[cls];
}

std::vector<uint64_t> RecordIndex::All(std::string_view record) const {
  std::vector<uint64_t> out;
  std::string scratch;
  const uint64_t cls = FindClass(HashRecord(record), record, scratch);
  if (cls == kNone) return out;
  for (uint64_t j = class_first_[cls]; j != kNone; j = next_same_[j]) {
    out.push_back(j);
  }
  return out;
}

}  // namespace sackli
