// The map formats (int_map.h): header parsing, Eytzinger layout and search,
// bounds checks, crc32c, and batched lookups through int_map_lookup.h.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "bagz/crc32c.h"
#include "bagz/errors.h"
#include "bagz/format.h"
#include "maps/int_map.h"
#include "maps/int_map_build.h"
#include "maps/int_map_lookup.h"
#include "bagz/memory_source.h"

namespace sackli {
namespace {

std::string Build(const std::vector<uint64_t>& keys,
                  const std::vector<std::string>& values,
                  MapCompression compression = MapCompression::kNone) {
  std::vector<std::string_view> views(values.begin(), values.end());
  return BuildMapBuffer(keys, views, compression, 1, 3, 4);
}

MapIndex IndexOf(const std::string& map) {
  const MapHeader header =
      ParseMapHeader(map.data(), map.size(), MapKind::kMapBuffer, "m.mb");
  return MapIndex(header, map.data() + header.index_offset(), map.size(), "m.mb");
}

template <typename Fn>
std::string CorruptionMessage(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCorruption) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(MapCrc32c, KnownValues) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  // Continuing a CRC gives the CRC of the concatenation.
  EXPECT_EQ(Crc32c("6789", 4, Crc32c("12345", 5)), 0xE3069283u);
  std::string zeros(32, '\0');
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
}

// CRC-32C one bit at a time: the definition the fast paths must match.
uint32_t BitwiseCrc32c(const std::string& data, uint32_t crc = 0) {
  crc = ~crc;
  for (unsigned char byte : data) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
  }
  return ~crc;
}

TEST(MapCrc32c, EveryLengthAndAlignmentMatchesTheDefinition) {
  // Lengths around each block size of the three-stream path (3 x 128, 512,
  // 4096), at every alignment, continuing from a non-zero CRC.
  std::string bytes(3 * 4096 * 2 + 64, '\0');
  uint32_t seed = 12345;
  for (char& c : bytes) {
    seed = seed * 1103515245u + 12345u;
    c = static_cast<char>(seed >> 16);
  }
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 1100; ++n) lengths.push_back(n);
  for (size_t block : {1536, 12288}) {
    for (size_t n = block - 9; n <= block + 9; ++n) lengths.push_back(n);
  }
  lengths.push_back(2 * 12288 + 17);
  for (size_t n : lengths) {
    for (size_t align : {0, 1, 3, 7}) {
      const std::string data = bytes.substr(align, n);
      const uint32_t expected = BitwiseCrc32c(data, 0xDEADBEEFu);
      ASSERT_EQ(Crc32c(data.data(), n, 0xDEADBEEFu), expected) << n << " " << align;
      ASSERT_EQ(Crc32cPortable(data.data(), n, 0xDEADBEEFu), expected) << n;
      std::string copy(n + 2, 'x');
      ASSERT_EQ(Crc32cCopy(data.data(), n, copy.data() + 1, 0xDEADBEEFu), expected) << n;
      ASSERT_EQ(copy.substr(1, n), data) << n;
      ASSERT_EQ(copy.front(), 'x');
      ASSERT_EQ(copy.back(), 'x');
    }
  }
}

// Which implementation ran, for the log (scripts/cross_test.sh shows it).
// With SACKLI_EXPECT_CRC32C set (e.g. "armv8-crc" where the CPU has the
// instructions), a build or CPU that falls back to another fails here
// instead of passing on the table loop unnoticed.
TEST(MapCrc32c, ImplementationIsTheExpectedOne) {
  const std::string implementation = Crc32cImplementation();
  std::printf("crc32c implementation: %s\n", implementation.c_str());
  EXPECT_TRUE(implementation == "sse4.2" || implementation == "armv8-crc" ||
              implementation == "portable")
      << implementation;
  if (const char* expected = std::getenv("SACKLI_EXPECT_CRC32C")) {
    EXPECT_EQ(implementation, expected);
  }
}

TEST(MapEytzinger, OrderIsBreadthFirstOfTheSortedTree) {
  EXPECT_EQ(EytzingerOrder(0), std::vector<uint32_t>{});
  EXPECT_EQ(EytzingerOrder(1), std::vector<uint32_t>({0}));
  EXPECT_EQ(EytzingerOrder(3), std::vector<uint32_t>({1, 0, 2}));
  EXPECT_EQ(EytzingerOrder(6), std::vector<uint32_t>({3, 1, 5, 0, 2, 4}));
}

TEST(MapIndexTest, FindsEveryKeyAndNoOther) {
  for (uint32_t n : {0u, 1u, 2u, 3u, 7u, 8u, 100u, 1023u}) {
    std::vector<uint64_t> keys;
    std::vector<std::string> values;
    for (uint32_t i = 0; i < n; ++i) {
      keys.push_back(uint64_t{i} * 3 + 1);
      values.push_back(std::string(i % 5, 'a' + i % 26));
    }
    const std::string map = Build(keys, values);
    const MapIndex index = IndexOf(map);
    index.Validate();
    for (uint32_t i = 0; i < n; ++i) {
      const int64_t position = index.Find(keys[i]);
      ASSERT_GE(position, 0) << "n=" << n << " key=" << keys[i];
      EXPECT_EQ(index.Key(static_cast<uint32_t>(position)), keys[i]);
      EXPECT_EQ(index.Find(keys[i] + 1), -1);
    }
    EXPECT_EQ(index.Find(0), -1);
    EXPECT_EQ(index.Find(~uint64_t{0}), -1);
  }
}

TEST(MapIndexTest, FindManyAgreesWithFind) {
  // Sizes around full tree levels and search groups; keys present, absent,
  // below and above every key, in an order that mixes deep and shallow walks.
  for (uint32_t n : {0u, 1u, 2u, 15u, 16u, 17u, 31u, 32u, 33u, 100u, 1000u}) {
    std::vector<uint64_t> keys;
    std::vector<std::string> values;
    for (uint32_t i = 0; i < n; ++i) {
      keys.push_back(uint64_t{i} * 5 + 2);
      values.push_back("v");
    }
    const std::string map = Build(keys, values);
    const MapIndex index = IndexOf(map);
    std::vector<uint64_t> wanted;
    for (uint64_t key = 0; key < uint64_t{n} * 5 + 4; key += 3) wanted.push_back(key);
    wanted.push_back(~uint64_t{0});
    std::vector<int64_t> positions(wanted.size(), -7);
    index.FindMany(wanted.data(), wanted.size(), positions.data());
    for (size_t i = 0; i < wanted.size(); ++i) {
      EXPECT_EQ(positions[i], index.Find(wanted[i])) << "n=" << n << " key=" << wanted[i];
    }
  }
}

TEST(MapIndexTest, LargestKeyIsFound) {
  const std::string map = Build({5, ~uint64_t{0}}, {"a", "b"});
  EXPECT_GE(IndexOf(map).Find(~uint64_t{0}), 0);
}

TEST(MapHeaderTest, RejectsBadHeaders) {
  std::string map = Build({1}, {"x"});
  std::string bad = map;
  bad[0] = 'X';
  EXPECT_NE(CorruptionMessage([&] {
              ParseMapHeader(bad.data(), bad.size(), MapKind::kMapBuffer, "m.mb");
            }).find("magic"),
            std::string::npos);
  bad = map;
  bad[7] = 9;
  EXPECT_NE(CorruptionMessage([&] {
              ParseMapHeader(bad.data(), bad.size(), MapKind::kMapBuffer, "m.mb");
            }).find("version 9"),
            std::string::npos);
  bad = map;
  std::memcpy(bad.data() + 8, "xz__", 4);
  EXPECT_NE(CorruptionMessage([&] {
              ParseMapHeader(bad.data(), bad.size(), MapKind::kMapBuffer, "m.mb");
            }).find("unknown compression"),
            std::string::npos);
  EXPECT_NE(CorruptionMessage([&] {
              ParseMapHeader(map.data(), 10, MapKind::kMapBuffer, "m.mb");
            }).find("truncated header"),
            std::string::npos);
  // A count larger than the map: a truncated index.
  const std::string cut = map.substr(0, 20);
  EXPECT_NE(CorruptionMessage([&] { IndexOf(cut); }).find("truncated index"),
            std::string::npos);
}

TEST(MapIndexTest, OffsetsAreBoundsChecked) {
  std::string map = Build({1, 2, 3}, {"aa", "bb", "cc"});
  // Entry 1's offset past the end of the map.
  StoreU64(map.data() + kMapBufferHeaderBytes + kMapEntryBytes + 8, 1u << 20);
  const MapIndex index = IndexOf(map);
  const std::string message = CorruptionMessage([&] { index.Extent(1); });
  EXPECT_NE(message.find("m.mb"), std::string::npos);
  EXPECT_NE(message.find("key 1"), std::string::npos) << message;  // position 1 holds key 1
  EXPECT_NE(message.find("byte offset"), std::string::npos);
  CorruptionMessage([&] { index.Validate(); });
}

TEST(MapLookupTest, BatchedLookupChecksCrcAndDecodesZstd) {
  std::vector<uint64_t> keys;
  std::vector<std::string> values;
  for (uint64_t i = 0; i < 3000; ++i) {
    keys.push_back(i * 7);
    values.push_back(std::string(i % 300, static_cast<char>('a' + i % 26)));
  }
  for (MapCompression compression : {MapCompression::kNone, MapCompression::kZstd}) {
    const std::string map = Build(keys, values, compression);
    const MapIndex index = IndexOf(map);
    MemorySource source(map.data(), map.size(), "m.mb");
    const MapLookup lookup(index, source, true);
    std::vector<uint64_t> wanted;
    for (uint64_t i = 0; i < 3000; i += 3) wanted.push_back(i * 7);
    wanted.push_back(1);  // absent
    const std::vector<FoundValue> found = lookup.Locate(wanted.data(), wanted.size(), 4);
    std::vector<std::string> out(found.size());
    std::vector<char*> outputs;
    for (size_t k = 0; k < found.size(); ++k) {
      out[k].resize(found[k].decoded_size);
      outputs.push_back(out[k].data());
    }
    lookup.Decode(found, outputs.data(), 4);
    for (size_t k = 0; k + 1 < wanted.size(); ++k) {
      EXPECT_EQ(out[k], values[wanted[k] / 7]);
    }
    EXPECT_EQ(found.back().position, -1);
  }
}

TEST(MapLookupTest, CrcMismatchNamesKeyAndOffset) {
  std::string map = Build({1, 2}, {"hello", "world"});
  map[map.find("hello")] = 'H';
  const MapIndex index = IndexOf(map);
  MemorySource source(map.data(), map.size(), "m.mb");
  const uint64_t key = 1;
  // Locate finds the value; Decode, which reads it, checks its crc32c.
  auto lookup_and_decode = [&](bool check_crc) {
    const MapLookup lookup(index, source, check_crc);
    const std::vector<FoundValue> found = lookup.Locate(&key, 1, 1);
    std::string out(found[0].decoded_size, '\0');
    char* outputs[] = {out.data()};
    lookup.Decode(found, outputs, 1);
    return out;
  };
  const std::string message = CorruptionMessage([&] { lookup_and_decode(true); });
  EXPECT_NE(message.find("key 1"), std::string::npos) << message;
  EXPECT_NE(message.find("crc32c"), std::string::npos) << message;
  // Unchecked, the damaged value is returned as stored.
  EXPECT_EQ(lookup_and_decode(false), "Hello");
}

// A map of `n` keys (i * 7) to values of i % 300 bytes, and its lookup.
struct LookupFixture {
  explicit LookupFixture(size_t n, MapCompression compression) {
    for (uint64_t i = 0; i < n; ++i) {
      keys.push_back(i * 7);
      values.push_back(std::string(i % 300, static_cast<char>('a' + i % 26)));
    }
    map = Build(keys, values, compression);
  }
  std::vector<uint64_t> keys;
  std::vector<std::string> values;
  std::string map;
};

// Every key of `map` located, with an output string per value.
struct Located {
  Located(const std::string& map, const std::vector<uint64_t>& keys)
      : index(IndexOf(map)),
        source(map.data(), map.size(), "m.mb"),
        lookup(index, source, true),
        found(lookup.Locate(keys.data(), keys.size(), 4)),
        out(found.size()),
        outputs(found.size(), nullptr) {}

  // The output of value k, at its size.
  void Allocate(size_t k) {
    out[k].resize(found[k].decoded_size);
    outputs[k] = out[k].data();
  }

  const MapIndex index;
  MemorySource source;
  const MapLookup lookup;
  const std::vector<FoundValue> found;
  std::vector<std::string> out;
  std::vector<char*> outputs;
};

TEST(MapLookupTest, PublishedDecodeOverlapsAllocationAndDecoding) {
  for (MapCompression compression : {MapCompression::kNone, MapCompression::kZstd}) {
    const LookupFixture fixture(5000, compression);
    Located located(fixture.map, fixture.keys);
    const std::vector<FoundValue>& found = located.found;
    {
      PublishedDecode decode(located.lookup, found, located.outputs.data(), 4);
      // Published in groups that do not line up with the decoding chunks.
      for (size_t k = 0; k < found.size(); ++k) {
        located.Allocate(k);
        if (k % 100 == 99) decode.Publish(k + 1);
      }
      decode.Finish();
    }
    for (size_t k = 0; k < found.size(); ++k) {
      ASSERT_EQ(located.out[k], fixture.values[k]) << k;
    }
  }
}

TEST(MapLookupTest, PublishedDecodeRethrowsAndCanBeAbandoned) {
  LookupFixture fixture(3000, MapCompression::kNone);
  {
    const MapIndex intact = IndexOf(fixture.map);
    const int64_t position = intact.Find(2500 * 7);
    ASSERT_GE(position, 0);
    fixture.map[intact.Word(static_cast<uint32_t>(position))] ^= 1;
  }
  Located located(fixture.map, fixture.keys);
  for (size_t k = 0; k < located.found.size(); ++k) located.Allocate(k);
  const std::string message = CorruptionMessage([&] {
    PublishedDecode decode(located.lookup, located.found, located.outputs.data(), 4);
    decode.Finish();
  });
  EXPECT_NE(message.find("key 17500"), std::string::npos) << message;
  // Abandoned half-way (the caller's allocation failed): the helpers stop
  // before the outputs go, and nothing is rethrown.
  for (int round = 0; round < 20; ++round) {
    PublishedDecode decode(located.lookup, located.found, located.outputs.data(), 4);
    decode.Publish(1024);
  }
}

TEST(MapBuildTest, IntMapLayout) {
  const std::string map = BuildIntMap({1, 2, 3}, {10, 20, 30});
  ASSERT_EQ(map.size(), kIntMapHeaderBytes + 3 * kMapEntryBytes);
  const MapHeader header = ParseMapHeader(map.data(), map.size(), MapKind::kIntMap, "m.im");
  const MapIndex index(header, map.data() + header.index_offset(), map.size(), "m.im");
  index.Validate();
  EXPECT_EQ(index.Word(static_cast<uint32_t>(index.Find(2))), 20u);
  EXPECT_THROW(BuildIntMap({2, 1}, {0, 0}), Error);
}

}  // namespace
}  // namespace sackli
