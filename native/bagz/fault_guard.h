// Memory-mapped files that change under their reader.
//
// When another process truncates a file this process has mapped, reading a
// page past the file's new end raises SIGBUS, which kills the process. Every
// engine read of mapped memory therefore runs inside a FaultScope naming the
// source it reads. A SIGBUS on that thread, at an address inside that
// source's mapping, is absorbed: zero pages are mapped over the lost part of
// the mapping (so the interrupted read completes), and the mapping is marked
// as changed for good. The scope's Check() then throws kCorruption naming the
// file and the offset, and so does every later read of that file: its
// content is no longer the one the reader opened.
//
// Reads outside any scope (zero-copy buffers lent to Python, for example) are
// not protected: a SIGBUS there goes to the handler installed before ours
// (Python's faulthandler, or the default action).
//
// Example:
//   FaultScope scope(source);          // arms the guard for `source`
//   std::memcpy(dst, source.mapped() + offset, n);
//   scope.Check();                     // throws if the file shrank meanwhile
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>

namespace sackli {

class ByteSource;

// The fault state of one mapping: [base, base + size) of a file at `path`.
class MappingFaults {
 public:
  MappingFaults(const char* base, uint64_t size, std::string path);
  MappingFaults(const MappingFaults&) = delete;
  MappingFaults& operator=(const MappingFaults&) = delete;

  bool changed() const { return changed_.load(std::memory_order_acquire); }
  // Throws kCorruption if the mapping lost pages since it was opened.
  void ThrowIfChanged() const {
    if (changed()) ThrowChanged();
  }

  // Called by the signal handler only: true when `address` lies in this
  // mapping, which is then patched with zero pages and marked changed.
  bool Absorb(const void* address);

 private:
  [[noreturn]] void ThrowChanged() const;

  const char* base_;
  uint64_t size_;
  std::string path_;
  std::atomic<bool> changed_{false};
  std::atomic<uint64_t> fault_offset_{0};
};

// Arms the SIGBUS guard for reads of `source` on this thread, for the
// lifetime of the scope. Scopes nest: inside two scopes, reads of both
// sources are guarded. A no-op for unmapped sources.
class FaultScope {
 public:
  explicit FaultScope(const ByteSource& source);
  ~FaultScope();
  FaultScope(const FaultScope&) = delete;
  FaultScope& operator=(const FaultScope&) = delete;

  // Throws kCorruption if the source's mapping changed (now or earlier).
  void Check() const {
    if (faults_ != nullptr) faults_->ThrowIfChanged();
  }

  // For the signal handler: the scope around this one, and what it guards.
  const FaultScope* outer() const { return outer_; }
  MappingFaults* faults() const { return faults_; }

 private:
  MappingFaults* faults_;
  const FaultScope* outer_;
};

// Installs the process's SIGBUS handler (once; later calls do nothing). Done
// by every mapped file when it opens.
void InstallFaultHandler();

// Runs fn() with reads of `source` guarded. An exception fn() throws because
// it read zeros where the file vanished becomes the file-changed error.
template <typename Fn>
auto Guarded(const ByteSource& source, Fn&& fn) -> decltype(fn()) {
  FaultScope scope(source);
  if constexpr (std::is_void_v<decltype(fn())>) {
    try {
      fn();
    } catch (...) {
      scope.Check();
      throw;
    }
    scope.Check();
  } else {
    auto result = [&] {
      try {
        return fn();
      } catch (...) {
        scope.Check();
        throw;
      }
    }();
    scope.Check();
    return result;
  }
}

}  // namespace sackli
