#include <torch/csrc/acc/Shutdown.h>

#include <c10/util/Exception.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <thread>

namespace torch::acc {

namespace {
std::atomic<bool> exiting{false};
std::atomic<std::thread::id> exit_thread{};
std::atomic<int64_t> in_flight{0};
std::atomic<int64_t> refused{0};
} // namespace

PythonCallGate::PythonCallGate() {
  // Counted before the check: beginExit() sets the flag, then waits for the
  // count, so a call either sees the flag or is waited for.
  in_flight.fetch_add(1);
  if (exiting.load() && std::this_thread::get_id() != exit_thread.load()) {
    in_flight.fetch_sub(1);
    refused.fetch_add(1);
    TORCH_CHECK(
        false,
        "the Python interpreter is exiting: a kernel of the ",
        c10::get_privateuse1_backend(),
        " backend cannot start on another thread (an autograd device thread) "
        "any more");
  }
}

PythonCallGate::~PythonCallGate() {
  in_flight.fetch_sub(1);
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
  // A thread whose call was refused unwinds and releases what its task held
  // (payloads too, which takes the GIL), and the Python thread waiting for its
  // backward pass raises: let them, before finalization starts, until no call
  // has been refused for kQuiet (a task's next kernel call is refused too).
  constexpr auto kQuiet = std::chrono::milliseconds(200);
  auto seen = refused.load();
  auto quiet_since = std::chrono::steady_clock::now();
  while (seen != 0) {
    const auto now = std::chrono::steady_clock::now();
    if (now - quiet_since >= kQuiet || now > deadline) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (const auto latest = refused.load(); latest != seen) {
      seen = latest;
      quiet_since = std::chrono::steady_clock::now();
    }
  }
  return true;
}

} // namespace torch::acc
