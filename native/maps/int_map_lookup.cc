#include "maps/int_map_lookup.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <thread>

#include "bagz/codec.h"
#include "bagz/errors.h"
#include "bagz/fault_guard.h"
#include "bagz/prefetch.h"
#include "bagz/thread_pool.h"

namespace sackli {
namespace {

// Keys per pool task: enough work to pay for the hand-off.
constexpr size_t kKeysPerTask = 256;

// Values this far ahead of the one being decoded are prefetched whole: a
// random value is a cache (and TLB) miss, and the hardware prefetcher only
// follows a value once several of its lines have missed.
constexpr size_t kPrefetchAhead = 4;
constexpr size_t kPrefetchMaxBytes = 4096;

const Codec& ZstdCodec() {
  static const Codec codec = Codec::Zstd(3, "");
  return codec;
}

size_t ChunkCount(size_t n) { return (n + kKeysPerTask - 1) / kKeysPerTask; }

// Runs fn(first, end) over [0, n) in chunks of kKeysPerTask on the pool.
// Each chunk's reads of `source` are guarded on the thread that runs it: a
// FaultScope covers its own thread only.
template <typename Fn>
void ForEachChunk(const ByteSource& source, size_t n, size_t parallelism, const Fn& fn) {
  const size_t chunks = ChunkCount(n);
  auto run = [&](size_t chunk) {
    const size_t first = chunk * kKeysPerTask;
    Guarded(source, [&] { fn(first, std::min(n, first + kKeysPerTask)); });
  };
  if (chunks <= 1 || parallelism <= 1) {
    for (size_t chunk = 0; chunk < chunks; ++chunk) run(chunk);
    return;
  }
  ThreadPool::Shared().ParallelFor(chunks, parallelism, run);
}

// Starts loading the stored bytes of a located value.
void PrefetchValue(const FoundValue& value) {
  if (value.position < 0 || !value.staged.empty()) return;
  PrefetchBytes(value.payload,  // with its crc32c
                std::min(value.payload_size + kMapChecksumBytes, kPrefetchMaxBytes));
}

}  // namespace

void MapLookup::CheckPosition(uint32_t position) const {
  if (position >= index_.size()) {
    ThrowOutOfRange("map position " + std::to_string(position) +
                    " out of range for " + std::to_string(index_.size()) +
                    " keys");
  }
}

void MapLookup::Fill(FoundValue& value) const {
  const auto position = static_cast<uint32_t>(value.position);
  const ValueExtent extent = index_.Extent(position);
  const size_t stored = static_cast<size_t>(extent.end - extent.begin);
  const char* bytes = source_.mapped();
  if (bytes != nullptr) {
    bytes += extent.begin;
  } else {
    value.staged.resize(stored);
    source_.Read(extent.begin, stored, value.staged.data());
    bytes = value.staged.data();
  }
  Check(value, bytes, stored);
}

FoundValue MapLookup::LocateIn(uint32_t position, const char* stored,
                               size_t n) const {
  CheckPosition(position);
  FoundValue value;
  value.position = position;
  Check(value, stored, n);
  return value;
}

void MapLookup::CheckCrc(const FoundValue& value, const char* payload) const {
  index_.VerifyValue(static_cast<uint32_t>(value.position), payload,
                     value.payload_size + kMapChecksumBytes, true);
}

void MapLookup::Check(FoundValue& value, const char* bytes,
                      size_t stored) const {
  const auto position = static_cast<uint32_t>(value.position);
  value.payload = bytes;
  // The length is checked here; the crc32c, when Decode reads the value.
  value.payload_size = index_.VerifyValue(position, bytes, stored, false);
  value.crc_pending = check_crc_ && index_.header().has_checksums();
  value.decoded_size = value.payload_size;
  const MapCompression compression = index_.header().compression;
  if (compression == MapCompression::kNone) {
    CheckDecodedSize(position, value.decoded_size);
    return;
  }
  // Below, the value is damaged or needs decoding now: a crc mismatch, if
  // there is one, is the error to report, so it is checked first.
  auto check_crc_now = [&] {
    if (value.crc_pending) CheckCrc(value, bytes);
    value.crc_pending = false;
  };
  if (value.payload_size == 0) {
    check_crc_now();
    index_.ThrowCorruptValue(position, index_.Word(position),
                             "an empty value cannot be decompressed");
  }
  if (compression != MapCompression::kZstd) return;
  try {
    const uint64_t size =
        ZstdCodec().DecodedSize(value.payload, value.payload_size);
    if (size != Codec::kUnknownSize) {
      CheckDecodedSize(position, size);
      value.decoded_size = size;
      return;
    }
    // No content size in the frame: decode now, into the staging string.
    check_crc_now();
    std::string decoded;
    try {
      decoded = ZstdCodec().DecodeUnsized(value.payload, value.payload_size,
                                          max_value_bytes_);
    } catch (const DecodedOverLimit&) {
      ThrowTooLarge(position, "more than " + std::to_string(max_value_bytes_));
    } catch (const std::bad_alloc&) {
      throw Error(ErrorKind::kOutOfMemory,
                  index_.path() + ": value of key " +
                      std::to_string(index_.Key(position)) +
                      ": out of memory decoding a zstd frame without its content size",
                  index_.path());
    }
    value.staged = std::move(decoded);
    value.staged_decoded = true;
    value.payload = value.staged.data();
    value.payload_size = value.decoded_size = value.staged.size();
  } catch (const CodecError& e) {
    check_crc_now();
    index_.ThrowCorruptValue(position, index_.Word(position),
                             std::string("does not decompress: ") + e.what());
  }
}

void MapLookup::ThrowTooLarge(uint32_t position, const std::string& size_text) const {
  throw Error(ErrorKind::kTooLarge,
              index_.path() + ": value of key " + std::to_string(index_.Key(position)) +
                  " decodes to " + size_text + " bytes (max_value_bytes=" +
                  std::to_string(max_value_bytes_) + ")",
              index_.path());
}

std::vector<FoundValue> MapLookup::Locate(const uint64_t* keys, size_t n,
                                          size_t parallelism) const {
  std::vector<FoundValue> found(n);
  const char* mapped = source_.mapped();
  const bool compressed = index_.header().compression != MapCompression::kNone;
  ForEachChunk(source_, n, parallelism, [&](size_t first, size_t end) {
    const size_t count = end - first;
    int64_t positions[kKeysPerTask];
    index_.FindMany(keys + first, count, positions);
    for (size_t i = 0; i < count; ++i) {
      found[first + i].position = positions[i];
      // A compressed value's frame header (read by Fill) is on its way while
      // the chunk's other values are located. Bad offsets are caught by
      // Fill; a prefetch never faults.
      if (compressed && mapped != nullptr && positions[i] >= 0) {
        const uint64_t begin = index_.Word(static_cast<uint32_t>(positions[i]));
        if (begin < source_.size()) __builtin_prefetch(mapped + begin);
      }
    }
    for (size_t i = 0; i < count; ++i) {
      if (positions[i] >= 0) Fill(found[first + i]);
    }
  });
  return found;
}

FoundValue MapLookup::LocateAt(uint32_t position) const {
  CheckPosition(position);
  FoundValue value;
  value.position = position;
  Guarded(source_, [&] { Fill(value); });
  return value;
}

std::vector<FoundValue> MapLookup::LocateRange(uint32_t first, size_t n,
                                               size_t parallelism) const {
  // In 64 bits: first + n - 1 may not fit the u32 a position is.
  if (n > 0 && uint64_t{first} + n > index_.size()) {
    ThrowOutOfRange("map positions [" + std::to_string(first) + ", " +
                    std::to_string(uint64_t{first} + n) + ") out of range for " +
                    std::to_string(index_.size()) + " keys");
  }
  std::vector<FoundValue> found(n);
  ForEachChunk(source_, n, parallelism, [&](size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) {
      found[k].position = static_cast<int64_t>(first + k);
      Fill(found[k]);
    }
  });
  return found;
}

void MapLookup::DecodeOne(const FoundValue& value, char* output) const {
  if (value.position < 0) return;
  // A FoundValue may have moved since Locate: staged bytes moved with it.
  const char* payload = value.staged.empty() ? value.payload : value.staged.data();
  const bool stored_as_is =
      value.staged_decoded || index_.header().compression != MapCompression::kZstd;
  if (stored_as_is && value.crc_pending) {
    // Checked and copied in one read of the value.
    index_.VerifyValue(static_cast<uint32_t>(value.position), payload,
                       value.payload_size + kMapChecksumBytes, true, output);
    return;
  }
  if (value.crc_pending) CheckCrc(value, payload);
  if (stored_as_is) {
    if (value.payload_size > 0) std::memcpy(output, payload, value.payload_size);
    return;
  }
  // A frame whose header says 0 bytes is decoded too: it must hold nothing.
  try {
    ZstdCodec().Decode(payload, value.payload_size, output,
                       value.decoded_size);
  } catch (const CodecError& e) {
    const auto position = static_cast<uint32_t>(value.position);
    index_.ThrowCorruptValue(position, index_.Word(position),
                             std::string("does not decompress: ") + e.what());
  }
}

void MapLookup::DecodeRange(const std::vector<FoundValue>& found, char* const* outputs,
                            size_t first, size_t end) const {
  for (size_t k = first; k < std::min(end, first + kPrefetchAhead); ++k) {
    PrefetchValue(found[k]);
  }
  for (size_t k = first; k < end; ++k) {
    if (k + kPrefetchAhead < end) PrefetchValue(found[k + kPrefetchAhead]);
    DecodeOne(found[k], outputs[k]);
  }
}

void MapLookup::Decode(const std::vector<FoundValue>& found,
                       char* const* outputs, size_t parallelism) const {
  ForEachChunk(source_, found.size(), parallelism, [&](size_t first, size_t end) {
    DecodeRange(found, outputs, first, end);
  });
}

// What the decoding helpers and the publishing thread share. Held by
// shared_ptr: a helper that starts after the work is done still touches it.
struct PublishedDecode::Shared {
  const MapLookup& lookup;
  const std::vector<FoundValue>& found;
  char* const* outputs;
  const size_t chunks;
  std::atomic<size_t> published{0};  // outputs[0, published) are set
  std::atomic<size_t> next_chunk{0};
  std::atomic<bool> stopped{false};  // an error, or the publisher gave up
  std::mutex mutex;
  std::condition_variable idle;
  size_t running_helpers = 0;  // helpers that started before `closed`
  bool closed = false;         // the publisher no longer waits for helpers
  std::exception_ptr error;

  Shared(const MapLookup& lookup, const std::vector<FoundValue>& found,
         char* const* outputs)
      : lookup(lookup), found(found), outputs(outputs), chunks(ChunkCount(found.size())) {}

  // A pool thread's part: nothing once the publisher has closed the work
  // (a helper that starts that late must not touch `found` or `outputs`).
  void Help() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (closed) return;
      ++running_helpers;
    }
    DecodeChunks();
    std::lock_guard<std::mutex> lock(mutex);
    if (--running_helpers == 0) idle.notify_all();
  }

  // Closes the work to helpers not yet started and waits for the others.
  void Close() {
    std::unique_lock<std::mutex> lock(mutex);
    closed = true;
    idle.wait(lock, [&] { return running_helpers == 0; });
  }

  // Decodes chunks as their outputs are published, until none is left.
  void DecodeChunks() {
    for (;;) {
      const size_t chunk = next_chunk.fetch_add(1, std::memory_order_relaxed);
      if (chunk >= chunks) return;
      const size_t first = chunk * kKeysPerTask;
      const size_t end = std::min(found.size(), first + kKeysPerTask);
      // The publisher allocates a chunk faster than a helper decodes one:
      // a wait is short, and only at the start.
      while (published.load(std::memory_order_acquire) < end) {
        if (stopped.load(std::memory_order_relaxed)) return;
        std::this_thread::yield();
      }
      if (stopped.load(std::memory_order_relaxed)) return;
      try {
        Guarded(lookup.source(), [&] { lookup.DecodeRange(found, outputs, first, end); });
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
        stopped.store(true, std::memory_order_relaxed);
      }
    }
  }
};

PublishedDecode::PublishedDecode(const MapLookup& lookup, const std::vector<FoundValue>& found,
                                 char* const* outputs, size_t parallelism)
    : shared_(std::make_shared<Shared>(lookup, found, outputs)) {
  const size_t helpers = std::min(shared_->chunks, std::max<size_t>(parallelism, 1)) - 1;
  for (size_t h = 0; h < helpers; ++h) {
    ThreadPool::Shared().Submit([shared = shared_] { shared->Help(); }, helpers);
  }
}

PublishedDecode::~PublishedDecode() {
  if (finished_) return;
  // The outputs are about to be freed: no helper may write to them after.
  shared_->stopped.store(true, std::memory_order_relaxed);
  shared_->Close();
}

void PublishedDecode::Publish(size_t count) {
  shared_->published.store(count, std::memory_order_release);
}

void PublishedDecode::Finish() {
  Publish(shared_->found.size());
  shared_->DecodeChunks();
  shared_->Close();
  finished_ = true;
  if (shared_->error) std::rethrow_exception(shared_->error);
}

}  // namespace sackli
