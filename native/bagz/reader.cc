#include "bagz/reader.h"

#include <algorithm>
#include <string>
#include <utility>

#include "bagz/errors.h"

namespace sackli {
namespace {

[[noreturn]] void ThrowRangeOutOfRange(int64_t start, int64_t count,
                                       uint64_t length) {
  ThrowOutOfRange("range [" + std::to_string(start) + ", " +
                  std::to_string(start + count) +
                  ") out of range for a reader of " + std::to_string(length) +
                  " records");
}

// Clamps a Python-style bound of list.index() to [0, length].
uint64_t ClampBound(int64_t bound, uint64_t length) {
  const int64_t n = static_cast<int64_t>(length);
  if (bound < 0) bound = std::max<int64_t>(bound + n, 0);
  return static_cast<uint64_t>(std::min(bound, n));
}

// For each position, the lowest position with the same index; empty when no
// index repeats. The read plan finds repeats within one plan; this finds them
// across the plans of a large request, by the same rule.
std::vector<size_t> FirstPositionsOf(const std::vector<uint64_t>& globals) {
  const size_t n = globals.size();
  bool increasing = true;
  for (size_t k = 1; k < n && increasing; ++k) {
    increasing = globals[k - 1] < globals[k];
  }
  if (increasing) return {};
  std::vector<size_t> order(n);
  for (size_t k = 0; k < n; ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return globals[a] != globals[b] ? globals[a] < globals[b] : a < b;
  });
  std::vector<size_t> first(n);
  bool found = false;
  for (size_t k = 0; k < n; ++k) {
    const size_t p = order[k];
    first[p] = p;
    if (k > 0 && globals[order[k - 1]] == globals[p]) {
      first[p] = first[order[k - 1]];
      found = true;
    }
  }
  if (!found) first.clear();
  return first;
}

}  // namespace

Reader::Reader(std::shared_ptr<const Bag> bag)
    : bag_(std::move(bag)), view_{0, 1, bag_->size()} {}

Reader::Reader(std::shared_ptr<const Bag> bag, const View& view)
    : bag_(std::move(bag)), view_(view) {
  if (view.length == 0) return;
  const int64_t last = static_cast<int64_t>(view.start) +
                       (static_cast<int64_t>(view.length) - 1) * view.step;
  if (view.start >= bag_->size() || last < 0 ||
      static_cast<uint64_t>(last) >= bag_->size()) {
    ThrowInvalidArgument(
        "the reader view (start " + std::to_string(view.start) + ", step " +
        std::to_string(view.step) + ", " + std::to_string(view.length) +
        " records) does not fit the bag of " + std::to_string(bag_->size()) +
        " records, which changed since the reader was pickled");
  }
}

Reader Reader::Slice(int64_t start, int64_t step, uint64_t length) const {
  Reader sliced = *this;
  sliced.view_ = view_.Slice(start, step, length);
  return sliced;
}

uint64_t Reader::GlobalIndex(int64_t index) const {
  return view_.Global(view_.Resolve(index));
}

std::vector<uint64_t> Reader::RangeGlobals(int64_t start, int64_t count) const {
  const int64_t n = static_cast<int64_t>(view_.length);
  if (start < 0 || count < 0 || start > n || count > n - start) {
    ThrowRangeOutOfRange(start, count, view_.length);
  }
  std::vector<uint64_t> globals(static_cast<size_t>(count));
  for (size_t k = 0; k < globals.size(); ++k) {
    globals[k] = view_.Global(static_cast<uint64_t>(start) + k);
  }
  return globals;
}

std::vector<uint64_t> Reader::AllGlobals() const {
  return RangeGlobals(0, static_cast<int64_t>(view_.length));
}

void Reader::Locate(int64_t index, StoredRecord& record) const {
  LocateStored(*bag_, GlobalIndex(index), record);
}

void Reader::Get(int64_t index,
                 const std::function<char*(uint64_t size)>& allocate) const {
  StoredRecord record;
  Locate(index, record);
  DecodeStored(record, allocate(record.decoded_size));
}

std::vector<size_t> Reader::ReadGlobals(
    const std::vector<uint64_t>& globals, const PlacedAllocateFn& allocate,
    const std::function<void()>& checkpoint) const {
  // One plan finds its own repeats; a request of several plans is reduced to
  // its distinct records first, so none is decoded twice.
  const bool one_plan = globals.size() <= RecordsPerChunk(*bag_);
  std::vector<size_t> first = one_plan ? std::vector<size_t>()
                                       : FirstPositionsOf(globals);
  std::vector<size_t> positions;  // of the records read
  std::vector<uint64_t> distinct;
  const std::vector<uint64_t>* wanted = &globals;
  if (!first.empty()) {
    for (size_t k = 0; k < globals.size(); ++k) {
      if (first[k] != k) continue;
      positions.push_back(k);
      distinct.push_back(globals[k]);
    }
    wanted = &distinct;
  } else {
    positions.resize(globals.size());
    for (size_t k = 0; k < positions.size(); ++k) positions[k] = k;
  }
  ReadBatch(
      bag_, wanted->data(), wanted->size(),
      [&](size_t at, const ReadPlan& plan, char** dst) {
        // Only a request of one plan (at == 0) can still hold repeats.
        if (plan.has_repeats()) {
          first.resize(globals.size());
          for (size_t k = 0; k < plan.size(); ++k) {
            first[at + k] = at + plan.FirstPosition(k);
          }
        }
        allocate(positions.data() + at, plan, dst);
      },
      checkpoint);
  return first;
}

std::shared_ptr<PendingRead> Reader::StartRead(std::vector<uint64_t> globals,
                                               std::string prefix) const {
  return PendingRead::Start(bag_, std::move(globals), std::move(prefix));
}

std::optional<Reader::Run> Reader::MappedRun(uint64_t start,
                                             uint64_t count) const {
  if (view_.step != 1 || count == 0 || start > view_.length ||
      count > view_.length - start) {
    return std::nullopt;
  }
  Run run{nullptr, {}};
  if (!::sackli::MappedRun(*bag_, view_.Global(start), count, &run.data,
                           run.offsets)) {
    return std::nullopt;
  }
  return run;
}

int64_t Reader::Find(std::string_view value, int64_t start,
                     std::optional<int64_t> stop,
                     const std::function<void()>& checkpoint) const {
  const uint64_t from = ClampBound(start, view_.length);
  const uint64_t to = stop ? ClampBound(*stop, view_.length) : view_.length;
  return from < to ? Scan(value, from, to, false, checkpoint) : -1;
}

int64_t Reader::Count(std::string_view value,
                      const std::function<void()>& checkpoint) const {
  return Scan(value, 0, view_.length, true, checkpoint);
}

int64_t Reader::Scan(std::string_view value, uint64_t from, uint64_t to,
                     bool count_all,
                     const std::function<void()>& checkpoint) const {
  int64_t found = -1;
  int64_t count = 0;
  VisitRecords(
      bag_, view_, from, to,
      [&](uint64_t size) { return size == value.size(); },
      [&](uint64_t j, const char* data, uint64_t size) {
        if (std::string_view(data, static_cast<size_t>(size)) != value) return true;
        ++count;
        if (count_all) return true;
        found = static_cast<int64_t>(j);
        return false;
      },
      checkpoint);
  return count_all ? count : found;
}

double Reader::ApproximateBytesPerRecord() const {
  const uint64_t n = bag_->size();
  return n == 0 ? 0.0
                : static_cast<double>(bag_->records_bytes()) /
                      static_cast<double>(n);
}

ReadAhead ReadAhead::Start(const Reader& reader, std::vector<uint64_t> globals,
                           const AllocateFn& allocate) {
  ReadAhead ahead;
  const std::shared_ptr<const Bag>& bag = reader.bag();
  if (!bag->all_mapped()) {
    ahead.read_ = PendingRead::Start(bag, std::move(globals));
    return ahead;
  }
  std::shared_ptr<ReadPlan> plan;
  try {
    plan = std::make_shared<ReadPlan>(bag, globals.data(), globals.size());
  } catch (...) {
    // Reported where the iterator reaches this batch.
    ahead.error_ = std::current_exception();
    return ahead;
  }
  auto dst = std::make_shared<std::vector<char*>>(plan->size(), nullptr);
  allocate(*plan, dst->data());
  ahead.fill_ = BackgroundTask::Start([plan, dst] { plan->Fill(dst->data()); },
                                      bag->options().max_parallelism);
  return ahead;
}

bool ReadAhead::WaitFor(int64_t milliseconds) {
  if (read_) return read_->WaitFor(milliseconds);
  if (fill_) return fill_->WaitFor(milliseconds);
  return true;
}

void ReadAhead::RethrowIfFailed() const {
  if (error_) std::rethrow_exception(error_);
  if (read_) read_->Result();
  if (fill_) fill_->RethrowIfFailed();
}

const DecodedRecords* ReadAhead::buffered() const {
  return read_ ? &read_->Result() : nullptr;
}

std::vector<uint64_t> ShardRecordOffsets(const Bag& bag, size_t shard,
                                         uint64_t first, uint64_t count) {
  if (shard >= bag.num_shards()) {
    ThrowOutOfRange("shard " + std::to_string(shard) +
                    " out of range for a bag of " +
                    std::to_string(bag.num_shards()) + " shards");
  }
  const Shard& s = bag.shard(shard);
  if (first > s.num_records() || count > s.num_records() - first) {
    ThrowOutOfRange("records [" + std::to_string(first) + ", " +
                    std::to_string(first + count) + ") out of range for " +
                    s.path() + " (" + std::to_string(s.num_records()) +
                    " records)");
  }
  std::vector<uint64_t> offsets(count + 1);
  s.Limits(first, count, offsets.data(), offsets.data() + 1);
  return offsets;
}

}  // namespace sackli
