#include <torch/csrc/acc/Hooks.h>

#include <torch/csrc/acc/Generator.h>

#include <c10/core/impl/DeviceGuardImplInterface.h>
#if TORCH_ACC_GENERATOR_REGISTRY
#include <ATen/core/GeneratorForPrivateuseone.h>
#endif

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

c10::DeviceIndex Hooks::checkedIndex(c10::DeviceIndex device_index) const {
  if (device_index == -1) {
    return getCurrentDevice();
  }
  const auto count = deviceCount();
  TORCH_CHECK_VALUE(
      device_index >= 0 && device_index < count,
      "expected a device index in [0, ",
      static_cast<int>(count),
      ") for ",
      c10::get_privateuse1_backend(),
      ", but got ",
      static_cast<int>(device_index));
  return device_index;
}

at::Generator Hooks::getNewGenerator(c10::DeviceIndex device_index) const {
  TORCH_CHECK_NOT_IMPLEMENTED(
      py_.has(kGetNewGenerator),
      "the ",
      c10::get_privateuse1_backend(),
      " backend has no random number generator: its hooks (",
      py_.owner(),
      ") define no get_new_generator(device_index)");
  const auto index = checkedIndex(device_index);
  py::gil_scoped_acquire gil;
  py::object generator = py_.call(kGetNewGenerator, static_cast<int>(index));
  return at::make_generator<PythonGeneratorImpl>(
      index, generator, py_.owner() + ".get_new_generator");
}

const at::Generator& Hooks::getDefaultGenerator(
    c10::DeviceIndex device_index) const {
  const auto index = checkedIndex(device_index);
  {
    std::lock_guard<std::mutex> lock(generators_mutex_);
    auto it = default_generators_.find(index);
    if (it != default_generators_.end()) {
      return it->second;
    }
  }
  // Made without the lock (Python may let other threads run meanwhile); the
  // first one stored wins.
  at::Generator generator = getNewGenerator(index);
  std::lock_guard<std::mutex> lock(generators_mutex_);
  return default_generators_.emplace(index, std::move(generator)).first->second;
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
#if TORCH_ACC_GENERATOR_REGISTRY
  static at::_GeneratorRegister generators([](c10::DeviceIndex index) {
    return at::detail::getPrivateUse1Hooks().getNewGenerator(index);
  });
#endif
  return true;
}

} // namespace torch::acc
