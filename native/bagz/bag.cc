#include "bagz/bag.h"

#include <algorithm>
#include <cerrno>
#include <new>
#include <string>
#include <exception>

#include "bagz/errors.h"
#include "bagz/thread_pool.h"

namespace sackli {

std::shared_ptr<const Bag> Bag::Open(const std::vector<ShardPath>& paths,
                                     const BagOptions& options,
                                     const SourceOpener& opener) {
  std::shared_ptr<Bag> bag(new Bag());
  bag->options_ = options;
  bag->options_.max_parallelism = std::max<size_t>(options.max_parallelism, 1);
  bag->options_.remote_parallelism =
      std::max<size_t>(options.remote_parallelism, 1);
  const size_t n = paths.size();
  bag->shards_.resize(n);
  std::vector<std::exception_ptr> errors(n);
  // A remote shard's open waits on the network (its size, then its tail):
  // as many at once as a batch keeps requests in flight. Local opens stay
  // on one thread per core.
  const size_t open_parallelism = opener.may_open_remote
                                      ? bag->options_.remote_parallelism
                                      : bag->options_.max_parallelism;
  ThreadPool::Shared().ParallelFor(
      n, open_parallelism, [&](size_t i) {
        try {
          bag->shards_[i] =
              Shard::Open(paths[i].path, paths[i].codec, options.shard, opener);
        } catch (const std::bad_alloc&) {
          // Named here, where the shard is known (a set of many shards
          // can run out of memory part way through opening).
          try {
            errors[i] = std::make_exception_ptr(Error(
                ErrorKind::kIo,
                paths[i].path + ": out of memory opening shard " +
                    std::to_string(i) + " of " + std::to_string(n),
                paths[i].path, ENOMEM));
          } catch (...) {
            errors[i] = std::current_exception();
          }
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }

  bag->starts_.reserve(n + 1);
  for (const auto& shard : bag->shards_) {
    bag->starts_.push_back(bag->size_);
    bag->size_ += shard->num_records();
    bag->records_bytes_ += shard->records_bytes();
    bag->all_mapped_ = bag->all_mapped_ && shard->records().mapped() != nullptr;
    bag->any_compressed_ = bag->any_compressed_ || shard->codec().compressed();
    bag->any_checked_ = bag->any_checked_ || shard->checksums() != nullptr;
  }
  bag->starts_.push_back(bag->size_);

  if (options.layout == ShardingLayout::kInterleaved && n > 0) {
    const uint64_t first = bag->shards_[0]->num_records();
    for (size_t i = 1; i < n; ++i) {
      const uint64_t here = bag->shards_[i]->num_records();
      const uint64_t before = bag->shards_[i - 1]->num_records();
      if (here > before || first - here > 1) {
        ThrowInvalidArgument(
            "INTERLEAVED layout needs shard sizes that do not increase and "
            "differ from the first shard's by at most 1, but " +
            paths[i].path + " has " + std::to_string(here) + " records and " +
            paths[0].path + " has " + std::to_string(first));
      }
    }
  }
  return bag;
}

Bag::Location Bag::Locate(uint64_t g) const {
  if (g >= size_) {
    ThrowOutOfRange("record " + std::to_string(g) + " out of range for a bag of " +
                    std::to_string(size_) + " records");
  }
  if (options_.layout == ShardingLayout::kInterleaved) {
    const uint64_t s = shards_.size();
    return Location{static_cast<uint32_t>(g % s), g / s};
  }
  // The last shard starting at or before g holds it (empty shards share a
  // start with their successor and are skipped by upper_bound).
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), g);
  const size_t shard = static_cast<size_t>(it - starts_.begin()) - 1;
  return Location{static_cast<uint32_t>(shard), g - starts_[shard]};
}

}  // namespace sackli
