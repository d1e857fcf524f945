#include "bagz/tests/test_bags.h"

#include <dirent.h>
#include <ftw.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "bagz/codec.h"
#include "bagz/format.h"
#include "bagz/read_plan.h"

namespace sackli::testing {

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/sackli-test-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp " + pattern + " failed");
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  // Depth first, so folders are empty when they are removed.
  ::nftw(
      path_.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); },
      16, FTW_DEPTH | FTW_PHYS);
}

std::string TempDir::File(const std::string& name) const { return path_ + "/" + name; }

std::vector<std::string> TempDir::List() const {
  std::vector<std::string> names;
  if (DIR* dir = ::opendir(path_.c_str())) {
    while (const dirent* entry = ::readdir(dir)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(dir);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool FileExists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string U64(uint64_t value) {
  std::string bytes(8, '\0');
  StoreU64(bytes.data(), value);
  return bytes;
}

std::string LimitsOf(const std::vector<std::string>& records) {
  std::string limits;
  uint64_t end = 0;
  for (const std::string& record : records) {
    end += record.size();
    limits += U64(end);
  }
  return limits;
}

std::string TailBag(const std::vector<std::string>& records) {
  std::string bag;
  for (const std::string& record : records) bag += record;
  return bag + LimitsOf(records);
}

std::vector<std::string> MakeRecords(size_t n, size_t max_size) {
  std::vector<std::string> records;
  records.reserve(n);
  uint64_t state = 12345;
  for (size_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    if (i % 7 == 3) {
      records.emplace_back();  // empty records are part of every bag
      continue;
    }
    std::string record = "#" + std::to_string(i) + ":";
    const size_t size = static_cast<size_t>(state >> 33) % max_size;
    while (record.size() < size) record += static_cast<char>('a' + (record.size() + i) % 26);
    records.push_back(std::move(record));
  }
  return records;
}

void WriteTailBag(const std::string& path, const std::vector<std::string>& records) {
  if (!HasZstdSuffix(path)) {
    WriteFile(path, TailBag(records));
    return;
  }
  const Codec codec = Codec::Zstd(3, "");
  std::vector<std::string> stored(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    codec.Encode(records[i].data(), records[i].size(), stored[i]);
  }
  WriteFile(path, TailBag(stored));
}

std::shared_ptr<const Bag> OpenBag(const std::vector<std::string>& paths,
                                   const OpenOptions& options,
                                   const SourceOpener* opener) {
  const std::vector<Codec> codecs = Codec::ForPaths(paths, CompressionChoice{});
  std::vector<ShardPath> shards;
  for (size_t i = 0; i < paths.size(); ++i) shards.push_back({paths[i], codecs[i]});
  BagOptions bag_options;
  bag_options.layout = options.layout;
  bag_options.shard.placement = options.placement;
  bag_options.shard.storage = options.storage;
  bag_options.max_parallelism = options.max_parallelism;
  const SourceOpener local = LocalOpener(AccessPattern::kSystem, options.cache);
  return Bag::Open(shards, bag_options, opener ? *opener : local);
}

std::shared_ptr<const Bag> OpenTwoShards(const TempDir& dir, const SourceCase& source,
                                         const std::vector<std::string>& records,
                                         size_t split) {
  const std::string a = dir.File(std::string("a") + source.suffix);
  const std::string b = dir.File(std::string("b") + source.suffix);
  WriteTailBag(a, {records.begin(), records.begin() + split});
  WriteTailBag(b, {records.begin() + split, records.end()});
  OpenOptions options;
  options.cache = source.cache;
  return OpenBag({a, b}, options);
}

std::vector<std::string> ReadAll(const Bag& bag) {
  std::vector<std::string> records(static_cast<size_t>(bag.size()));
  for (uint64_t g = 0; g < bag.size(); ++g) ReadOneInto(bag, g, records[g]);
  return records;
}

}  // namespace sackli::testing
