#include <torch/csrc/acc/Hooks.h>

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <mutex>

namespace torch::acc {

namespace {

constexpr auto kPrivateUse1 = c10::DeviceType::PrivateUse1;

const c10::impl::DeviceGuardImplInterface& guard() {
  const auto* impl = c10::impl::getDeviceGuardImpl(kPrivateUse1);
  return *impl;
}

} // namespace

Hooks::Hooks(py::handle hooks)
    : py_(hooks,
          kMethods,
          py::str(py::type::handle_of(hooks).attr("__qualname__"))
              .cast<std::string>()) {}

#if TORCH_ACC_HOOKS_HAVE_AVAILABILITY
// The interface says these never throw; a backend whose check fails is not
// available (and says why).
bool Hooks::isBuilt() const {
  try {
    return !py_.has(kIsBuilt) || py_.callAs<bool>(kIsBuilt, "a bool");
  } catch (const std::exception& e) {
    TORCH_WARN(e.what());
    return false;
  }
}

bool Hooks::isAvailable() const {
  try {
    return !py_.has(kIsAvailable) || py_.callAs<bool>(kIsAvailable, "a bool");
  } catch (const std::exception& e) {
    TORCH_WARN(e.what());
    return false;
  }
}
#endif

bool Hooks::hasPrimaryContext(c10::DeviceIndex device_index) const {
  return !py_.has(kHasPrimaryContext) ||
      py_.callAs<bool>(
          kHasPrimaryContext, "a bool", static_cast<int>(device_index));
}

void Hooks::init() const {
  if (py_.has(kInit)) {
    py_.call(kInit);
  }
}

c10::DeviceIndex Hooks::deviceCount() const {
  return guard().deviceCount();
}

void Hooks::setCurrentDevice(c10::DeviceIndex device) const {
  guard().setDevice(c10::Device(kPrivateUse1, device));
}

c10::DeviceIndex Hooks::getCurrentDevice() const {
  return guard().getDevice().index();
}

c10::DeviceIndex Hooks::exchangeDevice(c10::DeviceIndex device) const {
  return guard().exchangeDevice(c10::Device(kPrivateUse1, device)).index();
}

c10::DeviceIndex Hooks::maybeExchangeDevice(c10::DeviceIndex device) const {
  return exchangeDevice(device);
}

bool Hooks::isPinnedPtr(const void* data) const {
  return py_.has(kIsPinnedPtr) &&
      py_.callAs<bool>(
          kIsPinnedPtr, "a bool", reinterpret_cast<uintptr_t>(data));
}

bool registerHooks(py::handle hooks) {
  // at::RegisterPrivateUse1HooksInterface() fails on a second registration;
  // the lock makes check-then-register atomic among this module's callers.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (at::isPrivateUse1HooksRegistered()) {
    return false;
  }
  // Lives for the rest of the process: at:: keeps a raw pointer to it.
  at::RegisterPrivateUse1HooksInterface(new Hooks(hooks));
  return true;
}

} // namespace torch::acc
