#include <torch/csrc/acc/DeviceGuard.h>

#include <torch/csrc/Device.h>

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

c10::DeviceType DeviceGuardImpl::type() const {
  return kPrivateUse1;
}

void DeviceGuardImpl::checkIndex(c10::Device d) const {
  TORCH_CHECK(
      d.type() == kPrivateUse1,
      "expected a ",
      c10::DeviceTypeName(kPrivateUse1, /*lower_case=*/true),
      " device, but got ",
      d);
  const auto count = deviceCount();
  TORCH_CHECK(
      d.index() >= 0 && d.index() < count,
      "expected a device index in [0, ",
      static_cast<int>(count),
      ") for ",
      c10::DeviceTypeName(kPrivateUse1, /*lower_case=*/true),
      ", but got ",
      static_cast<int>(d.index()));
}

c10::Device DeviceGuardImpl::exchangeDevice(c10::Device d) const {
  checkIndex(d);
  if (py_.has(kExchangeDevice)) {
    const auto old = py_.callAs<int64_t>(
        kExchangeDevice, "an int device index", static_cast<int>(d.index()));
    current_device = d.index();
    return c10::Device(kPrivateUse1, static_cast<c10::DeviceIndex>(old));
  }
  const c10::Device old = getDevice();
  if (old != d) {
    setDevice(d);
  }
  return old;
}

c10::Device DeviceGuardImpl::getDevice() const {
  if (py_.has(kGetDevice)) {
    const auto index = py_.callAs<int64_t>(kGetDevice, "an int device index");
    return c10::Device(kPrivateUse1, static_cast<c10::DeviceIndex>(index));
  }
  return c10::Device(kPrivateUse1, current_device);
}

void DeviceGuardImpl::setDevice(c10::Device d) const {
  checkIndex(d);
  if (py_.has(kSetDevice)) {
    py_.call(kSetDevice, static_cast<int>(d.index()));
  }
  current_device = d.index();
}

void DeviceGuardImpl::uncheckedSetDevice(c10::Device d) const noexcept {
  try {
    setDevice(d);
  } catch (const std::exception& e) {
    // The interface forbids throwing here (guards call it from destructors);
    // a backend that fails to switch devices is reported, not hidden.
    TORCH_WARN("failed to set the current device to ", d, ": ", e.what());
  }
}

template <typename Arg>
c10::Stream DeviceGuardImpl::pythonStream(
    Method method,
    const Arg& arg,
    c10::Stream fallback) const TORCH_ACC_STREAM_NOEXCEPT {
  if constexpr (TORCH_ACC_STREAM_QUERIES_NOEXCEPT) {
    try {
      return py_.callAs<c10::Stream>(method, "a torch.Stream", arg);
    } catch (const std::exception& e) {
      TORCH_WARN(e.what(), " (using ", fallback, " instead)");
      return fallback;
    }
  } else {
    return py_.callAs<c10::Stream>(method, "a torch.Stream", arg);
  }
}

c10::Stream DeviceGuardImpl::getStream(c10::Device d) const
    TORCH_ACC_STREAM_NOEXCEPT {
  const auto current =
      c10::Stream::unpack3(currentStreamId(d.index()), d.index(), kPrivateUse1);
  return py_.has(kGetStream) ? pythonStream(kGetStream, d, current) : current;
}

c10::Device DeviceGuardImpl::withIndex(c10::Device d) const {
  return d.has_index() ? d : getDevice();
}

c10::Stream DeviceGuardImpl::getDefaultStream(c10::Device device) const {
  const auto d = withIndex(device);
  if (py_.has(kGetDefaultStream)) {
    return py_.callAs<c10::Stream>(kGetDefaultStream, "a torch.Stream", d);
  }
  return defaultStream(d.index());
}

c10::Stream DeviceGuardImpl::getStreamFromGlobalPool(
    c10::Device device,
    bool isHighPriority) const {
  const auto d = withIndex(device);
  if (py_.has(kGetStreamFromGlobalPool)) {
    return py_.callAs<c10::Stream>(
        kGetStreamFromGlobalPool, "a torch.Stream", d, isHighPriority);
  }
  return defaultStream(d.index());
}

c10::Stream DeviceGuardImpl::getNewStream(c10::Device device, int priority)
    const {
  const auto d = withIndex(device);
  if (py_.has(kGetNewStream)) {
    return py_.callAs<c10::Stream>(
        kGetNewStream, "a torch.Stream", d, priority);
  }
  return defaultStream(d.index());
}

c10::Stream DeviceGuardImpl::exchangeStream(c10::Stream s) const
    TORCH_ACC_STREAM_NOEXCEPT {
  auto& id = currentStreamId(s.device_index());
  const auto old = c10::Stream::unpack3(id, s.device_index(), kPrivateUse1);
  id = s.id();
  return py_.has(kExchangeStream) ? pythonStream(kExchangeStream, s, old) : old;
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
    } catch (const std::exception& e) {
      TORCH_WARN(e.what());
    }
  }
  Py_DECREF(eventObject(event));
}

void DeviceGuardImpl::record(
    void** event,
    const c10::Stream& stream,
    const c10::DeviceIndex device_index,
    const c10::EventFlag flag) const {
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
  // An event that was never recorded has nothing to wait for (as in CUDA).
  if (event == nullptr || !py_.has(kBlockEvent)) {
    return;
  }
  const GilForCall gil;
  py_.call(kBlockEvent, py::handle(eventObject(event)), stream);
}

bool DeviceGuardImpl::queryEvent(void* event) const {
  if (event == nullptr || !py_.has(kQueryEvent)) {
    return true;
  }
  const GilForCall gil;
  return py_.cast<bool>(
      kQueryEvent,
      py_.call(kQueryEvent, py::handle(eventObject(event))),
      "a bool");
}

c10::DeviceIndex DeviceGuardImpl::deviceCount() const noexcept {
  if (!py_.has(kDeviceCount)) {
    return 1;
  }
  try {
    const auto count = py_.callAs<int64_t>(kDeviceCount, "an int");
    TORCH_CHECK(
        count >= 0 && count <= std::numeric_limits<c10::DeviceIndex>::max(),
        "expected ",
        py_.owner(),
        ".device_count() to return a count in [0, ",
        static_cast<int>(std::numeric_limits<c10::DeviceIndex>::max()),
        "], but got ",
        count);
    return static_cast<c10::DeviceIndex>(count);
  } catch (const std::exception& e) {
    // deviceCount() is noexcept: callers such as the autograd engine cannot
    // handle an error. Report it and count no devices.
    TORCH_WARN(e.what());
    return 0;
  }
}

bool DeviceGuardImpl::queryStream(const c10::Stream& stream) const {
  if (!py_.has(kQueryStream)) {
    return true;
  }
  return py_.callAs<bool>(kQueryStream, "a bool", stream);
}

void DeviceGuardImpl::synchronizeStream(const c10::Stream& stream) const {
  if (py_.has(kSynchronizeStream)) {
    py_.call(kSynchronizeStream, stream);
  }
}

void DeviceGuardImpl::synchronizeEvent(void* event) const {
  if (event == nullptr || !py_.has(kSynchronizeEvent)) {
    return;
  }
  const GilForCall gil;
  py_.call(kSynchronizeEvent, py::handle(eventObject(event)));
}

void DeviceGuardImpl::synchronizeDevice(
    const c10::DeviceIndex device_index) const {
  if (py_.has(kSynchronizeDevice)) {
    py_.call(kSynchronizeDevice, static_cast<int>(device_index));
  }
}

double DeviceGuardImpl::elapsedTime(
    void* event1,
    void* event2,
    const c10::DeviceIndex device_index) const {
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
