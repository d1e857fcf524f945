// The "ceiling" of benchmarks/compare_bagz.py: the same I/O and decompression
// as a bag reader, without Python objects, allocation or error handling.
//
// It memory-maps one bag file (limits at the TAIL: the last 8 bytes are the
// start of the limits section, which holds one little-endian uint64 end
// offset per record), then copies each requested record into a reused buffer
// or, for a .bagz file, decompresses it there with one reused ZSTD_DCtx per
// thread. Each repetition maps the file afresh (untimed, as the benchmark
// opens a fresh reader per repetition) and is timed in-process with
// steady_clock; the result is one line of JSON on stdout.
//
//   g++ -O2 -std=c++17 -pthread ceiling.cc -o ceiling -lzstd
//   ceiling open PATH REPEAT
//   ceiling read PATH INDICES_FILE THREADS REPEAT [serial]
//
// INDICES_FILE holds native int64 record indices; `read` splits them into
// THREADS contiguous chunks, one per thread. An uncompressed record is
// copied; a compressed one is decompressed (a record stored empty stays
// empty, as in bagz).
//
// `serial` (x86-64 only) waits for each record's loads to complete before
// the next record starts (an lfence after each): a C++ loop otherwise
// overlaps the cache misses and page faults of consecutive records, which a
// reader called once per record from Python cannot do, since hundreds of
// interpreter instructions separate one call's loads from the next's. It
// measures that floor for `r[i]` loops.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "ceiling: %s\n", message.c_str());
  std::exit(1);
}

struct Bag {
  int fd = -1;
  const uint8_t* data = nullptr;
  size_t file_size = 0;
  const uint8_t* limits = nullptr;  // num_records little-endian uint64 ends
  size_t num_records = 0;
  bool compressed = false;

  uint64_t End(size_t i) const {
    uint64_t end;
    std::memcpy(&end, limits + 8 * i, 8);
    return end;
  }
  uint64_t Begin(size_t i) const { return i == 0 ? 0 : End(i - 1); }
};

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Bag OpenBag(const std::string& path) {
  Bag bag;
  bag.fd = open(path.c_str(), O_RDONLY);
  if (bag.fd < 0) Fail("cannot open " + path);
  struct stat info;
  if (fstat(bag.fd, &info) != 0 || info.st_size < 8) Fail("not a bag: " + path);
  bag.file_size = static_cast<size_t>(info.st_size);
  void* mapped = mmap(nullptr, bag.file_size, PROT_READ, MAP_SHARED, bag.fd, 0);
  if (mapped == MAP_FAILED) Fail("cannot mmap " + path);
  bag.data = static_cast<const uint8_t*>(mapped);
  uint64_t records_size;  // pread: cheaper than faulting the last page in
  if (pread(bag.fd, &records_size, 8, static_cast<off_t>(bag.file_size - 8)) != 8) {
    Fail("cannot read " + path);
  }
  if (records_size > bag.file_size - 8) Fail("bad limits offset in " + path);
  bag.limits = bag.data + records_size;
  bag.num_records = (bag.file_size - records_size) / 8;
  bag.compressed = EndsWith(path, ".bagz");
  return bag;
}

void CloseBag(Bag& bag) {
  munmap(const_cast<uint8_t*>(bag.data), bag.file_size);
  close(bag.fd);
}

// Reads records `indices` into a reused buffer; returns a checksum so that
// the work cannot be optimized away.
uint64_t ReadRecords(const Bag& bag, const int64_t* indices, size_t count,
                     bool serial) {
  std::vector<uint8_t> buffer(1 << 16);
  ZSTD_DCtx* dctx = bag.compressed ? ZSTD_createDCtx() : nullptr;
  uint64_t checksum = 0;
  for (size_t k = 0; k < count; ++k) {
    const size_t i = static_cast<size_t>(indices[k]);
    const uint64_t begin = bag.Begin(i), end = bag.End(i);
    const uint8_t* stored = bag.data + begin;
    size_t size = end - begin;
    if (dctx != nullptr && size > 0) {
      const unsigned long long content = ZSTD_getFrameContentSize(stored, size);
      if (content == ZSTD_CONTENTSIZE_ERROR || content == ZSTD_CONTENTSIZE_UNKNOWN)
        Fail("record " + std::to_string(i) + " has no zstd content size");
      if (content > buffer.size()) buffer.resize(content);
      size = ZSTD_decompressDCtx(dctx, buffer.data(), buffer.size(), stored, size);
      if (ZSTD_isError(size)) Fail(ZSTD_getErrorName(size));
    } else {
      if (size > buffer.size()) buffer.resize(size);
      std::memcpy(buffer.data(), stored, size);
    }
    checksum += size + (size > 0 ? buffer[size - 1] : 0);
#if defined(__x86_64__)
    if (serial) asm volatile("lfence" ::: "memory");
#else
    if (serial) Fail("serial needs x86-64");
#endif
  }
  ZSTD_freeDCtx(dctx);
  return checksum;
}

uint64_t ReadParallel(const Bag& bag, const std::vector<int64_t>& indices, int threads,
                      bool serial) {
  std::vector<uint64_t> checksums(threads);
  std::vector<std::thread> workers;
  const size_t chunk = (indices.size() + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const size_t first = std::min(indices.size(), t * chunk);
    const size_t last = std::min(indices.size(), first + chunk);
    workers.emplace_back([&, t, first, last] {
      checksums[t] = ReadRecords(bag, indices.data() + first, last - first, serial);
    });
  }
  uint64_t checksum = 0;
  for (int t = 0; t < threads; ++t) {
    workers[t].join();
    checksum += checksums[t];
  }
  return checksum;
}

std::vector<int64_t> LoadIndices(const std::string& path, size_t num_records) {
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) Fail("cannot open " + path);
  std::vector<int64_t> indices;
  int64_t index;
  while (std::fread(&index, sizeof index, 1, file) == 1) {
    if (index < 0 || static_cast<size_t>(index) >= num_records) Fail("index out of range");
    indices.push_back(index);
  }
  std::fclose(file);
  return indices;
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void PrintResult(const std::vector<double>& times, uint64_t checksum) {
  std::printf("{\"times\": [");
  for (size_t k = 0; k < times.size(); ++k) std::printf("%s%.9f", k ? ", " : "", times[k]);
  std::printf("], \"checksum\": %llu, \"zstd\": \"%s\"}\n",
              static_cast<unsigned long long>(checksum), ZSTD_versionString());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  std::vector<double> times;
  uint64_t checksum = 0;
  if (mode == "open" && argc == 5) {
    const int opens = std::max(1, std::atoi(argv[4]));
    for (int r = 0, repeat = std::atoi(argv[3]); r < repeat; ++r) {
      std::vector<Bag> bags;
      const auto start = std::chrono::steady_clock::now();
      for (int k = 0; k < opens; ++k) bags.push_back(OpenBag(argv[2]));
      times.push_back(Seconds(start));  // readers stay open: close untimed
      for (Bag& bag : bags) {
        checksum += bag.num_records;
        CloseBag(bag);
      }
    }
  } else if (mode == "read" && (argc == 6 || (argc == 7 && std::string(argv[6]) == "serial"))) {
    const int threads = std::max(1, std::atoi(argv[4]));
    const bool serial = argc == 7;
    for (int r = 0, repeat = std::atoi(argv[5]); r < repeat; ++r) {
      // Like the Python workloads, each repetition reads through a freshly
      // opened (mapped) file; opening is untimed.
      Bag bag = OpenBag(argv[2]);
      const std::vector<int64_t> indices = LoadIndices(argv[3], bag.num_records);
      const auto start = std::chrono::steady_clock::now();
      checksum += ReadParallel(bag, indices, threads, serial);
      times.push_back(Seconds(start));
      CloseBag(bag);
    }
  } else {
    Fail("usage: ceiling open PATH REPEAT OPENS | ceiling read PATH INDICES_FILE THREADS REPEAT [serial]");
  }
  PrintResult(times, checksum);
  return 0;
}
