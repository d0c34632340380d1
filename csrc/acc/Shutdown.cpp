#include <torch/csrc/acc/Shutdown.h>

#include <c10/util/Exception.h>

#include <chrono>
#include <string>
#include <thread>
#include <utility>

namespace torch::acc {

namespace {

std::atomic<bool> exiting{false};
std::atomic<std::thread::id> exit_thread{};
std::atomic<int64_t> in_flight{0};
// Set once in a forked child whose backend cannot run there (afterForkInChild);
// `refusal` is written before `refused` is set.
std::atomic<bool> refused{false};
std::string refusal;

// Counts the call before the check: beginExit() sets the flag, then waits for
// the count, so a call either sees the flag or is waited for.
bool enter() noexcept {
  in_flight.fetch_add(1);
  if (exiting.load() && std::this_thread::get_id() != exit_thread.load()) {
    in_flight.fetch_sub(1);
    return false;
  }
  return true;
}

} // namespace

PythonCallGate::PythonCallGate() : admitted_(enter()) {
  TORCH_CHECK(
      admitted_,
      "the Python interpreter is exiting: the ",
      c10::get_privateuse1_backend(),
      " backend can no longer call into Python on a thread other than the "
      "exiting one (such as an autograd device thread)");
  if (refused.load(std::memory_order_acquire)) {
    in_flight.fetch_sub(1);
    admitted_ = false;
    TORCH_CHECK(false, refusal);
  }
}

PythonCallGate::PythonCallGate(std::nothrow_t /*unused*/) noexcept
    : admitted_(enter()) {}

PythonCallGate::~PythonCallGate() {
  if (admitted_) {
    in_flight.fetch_sub(1);
  }
}

OwnedPyObject::OwnedPyObject(OwnedPyObject&& other) noexcept
    : obj_(std::exchange(other.obj_, nullptr)) {}

OwnedPyObject& OwnedPyObject::operator=(OwnedPyObject&& other) noexcept {
  if (this != &other) {
    reset();
    obj_ = std::exchange(other.obj_, nullptr);
  }
  return *this;
}

GilForRelease::GilForRelease() noexcept {
  if (gate_.admitted() && Py_IsInitialized()) {
    gil_.emplace();
    // A release may run while an exception unwinds through a frame holding
    // the object; the pending Python error must survive it.
    pending_.emplace();
  }
}

void OwnedPyObject::reset() noexcept {
  PyObject* obj = std::exchange(obj_, nullptr);
  if (obj == nullptr) {
    return;
  }
  const GilForRelease gil;
  if (gil.active()) {
    Py_DECREF(obj);
  }
}

py::object OwnedPyObject::get() const {
  return obj_ == nullptr ? py::none()
                         : py::reinterpret_borrow<py::object>(obj_);
}

void afterForkInChild(const std::optional<std::string>& refuse) {
  // The calls counted were made by threads of the parent, which the child does
  // not have: none of them will return here.
  in_flight.store(0);
  if (refuse.has_value() && !refused.load()) {
    refusal = *refuse;
    refused.store(true, std::memory_order_release);
  }
}

bool beginExit(double timeout_s) {
  exit_thread.store(std::this_thread::get_id());
  exiting.store(true);
  py::gil_scoped_release no_gil;
  const auto deadline = std::chrono::steady_clock::now() +
      std::chrono::duration<double>(timeout_s);
  while (in_flight.load() != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

} // namespace torch::acc
