#include <torch/csrc/acc/DeviceGuard.h>

#include <torch/csrc/Device.h>

#include <limits>
#include <optional>
#include <sstream>
#include <vector>

namespace torch::acc {

namespace {

constexpr auto kPrivateUse1 = c10::DeviceType::PrivateUse1;

// Per-thread state of the defaults: the current device, and the current
// stream of each device (absent: the default stream).
thread_local c10::DeviceIndex current_device = 0;
thread_local std::vector<c10::StreamId> current_streams;

c10::StreamId& currentStreamId(c10::DeviceIndex index) {
  if (current_streams.size() <= static_cast<size_t>(index)) {
    current_streams.resize(index + 1, c10::StreamId{0});
  }
  return current_streams[index];
}

c10::Stream defaultStream(c10::DeviceIndex index) {
  return c10::Stream(c10::Stream::DEFAULT, c10::Device(kPrivateUse1, index));
}

// The error kept for the calling thread by keepError().
struct KeptError {
  enum class Kind { kError, kType, kValue } kind;
  std::string message;
};
thread_local std::optional<KeptError> kept_error;

std::string backendName() {
  return c10::get_privateuse1_backend();
}

// A Python event handle is a strong reference to whatever the backend's
// create_event() returned (None when it has no create_event()).
PyObject* eventObject(void* event) {
  return static_cast<PyObject*>(event);
}

} // namespace

DeviceGuardImpl::DeviceGuardImpl(py::handle guard)
    : py_(guard,
          kMethods,
          py::str(py::type::handle_of(guard).attr("__qualname__"))
              .cast<std::string>()) {
  py::object type = guard.attr("type_")();
  TORCH_CHECK_VALUE(
      py::isinstance<c10::DeviceType>(type) &&
          type.cast<c10::DeviceType>() == kPrivateUse1,
      "expected ",
      py_.owner(),
      ".type_() to return torch._C._autograd.DeviceType.PrivateUse1, but got ",
      py::repr(type).cast<std::string>());
}

void keepError(const std::string& call, const std::string& instead) noexcept {
  if (kept_error) {
    return;
  }
  try {
    try {
      throw;
    } catch (const c10::TypeError& e) {
      kept_error = {KeptError::Kind::kType, e.what_without_backtrace()};
    } catch (const c10::ValueError& e) {
      kept_error = {KeptError::Kind::kValue, e.what_without_backtrace()};
    } catch (const c10::Error& e) {
      kept_error = {KeptError::Kind::kError, e.what_without_backtrace()};
    } catch (const std::exception& e) {
      kept_error = {KeptError::Kind::kError, e.what()};
    }
    kept_error->message = "the " + backendName() + " device guard's " + call +
        " failed where no error can propagate, and " + instead + ": " +
        kept_error->message;
  } catch (...) {
    // Out of memory while keeping it: there is nothing better left to do.
  }
}

void raisePendingError() {
  if (!kept_error) {
    return;
  }
  const KeptError error = std::move(*kept_error);
  kept_error.reset();
  switch (error.kind) {
    case KeptError::Kind::kType:
      TORCH_CHECK_TYPE(false, error.message);
    case KeptError::Kind::kValue:
      TORCH_CHECK_VALUE(false, error.message);
    case KeptError::Kind::kError:
      break;
  }
  TORCH_CHECK(false, error.message);
}

namespace {

// `index` as a device index of a backend with `count` devices; a clear error
// where it names none.
c10::DeviceIndex inRange(int64_t index, c10::DeviceIndex count) {
  TORCH_CHECK_VALUE(
      index >= 0 && index < count,
      "expected a device index in [0, ",
      static_cast<int>(count),
      ") for ",
      backendName(),
      ", but got ",
      index);
  return static_cast<c10::DeviceIndex>(index);
}

} // namespace

c10::DeviceIndex checkDeviceIndex(int64_t index) {
  raisePendingError();
  const auto* impl =
      c10::impl::device_guard_impl_registry[static_cast<size_t>(kPrivateUse1)]
          .load();
  TORCH_CHECK(
      impl != nullptr,
      "expected a device guard for ",
      backendName(),
      ", but it has none: set up a backend first");
  if (const auto* ours = dynamic_cast<const DeviceGuardImpl*>(impl)) {
    return ours->checkedIndex(index);
  }
  const auto count = impl->deviceCount();
  return inRange(index, count);
}

c10::DeviceType DeviceGuardImpl::type() const {
  return kPrivateUse1;
}

void DeviceGuardImpl::checkIndex(c10::Device d) const {
  TORCH_CHECK(
      d.type() == kPrivateUse1,
      "expected a ",
      backendName(),
      " device, but got ",
      d);
  checkedIndex(d.index());
}

c10::DeviceIndex DeviceGuardImpl::checkedIndex(int64_t index) const {
  std::string why_none;
  c10::DeviceIndex count = 0;
  try {
    count = checkedDeviceCount();
  } catch (const c10::Error& e) {
    why_none = e.what_without_backtrace();
  }
  TORCH_CHECK_VALUE(
      why_none.empty(),
      "expected a device index for ",
      backendName(),
      ", but it has no devices: ",
      why_none);
  return inRange(index, count);
}

c10::DeviceIndex DeviceGuardImpl::answeredIndex(Method method, int64_t index)
    const {
  const auto count = checkedDeviceCount();
  TORCH_CHECK_VALUE(
      index >= 0 && index < count,
      "expected ",
      py_.owner(),
      ".",
      py_.name(method),
      "() to return a device index in [0, ",
      static_cast<int>(count),
      ") (its device_count()), but got ",
      index);
  return static_cast<c10::DeviceIndex>(index);
}

void DeviceGuardImpl::checkStream(
    Method method,
    const c10::Stream& stream,
    c10::Device d) const {
  TORCH_CHECK_VALUE(
      stream.device() == d,
      "expected ",
      py_.owner(),
      ".",
      py_.name(method),
      "() to return a stream of ",
      d,
      ", but got a stream of ",
      stream.device());
}

bool DeviceGuardImpl::boolAnswer(Method method, const py::object& result)
    const {
  TORCH_CHECK_TYPE(
      PyBool_Check(result.ptr()),
      "expected ",
      py_.owner(),
      ".",
      py_.name(method),
      "() to return a bool, but got ",
      py::str(py::type::handle_of(result)).cast<std::string>());
  return result.ptr() == Py_True;
}

c10::Device DeviceGuardImpl::exchangeDevice(c10::Device d) const {
  raisePendingError();
  checkIndex(d);
  if (py_.has(kExchangeDevice)) {
    const auto old = answeredIndex(
        kExchangeDevice,
        py_.callAs<int64_t>(
            kExchangeDevice,
            "an int device index",
            static_cast<int>(d.index())));
    current_device = d.index();
    return c10::Device(kPrivateUse1, old);
  }
  const c10::Device old = getDevice();
  if (old != d) {
    applyDevice(d);
  }
  return old;
}

c10::Device DeviceGuardImpl::getDevice() const {
  raisePendingError();
  if (py_.has(kGetDevice)) {
    return c10::Device(
        kPrivateUse1,
        answeredIndex(
            kGetDevice,
            py_.callAs<int64_t>(kGetDevice, "an int device index")));
  }
  // The current device was checked when it was set; a device count that
  // became wrong since is an error at the point of use.
  checkedIndex(current_device);
  return c10::Device(kPrivateUse1, current_device);
}

void DeviceGuardImpl::setDeviceOrThrow(c10::Device d) const {
  raisePendingError();
  applyDevice(d);
}

void DeviceGuardImpl::applyDevice(c10::Device d) const {
  checkIndex(d);
  if (py_.has(kSetDevice)) {
    py_.call(kSetDevice, static_cast<int>(d.index()));
  }
  current_device = d.index();
}

void DeviceGuardImpl::setDevice(c10::Device d) const {
  if (PyGILState_Check() != 0) {
    // Called from Python, which takes the error.
    setDeviceOrThrow(d);
    return;
  }
  // Possibly the autograd engine starting a device thread, which cannot take
  // an error (it would terminate the process): kept for the next call that
  // can raise it, on this thread.
  try {
    applyDevice(d);
  } catch (const std::exception&) {
    keepError(
        "set_device(" + std::to_string(d.index()) + ")",
        "the current device was left as it was");
  }
}

void DeviceGuardImpl::uncheckedSetDevice(c10::Device d) const noexcept {
  // The interface forbids throwing here (guards call it from destructors).
  try {
    applyDevice(d);
  } catch (const std::exception&) {
    keepError(
        "set_device(" + std::to_string(d.index()) + ")",
        "the current device was left as it was");
  }
}

template <typename Arg>
c10::Stream DeviceGuardImpl::pythonStream(
    Method method,
    const Arg& arg,
    c10::Device d,
    c10::Stream fallback) const noexcept {
  try {
    const auto stream = py_.callAs<c10::Stream>(method, "a torch.Stream", arg);
    checkStream(method, stream, d);
    return stream;
  } catch (const std::exception&) {
    std::ostringstream call;
    call << py_.name(method) << "(" << arg << ")";
    std::ostringstream instead;
    instead << fallback << " was used instead";
    keepError(call.str(), instead.str());
    return fallback;
  }
}

bool DeviceGuardImpl::streamDeviceValid(c10::Device d) const
    TORCH_ACC_STREAM_NOEXCEPT {
  std::optional<c10::DeviceIndex> count;
  try {
    count = checkedDeviceCount();
  } catch (const std::exception&) {
    std::ostringstream call;
    call << "device_count() (for a stream of " << d << ")";
    keepError(call.str(), "the default stream was used instead");
    return false;
  }
  if (d.type() == kPrivateUse1 && d.index() >= 0 && d.index() < *count) {
    return true;
  }
  if constexpr (TORCH_ACC_STREAM_QUERIES_NOEXCEPT) {
    try {
      checkIndex(d);
    } catch (const std::exception&) {
      std::ostringstream call;
      call << "stream query for " << d;
      keepError(call.str(), "the default stream was used instead");
    }
    return false;
  } else {
    checkIndex(d);
    return false;
  }
}

c10::Stream DeviceGuardImpl::getStream(c10::Device d) const
    TORCH_ACC_STREAM_NOEXCEPT {
  if (!streamDeviceValid(d)) {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  const auto current =
      c10::Stream::unpack3(currentStreamId(d.index()), d.index(), kPrivateUse1);
  return py_.has(kGetStream) ? pythonStream(kGetStream, d, d, current)
                             : current;
}

c10::Device DeviceGuardImpl::withIndex(c10::Device d) const {
  raisePendingError();
  if (!d.has_index()) {
    return getDevice();
  }
  checkIndex(d);
  return d;
}

c10::Stream DeviceGuardImpl::getDefaultStream(c10::Device device) const {
  const auto d = withIndex(device);
  if (py_.has(kGetDefaultStream)) {
    const auto stream =
        py_.callAs<c10::Stream>(kGetDefaultStream, "a torch.Stream", d);
    checkStream(kGetDefaultStream, stream, d);
    return stream;
  }
  return defaultStream(d.index());
}

c10::Stream DeviceGuardImpl::getStreamFromGlobalPool(
    c10::Device device,
    bool isHighPriority) const {
  const auto d = withIndex(device);
  if (py_.has(kGetStreamFromGlobalPool)) {
    const auto stream = py_.callAs<c10::Stream>(
        kGetStreamFromGlobalPool, "a torch.Stream", d, isHighPriority);
    checkStream(kGetStreamFromGlobalPool, stream, d);
    return stream;
  }
  return defaultStream(d.index());
}

c10::Stream DeviceGuardImpl::getNewStream(c10::Device device, int priority)
    const {
  const auto d = withIndex(device);
  if (py_.has(kGetNewStream)) {
    const auto stream =
        py_.callAs<c10::Stream>(kGetNewStream, "a torch.Stream", d, priority);
    checkStream(kGetNewStream, stream, d);
    return stream;
  }
  return defaultStream(d.index());
}

c10::Stream DeviceGuardImpl::exchangeStream(c10::Stream s) const
    TORCH_ACC_STREAM_NOEXCEPT {
  if (!streamDeviceValid(s.device())) {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  auto& id = currentStreamId(s.device_index());
  const auto old = c10::Stream::unpack3(id, s.device_index(), kPrivateUse1);
  id = s.id();
  return py_.has(kExchangeStream)
      ? pythonStream(kExchangeStream, s, s.device(), old)
      : old;
}

void DeviceGuardImpl::destroyEvent(
    void* event,
    const c10::DeviceIndex device_index) const noexcept {
  // Events may outlive the interpreter (a c10::Event in a static), or die on
  // an autograd device thread while it exits; then the reference is leaked
  // rather than released without a Python to release it (see Shutdown.h).
  if (event == nullptr) {
    return;
  }
  const GilForRelease gil;
  if (!gil.active()) {
    return;
  }
  if (py_.has(kDestroyEvent)) {
    try {
      py_.call(kDestroyEvent, py::handle(eventObject(event)), device_index);
    } catch (const std::exception&) {
      keepError("destroy_event()", "the event was released anyway");
    }
  }
  Py_DECREF(eventObject(event));
}

void DeviceGuardImpl::record(
    void** event,
    const c10::Stream& stream,
    const c10::DeviceIndex device_index,
    const c10::EventFlag flag) const {
  raisePendingError();
  checkIndex(stream.device());
  TORCH_CHECK(
      device_index == -1 || device_index == stream.device_index(),
      "expected an event on device ",
      static_cast<int>(stream.device_index()),
      " (the stream's), but got an event on device ",
      static_cast<int>(device_index));
  if (!py_.has(kRecordEvent)) {
    // See the class comment: the autograd engine records events, and on a
    // synchronous backend a recorded event is complete at once.
    return;
  }
  const GilForCall gil;
  if (*event == nullptr) {
    py::object created = py_.has(kCreateEvent)
        ? py_.call(kCreateEvent, stream.device_index(), static_cast<int>(flag))
        : py::none();
    *event = created.release().ptr();
  }
  py_.call(kRecordEvent, py::handle(eventObject(*event)), stream);
}

void DeviceGuardImpl::block(void* event, const c10::Stream& stream) const {
  raisePendingError();
  // An event that was never recorded has nothing to wait for (as in CUDA).
  if (event == nullptr || !py_.has(kBlockEvent)) {
    return;
  }
  const GilForCall gil;
  py_.call(kBlockEvent, py::handle(eventObject(event)), stream);
}

bool DeviceGuardImpl::queryEvent(void* event) const {
  raisePendingError();
  if (event == nullptr || !py_.has(kQueryEvent)) {
    return true;
  }
  const GilForCall gil;
  return boolAnswer(
      kQueryEvent, py_.call(kQueryEvent, py::handle(eventObject(event))));
}

c10::DeviceIndex DeviceGuardImpl::checkedDeviceCount() const {
  if (!py_.has(kDeviceCount)) {
    return 1;
  }
  const auto count = py_.callAs<int64_t>(kDeviceCount, "an int");
  TORCH_CHECK_VALUE(
      count >= 0 && count <= std::numeric_limits<c10::DeviceIndex>::max(),
      "expected ",
      py_.owner(),
      ".device_count() to return a count in [0, ",
      static_cast<int>(std::numeric_limits<c10::DeviceIndex>::max()),
      "], but got ",
      count);
  return static_cast<c10::DeviceIndex>(count);
}

c10::DeviceIndex DeviceGuardImpl::deviceCount() const noexcept {
  try {
    return checkedDeviceCount();
  } catch (const std::exception& e) {
    // deviceCount() is noexcept: callers such as the autograd engine cannot
    // handle an error. No devices, then, and every use of a device raises
    // the error (checkedIndex()).
    TORCH_WARN(e.what());
    return 0;
  }
}

bool DeviceGuardImpl::queryStream(const c10::Stream& stream) const {
  raisePendingError();
  checkIndex(stream.device());
  if (!py_.has(kQueryStream)) {
    return true;
  }
  const GilForCall gil;
  return boolAnswer(kQueryStream, py_.call(kQueryStream, stream));
}

void DeviceGuardImpl::synchronizeStream(const c10::Stream& stream) const {
  raisePendingError();
  checkIndex(stream.device());
  if (py_.has(kSynchronizeStream)) {
    py_.call(kSynchronizeStream, stream);
  }
}

void DeviceGuardImpl::synchronizeEvent(void* event) const {
  raisePendingError();
  if (event == nullptr || !py_.has(kSynchronizeEvent)) {
    return;
  }
  const GilForCall gil;
  py_.call(kSynchronizeEvent, py::handle(eventObject(event)));
}

void DeviceGuardImpl::synchronizeDevice(
    const c10::DeviceIndex device_index) const {
  raisePendingError();
  checkedIndex(device_index);
  if (py_.has(kSynchronizeDevice)) {
    py_.call(kSynchronizeDevice, static_cast<int>(device_index));
  }
}

double DeviceGuardImpl::elapsedTime(
    void* event1,
    void* event2,
    const c10::DeviceIndex device_index) const {
  raisePendingError();
  TORCH_CHECK(
      py_.has(kElapsedTime),
      c10::get_privateuse1_backend(),
      " device guard ",
      py_.owner(),
      " cannot time events: define elapsed_time(start, end, device_index) "
      "on it");
  TORCH_CHECK(
      event1 != nullptr && event2 != nullptr,
      "expected both events to be recorded before elapsed_time()");
  const GilForCall gil;
  return py_.cast<double>(
      kElapsedTime,
      py_.call(
          kElapsedTime,
          py::handle(eventObject(event1)),
          py::handle(eventObject(event2)),
          static_cast<int>(device_index)),
      "a float");
}

bool registerDeviceGuard(py::handle guard) {
  auto& slot =
      c10::impl::device_guard_impl_registry[static_cast<size_t>(kPrivateUse1)];
  if (slot.load() != nullptr) {
    return false;
  }
  // Lives for the rest of the process, like every registered device guard:
  // the registry is non-owning and is read until exit.
  auto* impl = new DeviceGuardImpl(guard);
  const c10::impl::DeviceGuardImplInterface* expected = nullptr;
  if (!slot.compare_exchange_strong(expected, impl)) {
    delete impl;
    return false;
  }
  return true;
}

bool hasPythonDeviceGuard() {
  return dynamic_cast<const DeviceGuardImpl*>(
             c10::impl::device_guard_impl_registry[static_cast<size_t>(
                                                       kPrivateUse1)]
                 .load()) != nullptr;
}

} // namespace torch::acc
