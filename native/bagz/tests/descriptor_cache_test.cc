// The process's bounded set of open descriptors (descriptor_cache.h) and the
// small files that are read whole at open (local_file.cc's InlineFile).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "bagz/descriptor_cache.h"
#include "bagz/errors.h"
#include "bagz/local_file.h"
#include "bagz/tests/test_bags.h"

namespace sackli {
namespace {

using testing::TempDir;
using testing::WriteFile;

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

int OpenOrThrow(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) ThrowOsError(errno, "open", path);
  return fd;
}

TEST(DescriptorCache, KeepsTheMostRecentlyUsedAndReopensTheRest) {
  TempDir dir;
  const std::string path = dir.File("f");
  WriteFile(path, "abc");
  DescriptorCache cache(2);
  int owners[3];
  int opens = 0;
  const auto reopen = [&] {
    ++opens;
    return OpenOrThrow(path);
  };
  const int first = cache.Get(&owners[0], reopen)->get();
  cache.Get(&owners[1], reopen);
  EXPECT_EQ(cache.Get(&owners[0], reopen)->get(), first);  // a hit: 0 is now newest
  cache.Get(&owners[2], reopen);                           // evicts 1
  EXPECT_EQ(opens, 3);
  EXPECT_EQ(cache.size(), 2u);
  cache.Get(&owners[1], reopen);  // opened again, evicting 0
  EXPECT_EQ(opens, 4);
  EXPECT_FALSE(IsOpen(first));
}

TEST(DescriptorCache, AnEvictedDescriptorInUseStaysOpenUntilReleased) {
  TempDir dir;
  const std::string path = dir.File("f");
  WriteFile(path, "abc");
  DescriptorCache cache(1);
  int owners[2];
  const auto reopen = [&] { return OpenOrThrow(path); };
  std::shared_ptr<const Fd> held = cache.Get(&owners[0], reopen);
  cache.Get(&owners[1], reopen);  // evicts owner 0's, which a read still uses
  EXPECT_TRUE(IsOpen(held->get()));
  const int fd = held->get();
  held.reset();
  EXPECT_FALSE(IsOpen(fd));
  cache.Forget(&owners[1]);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(DescriptorCache, AFailedOpenKeepsNothing) {
  DescriptorCache cache(4);
  int owner;
  EXPECT_THROW(cache.Get(&owner, [] { return OpenOrThrow("/nonexistent/sackli"); }), Error);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(InlineFile, ASmallFileIsReadWholeAndUnaffectedByLaterChanges) {
  TempDir dir;
  const std::string path = dir.File("small.bag");
  WriteFile(path, "0123456789");
  const auto source = OpenLocalFile(path, AccessPattern::kSystem, CachePolicy::kSystem);
  ASSERT_NE(source->mapped(), nullptr);
  EXPECT_EQ(source->faults(), nullptr);  // no mapping to guard
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  std::string got(4, 'x');
  source->Read(6, 4, got.data());
  EXPECT_EQ(got, "6789");
  EXPECT_EQ(std::string(source->mapped(), 10), "0123456789");
  try {
    source->Read(8, 4, got.data());
    ADD_FAILURE() << "read past the end";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCorruption) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sackli
