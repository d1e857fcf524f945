// Helpers of the engine's C++ tests: a temporary folder, bags written byte by
// byte as docs/format.md describes them, and opening them as the bindings do.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bagz/bag.h"
#include "bagz/byte_source.h"
#include "bagz/local_file.h"
#include "bagz/shard.h"

namespace sackli::testing {

// A fresh folder under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string File(const std::string& name) const;
  // The names in the folder (not recursive), sorted.
  std::vector<std::string> List() const;

 private:
  std::string path_;
};

bool FileExists(const std::string& path);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& bytes);

// The little-endian u64 `value` as 8 bytes.
std::string U64(uint64_t value);
// The limits of `records`: one u64 end offset per record.
std::string LimitsOf(const std::vector<std::string>& records);
// A TAIL bag of `records` stored as given: payloads, then their limits.
std::string TailBag(const std::vector<std::string>& records);

// `n` records of varied sizes (including empty ones), record i starting with
// its index so that misplaced records are easy to spot.
std::vector<std::string> MakeRecords(size_t n, size_t max_size = 300);

// Writes `records` as a TAIL bag at `path`, zstd-compressing them when the
// name ends in .bagz.
void WriteTailBag(const std::string& path, const std::vector<std::string>& records);

struct OpenOptions {
  CachePolicy cache = CachePolicy::kSystem;  // kDropAfterRead: not mapped
  LimitsPlacement placement = LimitsPlacement::kTail;
  LimitsStorage storage = LimitsStorage::kOnDisk;
  ShardingLayout layout = ShardingLayout::kConcatenated;
  size_t max_parallelism = 4;
};

// Opens the shards `paths` (compression by suffix) with `opener`, or local
// files when it is null.
std::shared_ptr<const Bag> OpenBag(const std::vector<std::string>& paths,
                                   const OpenOptions& options = {},
                                   const SourceOpener* opener = nullptr);

// How the shards of a parameterised test are stored and opened: raw or
// zstd (by suffix), mapped or read with pread.
struct SourceCase {
  const char* name;
  const char* suffix;
  CachePolicy cache;
};
inline constexpr SourceCase kSourceCases[] = {
    {"MappedRaw", ".bag", CachePolicy::kSystem},
    {"MappedZstd", ".bagz", CachePolicy::kSystem},
    {"PreadRaw", ".bag", CachePolicy::kDropAfterRead},
    {"PreadZstd", ".bagz", CachePolicy::kDropAfterRead},
};
// The name of a case in test names, for INSTANTIATE_TEST_SUITE_P.
inline std::string SourceCaseName(const ::testing::TestParamInfo<SourceCase>& info) {
  return info.param.name;
}

// Writes `records` as two shards of `source` in `dir` (the first `split`
// records, then the rest) and opens them as one CONCATENATED bag.
std::shared_ptr<const Bag> OpenTwoShards(const TempDir& dir, const SourceCase& source,
                                         const std::vector<std::string>& records,
                                         size_t split);

// Every record of `bag`, read one at a time.
std::vector<std::string> ReadAll(const Bag& bag);

}  // namespace sackli::testing
