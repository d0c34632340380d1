#pragma once

#include <atomic>
#include <cstdint>

namespace torch::acc {

// Calls into Python from threads that do not hold the GIL, at interpreter exit.
//
// Autograd runs a Python backend's kernels on its device threads, which the
// interpreter did not create. A thread that asks for the GIL once the
// interpreter finalizes is ended by CPython with pthread_exit; the forced
// unwind that follows aborts the process ("terminate called without an active
// exception") as soon as it meets a noexcept frame, such as the autograd
// engine's own gil_scoped_release. That happens whenever the interpreter exits
// while a device thread runs a kernel: a backward pass in a daemon thread, or
// one whose error returned to the caller while another device thread still ran.
//
// beginExit(), called by an atexit handler while the interpreter is intact,
// refuses new calls from every thread but the one finalizing the interpreter
// (they raise a c10::Error, which autograd reports) and waits, without the
// GIL, for the calls in flight to return.
class PythonCallGate {
 public:
  // Counts the call in flight; throws a c10::Error once beginExit() has run,
  // on any thread but the one that ran it.
  PythonCallGate();
  ~PythonCallGate();
  PythonCallGate(const PythonCallGate&) = delete;
  PythonCallGate& operator=(const PythonCallGate&) = delete;
};

// Refuses later calls from other threads and waits up to `timeout_s` seconds
// for those in flight. Returns whether they all returned. Called with the GIL
// held, on the thread that finalizes the interpreter.
bool beginExit(double timeout_s);

} // namespace torch::acc
