#include "python/gil.h"

#include <cxxabi.h>
#include <unistd.h>

// The exception glibc's pthread_exit unwinds a thread with. libstdc++ names
// it; libc++abi does not, but (...) catches it, and nothing else can leave
// the C calls it is caught around. musl's and macOS's pthread_exit unwind
// nothing.
#if defined(__GLIBCXX__)
#define SACKLI_FORCED_UNWIND abi::__forced_unwind&
#else
#define SACKLI_FORCED_UNWIND ...
#endif

namespace py = pybind11;

namespace sackli::python {
namespace {

unsigned long g_main_thread_ident = 0;

bool InterpreterFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

[[noreturn]] void Park() {
  for (;;) ::pause();
}

}  // namespace

void RememberMainThread() {
  g_main_thread_ident = py::module_::import("threading")
                            .attr("main_thread")()
                            .attr("ident")
                            .cast<unsigned long>();
}

// Taking the GIL while the interpreter shuts down ends the thread with
// pthread_exit, whose forced unwind cannot pass C++ destructors and aborts
// the process. A (daemon) thread that would do so parks instead, as CPython
// 3.14 itself does with such threads. The finalizing (main) thread must go
// on: objects' __del__ may still call into the engine while it tears the
// interpreter down.
void ParkIfFinalizing() {
  if (!InterpreterFinalizing()) return;
  if (PyThread_get_thread_ident() == g_main_thread_ident) return;
  Park();
}

ReleaseGil::ReleaseGil() : state_(PyEval_SaveThread()) {}

ReleaseGil::~ReleaseGil() {
  ParkIfFinalizing();
  // Finalization may begin while this thread waits for the GIL; CPython then
  // ends the thread with pthread_exit, whose forced unwind would leave this
  // noexcept destructor and abort. Park instead.
  try {
    PyEval_RestoreThread(state_);
  } catch (SACKLI_FORCED_UNWIND) {
    Park();
  }
}

AcquireGil::AcquireGil() {
  ParkIfFinalizing();
  try {
    state_ = PyGILState_Ensure();
  } catch (SACKLI_FORCED_UNWIND) {  // see ~ReleaseGil
    Park();
  }
}

void CheckSignals() {
  AcquireGil gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

}  // namespace sackli::python
