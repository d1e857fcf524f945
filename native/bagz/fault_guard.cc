#include "bagz/fault_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>

#include "bagz/byte_source.h"
#include "bagz/errors.h"

namespace sackli {
namespace {

// The innermost FaultScope of this thread, or null. The signal handler reads
// it, so it must not take a call that might allocate. glibc may allocate a
// dlopen()ed module's thread-local block on its first use in a thread:
// initial-exec TLS there. musl refuses to load a module with initial-exec
// TLS, and needs none: it allocates every module's blocks at dlopen() and
// thread start. (On macOS a thread's first use may allocate; a thread that
// faults inside a scope has used it already.)
#if defined(__GLIBC__)
#define SACKLI_SIGNAL_SAFE_TLS __attribute__((tls_model("initial-exec")))
#else
#define SACKLI_SIGNAL_SAFE_TLS
#endif
SACKLI_SIGNAL_SAFE_TLS thread_local const FaultScope* g_innermost = nullptr;

struct sigaction g_previous;  // the SIGBUS disposition before ours
uintptr_t g_page_size = 4096;

void OnSigbus(int signal_number, siginfo_t* info, void* context) {
  // si_code > 0: raised by the kernel for a memory access, not sent by kill.
  if (info != nullptr && info->si_code > 0) {
    for (const FaultScope* scope = g_innermost; scope != nullptr;
         scope = scope->outer()) {
      if (scope->faults() != nullptr && scope->faults()->Absorb(info->si_addr)) {
        return;  // the access runs again and now reads zeros
      }
    }
  }
  // Not ours: hand it to whoever handled SIGBUS before us.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) {
      g_previous.sa_sigaction(signal_number, info, context);
      return;
    }
  } else if (g_previous.sa_handler != SIG_DFL &&
             g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(signal_number);
    return;
  }
  // The default action: terminate, as without us.
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  ::sigaction(signal_number, &default_action, nullptr);
  ::raise(signal_number);
}

}  // namespace

MappingFaults::MappingFaults(const char* base, uint64_t size, std::string path)
    : base_(base), size_(size), path_(std::move(path)) {}

bool MappingFaults::Absorb(const void* address) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(address);
  const uintptr_t base = reinterpret_cast<uintptr_t>(base_);
  if (at < base || at - base >= size_) return false;
  if (!changed()) fault_offset_.store(at - base, std::memory_order_relaxed);
  // Marked before the zero pages appear, so a thread that reads them sees
  // the mark when its scope checks.
  changed_.store(true, std::memory_order_seq_cst);
  const uintptr_t first = at & ~(g_page_size - 1);
  const uintptr_t end = (base + size_ + g_page_size - 1) & ~(g_page_size - 1);
  void* patched = ::mmap(reinterpret_cast<void*>(first), end - first, PROT_READ,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  return patched != MAP_FAILED;
}

void MappingFaults::ThrowChanged() const {
  ThrowCorruption(path_, fault_offset_.load(std::memory_order_relaxed),
                  "the file changed while this reader had it open (truncated "
                  "or rewritten in place by another process): its bytes from "
                  "here on are gone; open it again to read what it holds now");
}

FaultScope::FaultScope(const ByteSource& source)
    : faults_(source.faults()), outer_(g_innermost) {
  if (faults_ == nullptr) return;
  g_innermost = this;
  // The reads this scope guards must not be moved before it by the compiler.
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

FaultScope::~FaultScope() {
  if (faults_ == nullptr) return;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  g_innermost = outer_;
}

void InstallFaultHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    const long page = ::sysconf(_SC_PAGESIZE);
    if (page > 0) g_page_size = static_cast<uintptr_t>(page);
    struct sigaction action = {};
    action.sa_sigaction = &OnSigbus;
    // SA_NODEFER: a handler we chain to may re-raise SIGBUS and must see it
    // delivered; SA_ONSTACK: use the alternate stack when one is set (Python's
    // faulthandler sets one).
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous);
  });
}

}  // namespace sackli
