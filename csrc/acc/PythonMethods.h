#pragma once

#include <torch/csrc/acc/Shutdown.h>
#include <torch/csrc/utils/pybind.h>

#include <array>
#include <string>

namespace torch::acc {

namespace py = pybind11;

// The methods a Python object chose to define, looked up once.
//
// A backend's Python guard or hooks object may define any subset of the
// methods C++ can forward to it. Looking them up once, when the object is
// registered, lets the C++ side answer "does Python define this?" without
// the GIL, so a default that needs no Python takes no GIL at all.
//
// The table holds strong references to the bound methods for the rest of the
// process: registered objects are never unregistered (see Module.cpp), and the
// references are deliberately never released so that nothing touches Python
// while the interpreter shuts down.
template <size_t N>
class PythonMethods {
 public:
  PythonMethods(
      py::handle obj,
      const std::array<const char*, N>& names,
      std::string owner)
      : names_(names), owner_(std::move(owner)) {
    for (size_t i = 0; i < N; ++i) {
      py::object attr = py::getattr(obj, names_[i], py::none());
      methods_[i] = attr.is_none() ? nullptr : attr.release().ptr();
    }
  }

  bool has(size_t method) const {
    return methods_[method] != nullptr;
  }

  // Calls a method that `has()` reported, with the GIL held. A Python
  // exception becomes a c10::Error naming the object and the method. A Python
  // error already pending is set aside for the call and restored after it:
  // guards call in while an exception unwinds (a stream or device guard's
  // destructor, after a hook raised), and a call with an error set would
  // clear or replace it.
  template <typename... Args>
  py::object call(size_t method, Args&&... args) const {
    const GilForCall gil;
    const py::error_scope pending;
    try {
      return py::handle(methods_[method])(std::forward<Args>(args)...);
    } catch (py::error_already_set& e) {
      TORCH_CHECK(false, owner_, ".", names_[method], "() raised ", e.what());
    }
  }

  // Converts the result of `call()`; a result of the wrong type is reported
  // with what was expected and what came back. Must hold the GIL. A pending
  // Python error is set aside, as in `call()`: pybind11's integer caster
  // clears the error indicator (the one of torch 2.14 does so even when it
  // converts).
  template <typename T>
  T cast(size_t method, const py::object& result, const char* expected) const {
    const py::error_scope pending;
    try {
      return result.cast<T>();
    } catch (py::cast_error&) {
      TORCH_CHECK_TYPE(
          false,
          "expected ",
          owner_,
          ".",
          names_[method],
          "() to return ",
          expected,
          ", but got ",
          py::str(py::type::handle_of(result)).cast<std::string>());
    }
  }

  // `call()` followed by `cast()`, under one GIL acquisition.
  template <typename T, typename... Args>
  T callAs(size_t method, const char* expected, Args&&... args) const {
    const GilForCall gil;
    return cast<T>(method, call(method, std::forward<Args>(args)...), expected);
  }

  const std::string& owner() const {
    return owner_;
  }

  const char* name(size_t method) const {
    return names_[method];
  }

 private:
  std::array<const char*, N> names_;
  std::array<PyObject*, N> methods_{};
  std::string owner_;
};

} // namespace torch::acc
