// The read side of the read cache (block_cache.h): entries written as
// sackli/_storage/_read_cache.py writes them (EncodeCacheHeader, then the
// payload) are served; anything damaged, short, foreign, linked or sealed
// with another secret is a miss
// and noted for deletion; every chunk a range touches is checked before it
// is served, once, then served from memory; the open set and the bytes kept
// stay within their bounds; a forked child reads on.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bagz/block_cache.h"
#include "bagz/crc32c.h"
#include "bagz/siphash.h"
#include "bagz/errors.h"
#include "bagz/tests/test_bags.h"

namespace sackli {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

constexpr size_t kChunk = kCacheChunkBytes;

CacheKey KeyOf(unsigned char seed) {
  CacheKey key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<unsigned char>(seed * 31 + i);
  return key;
}

CacheSecret SecretOf(unsigned char seed) {
  CacheSecret secret;
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<unsigned char>(seed + 7 * i);
  return secret;
}

const CacheSecret kSecret = SecretOf(1);

std::string Payload(size_t n, uint32_t seed = 7) {
  std::string bytes(n, '\0');
  for (char& c : bytes) {
    seed = seed * 1103515245u + 12345u;
    c = static_cast<char>(seed >> 16);
  }
  return bytes;
}

// Writes the entry of `payload` as block `block` of `key` where `cache`
// looks for it; returns its path.
std::string Publish(const BlockCache& cache, const CacheKey& key, uint64_t block,
                    const std::string& payload) {
  const std::string path = cache.EntryPath(key, block);
  ::mkdir(path.substr(0, path.rfind('/')).c_str(), 0755);
  WriteFile(path, cache.EncodeHeader(key, block, payload.data(), payload.size()) + payload);
  return path;
}

// Bytes [lo, hi) of the block, or "<miss>".
std::string ReadPart(BlockCache& cache, const CacheKey& key, uint64_t block, size_t length,
                     size_t lo, size_t hi) {
  std::string out(hi - lo, '\0');
  return cache.Read(key, block, length, lo, hi, out.data()) ? out : "<miss>";
}

// The reference vectors of the SipHash paper (appendix A; key 00..0f,
// message 00..n-1).
TEST(SipHash, ReferenceVectors) {
  SipHashKey key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<unsigned char>(i);
  char message[64];
  for (int i = 0; i < 64; ++i) message[i] = static_cast<char>(i);
  EXPECT_EQ(SipHash24(key, message, 0), 0x726fdb47dd0e0e31ull);
  EXPECT_EQ(SipHash24(key, message, 15), 0xa129ca6149be45e5ull);
  EXPECT_EQ(SipHash24(key, message, 63), 0x958a324ceb064572ull);
}

TEST(BlockCache, HeaderLayout) {
  const std::string payload = Payload(2 * kChunk + 5);
  const CacheKey key = KeyOf(1);
  const std::string head = EncodeCacheHeader(kSecret, key, 17, payload.data(), payload.size());
  ASSERT_EQ(head.size(), CacheHeaderBytes(payload.size()));
  EXPECT_EQ(head.size(), 68u + 3 * 4 + 8);
  EXPECT_EQ(head.substr(0, 8), std::string("sackli\0C", 8));
  EXPECT_EQ(head[8], 3);  // the format
  EXPECT_EQ(head.substr(24, 32), std::string(key.begin(), key.end()));
  uint32_t crc;
  std::memcpy(&crc, head.data() + 68 + 4, 4);  // the second chunk's
  EXPECT_EQ(crc, Crc32c(payload.data() + kChunk, kChunk));
  uint64_t seal;
  std::memcpy(&seal, head.data() + head.size() - 8, 8);
  EXPECT_EQ(seal, SipHash24(kSecret, head.data(), head.size() - 8));
  // Another secret, another seal; the same fields.
  const std::string other = EncodeCacheHeader(SecretOf(2), key, 17, payload.data(),
                                              payload.size());
  EXPECT_EQ(other.substr(0, head.size() - 8), head.substr(0, head.size() - 8));
  EXPECT_NE(other, head);
  EXPECT_EQ(CacheHeaderBytes(0), 76u);
}

TEST(BlockCache, EntryPathNamesKeyAndBlock) {
  BlockCache cache("/c/v1", kSecret, 4);
  CacheKey key{};
  key[0] = 0x3f;
  key[31] = 0xe1;
  EXPECT_EQ(cache.EntryPath(key, 17),
            "/c/v1/3f/3f" + std::string(60, '0') + "e1-17");
}

TEST(BlockCache, ServesEveryRangeOfAnEntry) {
  TempDir dir;
  BlockCache cache(dir.path(), kSecret, 8);
  const CacheKey key = KeyOf(2);
  // 100 chunks and a bit: ranges inside one chunk, across two, from and to
  // the edges, whole chunks, the short last chunk, and ranges longer than
  // the 64 KiB read in one call (whole chunks straight into the
  // destination, the cut ones at either end through the buffer).
  const size_t length = 100 * kChunk + 100;
  const std::string payload = Payload(length);
  Publish(cache, key, 3, payload);
  const std::vector<std::pair<size_t, size_t>> ranges = {
      {0, 1}, {0, kChunk}, {10, 20}, {kChunk - 1, kChunk + 1}, {100, 3 * kChunk + 7},
      {kChunk, 5 * kChunk}, {100 * kChunk, length}, {length - 1, length}, {0, length},
      {7, length - 3}, {2 * kChunk + 1, 2 * kChunk + 2}, {100, 90 * kChunk + 7},
      {kChunk, 99 * kChunk}, {5, 70 * kChunk}, {kChunk, length - 1}, {3, 64 * kChunk + 2}};
  for (const auto& [lo, hi] : ranges) {
    EXPECT_EQ(ReadPart(cache, key, 3, length, lo, hi), payload.substr(lo, hi - lo))
        << lo << ".." << hi;
  }
  EXPECT_EQ(ReadPart(cache, key, 3, length, 5, 5), "");
  EXPECT_TRUE(cache.TakeDamaged().empty());
  EXPECT_EQ(cache.open_entries(), 1u);
  std::string out(1, '\0');
  EXPECT_THROW(cache.Read(key, 3, length, 0, length + 1, out.data()), Error);
}

TEST(BlockCache, AbsentIsAMissAndNotDamage) {
  TempDir dir;
  BlockCache cache(dir.path(), kSecret, 8);
  EXPECT_EQ(ReadPart(cache, KeyOf(3), 0, 100, 0, 10), "<miss>");
  EXPECT_TRUE(cache.TakeDamaged().empty());
  EXPECT_EQ(cache.open_entries(), 0u);
}

// Each way an entry can be wrong: a miss, noted with the file's identity.
TEST(BlockCache, DamagedShortAndForeignEntriesAreMisses) {
  const size_t length = 3 * kChunk;
  const std::string payload = Payload(length);
  const CacheKey key = KeyOf(4);
  const std::vector<std::string> cases = {
      "payload bit", "header bit", "truncated", "longer", "empty", "other key",
      "other block", "other length", "format 2", "sealed as format 2", "other secret",
      "symlink", "folder"};
  for (const std::string& damage : cases) {
    TempDir dir;
    BlockCache cache(dir.path(), kSecret, 8);
    const std::string path = Publish(cache, key, 5, payload);
    std::string bytes = ReadFile(path);
    const size_t head = CacheHeaderBytes(length);
    if (damage == "payload bit") {
      bytes[head + 2 * kChunk + 9] ^= 0x10;
    } else if (damage == "header bit") {
      bytes[30] ^= 0x01;
    } else if (damage == "truncated") {
      bytes.pop_back();
    } else if (damage == "longer") {
      bytes.push_back('x');
    } else if (damage == "empty") {
      bytes.clear();
    } else if (damage == "other key") {
      bytes = EncodeCacheHeader(kSecret, KeyOf(5), 5, payload.data(), length) + payload;
    } else if (damage == "other block") {
      bytes = EncodeCacheHeader(kSecret, key, 6, payload.data(), length) + payload;
    } else if (damage == "other length") {
      bytes = EncodeCacheHeader(kSecret, key, 5, payload.data(), length - 1) + payload.substr(1);
    } else if (damage == "format 2") {
      // sackli before the seal: a CRC-32C of the header where the seal is.
      std::string old = bytes.substr(0, head - 8);
      old[8] = 2;
      const uint32_t crc = Crc32c(old.data(), old.size());
      old.append(reinterpret_cast<const char*>(&crc), 4);
      bytes = old + payload;
    } else if (damage == "sealed as format 2") {
      bytes[8] = 2;  // and the seal made right again
      const uint64_t seal = SipHash24(kSecret, bytes.data(), head - 8);
      std::memcpy(bytes.data() + head - 8, &seal, 8);
    } else if (damage == "other secret") {
      // What a forger makes from public facts (the key, block and payload
      // a HEAD and a GET give), with good CRCs, without this cache's secret.
      bytes = EncodeCacheHeader(SecretOf(2), key, 5, payload.data(), length) + payload;
    }
    if (damage == "symlink") {
      WriteFile(dir.File("elsewhere"), bytes);
      ASSERT_EQ(::unlink(path.c_str()), 0);
      ASSERT_EQ(::symlink(dir.File("elsewhere").c_str(), path.c_str()), 0);
    } else if (damage == "folder") {
      ASSERT_EQ(::unlink(path.c_str()), 0);
      ASSERT_EQ(::mkdir(path.c_str(), 0755), 0);
    } else {
      WriteFile(path, bytes);
    }
    struct stat found;
    ASSERT_EQ(::lstat(path.c_str(), &found), 0);
    // The payload damage is in the third chunk: the first two still serve.
    if (damage == "payload bit") {
      EXPECT_EQ(ReadPart(cache, key, 5, length, 0, 2 * kChunk), payload.substr(0, 2 * kChunk));
    }
    EXPECT_EQ(ReadPart(cache, key, 5, length, 2 * kChunk, length), "<miss>") << damage;
    const std::vector<DamagedEntry> damaged = cache.TakeDamaged();
    // The file found at the path (the link itself, not its target).
    ASSERT_EQ(damaged.size(), 1u) << damage;
    EXPECT_EQ(damaged[0].key, key);
    EXPECT_EQ(damaged[0].block, 5u);
    EXPECT_EQ(damaged[0].device, static_cast<uint64_t>(found.st_dev));
    EXPECT_EQ(damaged[0].inode, static_cast<uint64_t>(found.st_ino)) << damage;
    EXPECT_EQ(cache.open_entries(), 0u) << damage;
    EXPECT_TRUE(cache.TakeDamaged().empty());
  }
}

// A bit flipped in chunk k of an entry: a miss for every range that touches
// chunk k (through the per-thread buffer or straight into the destination,
// at either end or inside), a hit for the others.
TEST(BlockCache, EveryChunkARangeTouchesIsChecked) {
  const size_t length = 80 * kChunk + 10;
  const std::string payload = Payload(length);
  const CacheKey key = KeyOf(11);
  const std::vector<std::pair<size_t, size_t>> ranges = {
      {kChunk - 10, kChunk + 10}, {100, 79 * kChunk + 50}, {0, length},
      {2 * kChunk, 70 * kChunk}, {3 * kChunk + 1, 3 * kChunk + 2}, {80 * kChunk, length},
      {kChunk + 5, 72 * kChunk}};
  for (size_t chunk : {0, 1, 2, 3, 40, 69, 70, 71, 72, 79, 80}) {
    TempDir dir;
    BlockCache cache(dir.path(), kSecret, 8);
    const std::string path = Publish(cache, key, 0, payload);
    std::string bytes = ReadFile(path);
    bytes[CacheHeaderBytes(length) + chunk * kChunk + 3] ^= 0x40;
    WriteFile(path, bytes);
    for (const auto& [lo, hi] : ranges) {
      const bool touched = lo < std::min(length, (chunk + 1) * kChunk) && chunk * kChunk < hi;
      EXPECT_EQ(ReadPart(cache, key, 0, length, lo, hi),
                touched ? "<miss>" : payload.substr(lo, hi - lo))
          << "chunk " << chunk << ", " << lo << ".." << hi;
    }
  }
}

// Overwrites `path` in place (the open descriptor sees it) with `bytes`.
void Overwrite(const std::string& path, const std::string& bytes) {
  FILE* file = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(file, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), file);
  std::fclose(file);
}

constexpr size_t kLoad = kCacheLoadBytes / kCacheChunkBytes;  // chunks per load

TEST(BlockCache, DamageAfterOpeningIsFoundByTheNextReadOfIt) {
  TempDir dir;
  BlockCache cache(dir.path(), kSecret, 8);
  const CacheKey key = KeyOf(6);
  const std::string payload = Payload(3 * kLoad * kChunk);
  const std::string path = Publish(cache, key, 0, payload);
  ASSERT_EQ(ReadPart(cache, key, 0, payload.size(), 0, 10), payload.substr(0, 10));
  // Damage to a chunk not read yet: found by the read of it.
  std::string bytes = ReadFile(path);
  bytes[CacheHeaderBytes(payload.size()) + (kLoad + 1) * kChunk + 3] ^= 1;
  Overwrite(path, bytes);
  EXPECT_EQ(ReadPart(cache, key, 0, payload.size(), (kLoad + 1) * kChunk, (kLoad + 1) * kChunk + 9),
            "<miss>");
  EXPECT_EQ(cache.TakeDamaged().size(), 1u);
  EXPECT_EQ(cache.open_entries(), 0u);
  EXPECT_EQ(cache.memory_bytes(), 0u);
  // Truncated under the reader: what was checked is served from memory, the
  // rest is a miss, never a crash.
  Publish(cache, key, 0, payload);
  ASSERT_EQ(ReadPart(cache, key, 0, payload.size(), kChunk, kChunk + 5),
            payload.substr(kChunk, 5));
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  EXPECT_EQ(ReadPart(cache, key, 0, payload.size(), kChunk, kChunk + 5),
            payload.substr(kChunk, 5));
  EXPECT_EQ(ReadPart(cache, key, 0, payload.size(), 2 * kLoad * kChunk, 2 * kLoad * kChunk + 5),
            "<miss>");
}

TEST(BlockCache, ChunksCheckedOnceAreServedFromMemory) {
  TempDir dir;
  BlockCache cache(dir.path(), kSecret, 8);
  const CacheKey key = KeyOf(12);
  const std::string payload = Payload(2 * kLoad * kChunk + 100);
  const std::string path = Publish(cache, key, 0, payload);
  // One read loads and checks the aligned run around it.
  ASSERT_EQ(ReadPart(cache, key, 0, payload.size(), 3 * kChunk, 3 * kChunk + 7),
            payload.substr(3 * kChunk, 7));
  EXPECT_EQ(cache.memory_bytes(), kCacheLoadBytes);
  // Damaged on disk (or replaced by another file, or deleted) after it was
  // checked: the bytes served are still the checked ones, and nothing is
  // noted as damaged (nothing read was).
  std::string bytes = ReadFile(path);
  for (size_t i = 0; i < kLoad * kChunk; ++i) bytes[CacheHeaderBytes(payload.size()) + i] ^= 0x5a;
  Overwrite(path, bytes);
  for (size_t lo = 0; lo < kLoad * kChunk; lo += 997) {
    const size_t hi = std::min(kLoad * kChunk, lo + 3000);
    ASSERT_EQ(ReadPart(cache, key, 0, payload.size(), lo, hi), payload.substr(lo, hi - lo));
  }
  ASSERT_EQ(::unlink(path.c_str()), 0);
  EXPECT_EQ(ReadPart(cache, key, 0, payload.size(), 0, kLoad * kChunk),
            payload.substr(0, kLoad * kChunk));
  EXPECT_TRUE(cache.TakeDamaged().empty());
  // The rest is still read from the open descriptor (the unlinked file).
  EXPECT_EQ(ReadPart(cache, key, 0, payload.size(), 0, payload.size()), payload);
  EXPECT_EQ(cache.memory_bytes(), payload.size());
}

TEST(BlockCache, KeptBytesStayWithinTheMemoryBound) {
  TempDir dir;
  const size_t block = 4 * kLoad * kChunk;  // 4 loads per block
  BlockCache cache(dir.path(), kSecret, 16, kCacheTouchNanos,
                   /*memory_bytes=*/3 * kCacheLoadBytes);
  const CacheKey key = KeyOf(13);
  std::vector<std::string> payloads;
  for (uint64_t b = 0; b < 4; ++b) {
    payloads.push_back(Payload(block, static_cast<uint32_t>(b + 3)));
    Publish(cache, key, b, payloads.back());
  }
  for (uint64_t b = 0; b < 4; ++b) {
    ASSERT_EQ(ReadPart(cache, key, b, block, 5, 9), payloads[b].substr(5, 4));
    EXPECT_LE(cache.memory_bytes(), 3 * kCacheLoadBytes);
  }
  // The least recently used (block 0) was dropped: 1, 2, 3 stay.
  EXPECT_EQ(cache.open_entries(), 3u);
  EXPECT_EQ(cache.memory_bytes(), 3 * kCacheLoadBytes);
  ASSERT_EQ(::unlink(cache.EntryPath(key, 0).c_str()), 0);
  EXPECT_EQ(ReadPart(cache, key, 0, block, 5, 9), "<miss>");
  // One entry over the bound on its own keeps what it read; the others go.
  ASSERT_EQ(ReadPart(cache, key, 3, block, 0, block), payloads[3]);
  EXPECT_EQ(cache.open_entries(), 1u);
  EXPECT_EQ(cache.memory_bytes(), block);
  cache.Forget();
  EXPECT_EQ(cache.memory_bytes(), 0u);
}

TEST(BlockCache, OpenEntriesStayWithinTheBound) {
  TempDir dir;
  BlockCache cache(dir.path(), kSecret, 3);
  const CacheKey key = KeyOf(7);
  std::vector<std::string> payloads;
  for (uint64_t block = 0; block < 6; ++block) {
    payloads.push_back(Payload(kChunk + block, static_cast<uint32_t>(block)));
    Publish(cache, key, block, payloads.back());
  }
  for (uint64_t block = 0; block < 6; ++block) {
    ASSERT_EQ(ReadPart(cache, key, block, payloads[block].size(), 1, 9),
              payloads[block].substr(1, 8));
    EXPECT_LE(cache.open_entries(), 3u);
  }
  EXPECT_EQ(cache.open_entries(), 3u);
  // The most recently used stay open: deleting blocks 3-5 leaves them
  // readable; block 0 (closed) is then absent.
  for (uint64_t block = 0; block < 6; ++block) {
    ASSERT_EQ(::unlink(cache.EntryPath(key, block).c_str()), 0);
  }
  for (uint64_t block = 3; block < 6; ++block) {
    EXPECT_EQ(ReadPart(cache, key, block, payloads[block].size(), 0, 4),
              payloads[block].substr(0, 4));
  }
  EXPECT_EQ(ReadPart(cache, key, 0, payloads[0].size(), 0, 4), "<miss>");
  cache.Forget();
  EXPECT_EQ(cache.open_entries(), 0u);
  EXPECT_EQ(ReadPart(cache, key, 5, payloads[5].size(), 0, 4), "<miss>");
}

TEST(BlockCache, OpeningTouchesAndHitsTouchAtMostOncePerInterval) {
  TempDir dir;
  const CacheKey key = KeyOf(8);
  const std::string payload = Payload(100);
  auto mtime = [](const std::string& path) {
    struct stat status;
    ::stat(path.c_str(), &status);
    return status.st_mtime;
  };
  auto age = [](const std::string& path) {
    struct timespec old[2] = {{1000, 0}, {1000, 0}};
    ::utimensat(AT_FDCWD, path.c_str(), old, 0);
  };
  {
    BlockCache cache(dir.path(), kSecret, 4, /*touch_nanos=*/int64_t{1} << 62);
    const std::string path = Publish(cache, key, 0, payload);
    age(path);
    ASSERT_EQ(ReadPart(cache, key, 0, 100, 0, 5), payload.substr(0, 5));
    EXPECT_GT(mtime(path), 1000);  // opened: touched
    age(path);
    ASSERT_EQ(ReadPart(cache, key, 0, 100, 0, 5), payload.substr(0, 5));
    EXPECT_EQ(mtime(path), 1000);  // a hit within the interval: not again
  }
  {
    BlockCache cache(dir.path(), kSecret, 4, /*touch_nanos=*/0);
    const std::string path = cache.EntryPath(key, 0);
    ASSERT_EQ(ReadPart(cache, key, 0, 100, 0, 5), payload.substr(0, 5));
    age(path);
    ASSERT_EQ(ReadPart(cache, key, 0, 100, 0, 5), payload.substr(0, 5));
    EXPECT_GT(mtime(path), 1000);  // the interval passed: touched
  }
}

TEST(BlockCache, ThreadsShareEntries) {
  TempDir dir;
  BlockCache cache(dir.path(), kSecret, 2);
  const CacheKey key = KeyOf(9);
  std::vector<std::string> payloads;
  for (uint64_t block = 0; block < 5; ++block) {
    payloads.push_back(Payload(3 * kChunk, static_cast<uint32_t>(block + 1)));
    Publish(cache, key, block, payloads.back());
  }
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const uint64_t block = static_cast<uint64_t>((i * 7 + t) % 5);
        const size_t lo = static_cast<size_t>((i * 131) % (2 * kChunk));
        if (ReadPart(cache, key, block, 3 * kChunk, lo, lo + kChunk) !=
            payloads[block].substr(lo, kChunk)) {
          ++wrong[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
  EXPECT_LE(cache.open_entries(), 2u);
  EXPECT_TRUE(cache.TakeDamaged().empty());
}

TEST(BlockCache, AForkedChildReadsOn) {
  TempDir dir;
  BlockCache cache(dir.path(), kSecret, 4);
  const CacheKey key = KeyOf(10);
  const std::string payload = Payload(2 * kChunk);
  Publish(cache, key, 0, payload);
  Publish(cache, key, 1, payload);
  ASSERT_EQ(ReadPart(cache, key, 0, payload.size(), 0, 8), payload.substr(0, 8));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The open set starts empty, with no bytes kept; both blocks read from
    // the files.
    const bool good = cache.open_entries() == 0 && cache.memory_bytes() == 0 &&
                      ReadPart(cache, key, 0, payload.size(), 5, kChunk + 5) ==
                          payload.substr(5, kChunk) &&
                      ReadPart(cache, key, 1, payload.size(), 0, 3) == payload.substr(0, 3);
    ::_exit(good ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(cache.open_entries(), 1u);
  EXPECT_EQ(cache.memory_bytes(), payload.size());  // the parent keeps its own
  EXPECT_EQ(ReadPart(cache, key, 1, payload.size(), 0, 3), payload.substr(0, 3));
}

}  // namespace
}  // namespace sackli
