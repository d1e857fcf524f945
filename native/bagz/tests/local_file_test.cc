// Local files (local_file.h) under every cache policy and access pattern,
// and the SIGBUS guard (fault_guard.h) of a mapped file truncated under its
// reader: the calls behind them differ by platform (docs/platforms.md), the
// bytes read and the errors raised must not.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "bagz/errors.h"
#include "bagz/local_file.h"
#include "bagz/tests/test_bags.h"

namespace sackli {
namespace {

using testing::TempDir;
using testing::WriteFile;

// `n` bytes that differ from page to page and within one.
std::string PatternBytes(size_t n) {
  std::string bytes(n, '\0');
  uint32_t seed = 2024;
  for (char& c : bytes) {
    seed = seed * 1103515245u + 12345u;
    c = static_cast<char>(seed >> 16);
  }
  return bytes;
}

// Opens `path`; null (with the reason in `refused`) when the file system
// refuses DIRECT_IO, which is a documented error, not a failure.
std::shared_ptr<ByteSource> Open(const std::string& path, AccessPattern access,
                                 CachePolicy cache, std::string* refused) {
  try {
    return OpenLocalFile(path, access, cache);
  } catch (const Error& e) {
    if (cache != CachePolicy::kDirectIo || e.kind() != ErrorKind::kInvalidArgument) throw;
    EXPECT_NE(std::string(e.what()).find("DIRECT_IO"), std::string::npos) << e.what();
    *refused = e.what();
    return nullptr;
  }
}

TEST(LocalFile, EveryCachePolicyAndAccessPatternReadsTheSameBytes) {
  TempDir dir;
  const std::string path = dir.File("pages.bag");
  const std::string bytes = PatternBytes(3 * 4096 + 123);
  WriteFile(path, bytes);
  const uint64_t size = bytes.size();
  // Aligned and unaligned, across page boundaries, the whole file, the tail.
  const std::vector<std::pair<uint64_t, size_t>> reads = {
      {0, 0},    {0, 1},        {1, 4095},        {4095, 2},    {4096, 4096},
      {100, 9000}, {0, size},   {size - 1, 1},    {size - 8, 8}, {size, 0},
      {8191, 4097}};
  for (CachePolicy cache :
       {CachePolicy::kSystem, CachePolicy::kDropAfterRead, CachePolicy::kDirectIo}) {
    for (AccessPattern access :
         {AccessPattern::kSystem, AccessPattern::kRandom, AccessPattern::kSequential}) {
      SCOPED_TRACE("cache " + std::to_string(static_cast<int>(cache)) + ", access " +
                   std::to_string(static_cast<int>(access)));
      std::string refused;
      const std::shared_ptr<ByteSource> source = Open(path, access, cache, &refused);
      if (source == nullptr) {
        std::printf("DIRECT_IO refused here: %s\n", refused.c_str());
        continue;
      }
      ASSERT_EQ(source->size(), size);
      EXPECT_EQ(source->mapped() != nullptr, cache == CachePolicy::kSystem);
      for (const auto& [offset, length] : reads) {
        std::string got(length, 'x');
        source->Read(offset, length, got.data());
        ASSERT_EQ(got, bytes.substr(offset, length)) << offset << " " << length;
      }
      std::string past(2, 'x');
      try {
        source->Read(size - 1, 2, past.data());
        ADD_FAILURE() << "a read past the end succeeded";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kCorruption) << e.what();
      }
    }
  }
}

TEST(LocalFile, MissingFileAndFolderAreNamedErrors) {
  TempDir dir;
  for (CachePolicy cache :
       {CachePolicy::kSystem, CachePolicy::kDropAfterRead, CachePolicy::kDirectIo}) {
    try {
      OpenLocalFile(dir.File("absent.bag"), AccessPattern::kSystem, cache);
      ADD_FAILURE() << "opened a missing file";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kNotFound) << e.what();
    }
    try {
      OpenLocalFile(dir.path(), AccessPattern::kSystem, cache);
      ADD_FAILURE() << "opened a folder";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kIo) << e.what();
      EXPECT_EQ(e.errno_value(), EISDIR) << e.what();
    }
  }
}

// Another process truncating a mapped file: reading the lost pages raises
// SIGBUS, which the guard turns into kCorruption for this read and every
// later one, and the process lives on.
TEST(LocalFile, MappedFileTruncatedUnderTheReaderRaisesCorruption) {
  TempDir dir;
  const std::string path = dir.File("shrinks.bag");
  const std::string bytes = PatternBytes(4 * 4096);
  WriteFile(path, bytes);
  const std::shared_ptr<ByteSource> source =
      OpenLocalFile(path, AccessPattern::kSystem, CachePolicy::kSystem);
  std::string got(100, 'x');
  source->Read(2 * 4096, got.size(), got.data());
  ASSERT_EQ(got, bytes.substr(2 * 4096, got.size()));

  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      source->Read(2 * 4096, got.size(), got.data());
      ADD_FAILURE() << "read pages the file no longer has";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kCorruption) << e.what();
      EXPECT_NE(std::string(e.what()).find("changed while this reader had it open"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace sackli
