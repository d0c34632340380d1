#pragma once

#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <cstdint>
#include <new>
#include <optional>
#include <string>

namespace torch::acc {

namespace py = pybind11;

// Calls into Python from threads that do not hold the GIL, at interpreter exit.
//
// Autograd runs a Python backend's kernels, and releases the payloads of the
// tensors it held, on its device threads, which the interpreter did not
// create. A thread that asks for the GIL once the interpreter finalizes is
// ended by CPython with pthread_exit; the forced unwind that follows aborts the
// process ("terminate called without an active exception") as soon as it meets
// a noexcept frame, such as a destructor. That happens whenever the
// interpreter exits while a device thread still works: when a backward pass
// raised on the caller's thread, which returned, while a device thread still
// ran a kernel of the same pass.
//
// Every call into Python from C++ that may run on such a thread passes a
// PythonCallGate before it asks for the GIL. beginExit(), called by an atexit
// handler while the interpreter is intact, makes the gates refuse every thread
// but the one finalizing the interpreter, and waits, without the GIL, for the
// calls already admitted to return. A refused kernel call raises a c10::Error
// (autograd reports it); a refused release leaks its reference, which the
// exiting process gives back anyway.
//
// A Python thread that waits for a backward pass is ended the same way when
// the pass returns after finalization began; that is CPython and the autograd
// engine, and happens with CPU tensors as well.
class PythonCallGate {
 public:
  // Admits the call, or throws a c10::Error once beginExit() has run on
  // another thread.
  PythonCallGate();
  // Admits the call or refuses it without throwing; see admitted().
  explicit PythonCallGate(std::nothrow_t /*unused*/) noexcept;
  ~PythonCallGate();
  PythonCallGate(const PythonCallGate&) = delete;
  PythonCallGate& operator=(const PythonCallGate&) = delete;

  bool admitted() const {
    return admitted_;
  }

 private:
  bool admitted_;
};

// The GIL for a call into Python from any thread: a PythonCallGate (which
// throws when refused), then the GIL.
class GilForCall {
 public:
  GilForCall() = default;

 private:
  PythonCallGate gate_;
  py::gil_scoped_acquire gil_;
};

// The GIL for releasing Python references from any thread, at any time (in a
// destructor): held, with any pending Python error saved and restored, through
// a non-throwing PythonCallGate. Not held once the interpreter is finalized,
// or exits on another thread: then active() is false, and the caller leaks
// what it would have released.
class GilForRelease {
 public:
  GilForRelease() noexcept;

  bool active() const {
    return gil_.has_value();
  }

 private:
  PythonCallGate gate_{std::nothrow};
  std::optional<py::gil_scoped_acquire> gil_;
  std::optional<py::error_scope> pending_;
};

// An owned reference to a Python object that C++ may release on any thread,
// at any time, through GilForRelease: once the interpreter exits, a release on
// another thread, or after finalization, leaks the reference instead.
class OwnedPyObject {
 public:
  OwnedPyObject() = default;
  // Takes a new reference to `obj`. Must hold the GIL.
  explicit OwnedPyObject(py::handle obj) : obj_(obj.inc_ref().ptr()) {}
  OwnedPyObject(OwnedPyObject&& other) noexcept;
  OwnedPyObject& operator=(OwnedPyObject&& other) noexcept;
  OwnedPyObject(const OwnedPyObject&) = delete;
  OwnedPyObject& operator=(const OwnedPyObject&) = delete;
  ~OwnedPyObject() {
    reset();
  }

  void reset() noexcept;
  // A new reference to the object, or None when empty. Must hold the GIL.
  py::object get() const;
  explicit operator bool() const {
    return obj_ != nullptr;
  }

 private:
  PyObject* obj_ = nullptr;
};

// Refuses later calls from other threads and waits up to `timeout_s` seconds
// for those admitted. Returns whether they all returned. Called with the GIL
// held, on the thread that finalizes the interpreter.
bool beginExit(double timeout_s);

// Called in a child process made by fork(), with the GIL held, before it runs
// anything else. The calls the parent's threads had admitted are forgotten;
// with `refuse`, every later call that may throw (kernels, guard and hooks
// calls) raises it instead: the child of a backend that cannot run after a
// fork. Releases are still admitted. A refusal cannot be lifted.
void afterForkInChild(const std::optional<std::string>& refuse);

} // namespace torch::acc
