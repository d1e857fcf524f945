// The GIL around engine work: released while the engine runs, re-taken for
// callbacks into Python, and Ctrl-C noticed during long waits. Threads that
// would take the GIL while the interpreter shuts down park instead of dying
// in a forced unwind (see ParkIfFinalizing).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>

namespace sackli::python {

// How often a long wait re-takes the GIL to notice Ctrl-C.
inline constexpr int64_t kSignalCheckMilliseconds = 100;

// Records the main thread (the one allowed to go on during finalization);
// called once by the module's initialisation.
void RememberMainThread();

// A thread other than the main one that would take the GIL while the
// interpreter finalizes parks forever (the process is exiting anyway).
void ParkIfFinalizing();

// Releases the GIL for engine work; re-takes it when done.
class ReleaseGil {
 public:
  ReleaseGil();
  ~ReleaseGil();
  ReleaseGil(const ReleaseGil&) = delete;
  ReleaseGil& operator=(const ReleaseGil&) = delete;

 private:
  PyThreadState* state_;
};

// Takes the GIL inside engine work that runs under ReleaseGil (callbacks).
class AcquireGil {
 public:
  AcquireGil();
  ~AcquireGil() { PyGILState_Release(state_); }
  AcquireGil(const AcquireGil&) = delete;
  AcquireGil& operator=(const AcquireGil&) = delete;

 private:
  PyGILState_STATE state_;
};

// Re-takes the GIL and throws (KeyboardInterrupt, ...) if a signal arrived:
// the engine's checkpoint between chunks of a long batch.
void CheckSignals();

// Waits for background work (anything with WaitFor(milliseconds) -> bool)
// with the GIL released, noticing Ctrl-C between waits. Called with the GIL.
template <typename Task>
void WaitNoticingSignals(Task& task) {
  for (;;) {
    bool done;
    {
      ReleaseGil release;
      done = task.WaitFor(kSignalCheckMilliseconds);
    }
    if (done) return;
    if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
  }
}

// As WaitNoticingSignals, ignoring signals: for destructors, which must not
// return while the pool still writes into memory they free.
template <typename Task>
void WaitUninterrupted(Task& task) {
  ReleaseGil release;
  while (!task.WaitFor(kSignalCheckMilliseconds)) {
  }
}

}  // namespace sackli::python
