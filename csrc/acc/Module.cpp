#include <torch/csrc/acc/Module.h>

#include <torch/csrc/acc/DeviceGuard.h>
#include <torch/csrc/acc/EmptyTensor.h>
#include <torch/csrc/acc/Hooks.h>
#include <torch/csrc/acc/PayloadTensor.h>
#include <torch/csrc/PyInterpreter.h>
#include <torch/csrc/utils/pybind.h>

namespace torch::acc {

namespace {

// Checks the type of an object passed for registration, so that a wrong one
// is a TypeError naming the expected base class (not pybind11's generic
// "incompatible function arguments").
template <typename Base>
void checkInstance(py::handle obj, const char* base, const char* function) {
  if (!py::isinstance<Base>(obj)) {
    throw py::type_error(
        std::string("expected ") + function + "() to get an instance of a " +
        "subclass of " + base + ", but got " +
        py::str(py::type::handle_of(obj).attr("__qualname__"))
            .cast<std::string>());
  }
}

const c10::impl::DeviceGuardImplInterface& privateUse1Guard() {
  return *c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
}

} // namespace

void initBindings(PyObject* module) {
  auto m = py::handle(module).cast<py::module_>();

  // module_local: torch >= 2.10 ships its own torch._C._acc with classes of
  // the same names; ours must not collide with them in pybind11's registry.
  py::class_<PythonDeviceGuard>(m, "DeviceGuard", py::module_local())
      .def(py::init<>())
      .def("type_", [](const PythonDeviceGuard&) {
        return c10::DeviceType::PrivateUse1;
      });

  py::class_<PythonHooks>(m, "PrivateUse1Hooks", py::module_local())
      .def(py::init<>());

  // Registered guards and hooks are never unregistered: c10 and ATen keep raw
  // pointers to them for the rest of the process, so the Python objects they
  // forward to stay alive until exit as well.
  m.def(
      "register_python_privateuseone_device_guard",
      [](py::object guard) {
        checkInstance<PythonDeviceGuard>(
            guard,
            "DeviceGuard",
            "register_python_privateuseone_device_guard");
        if (!registerDeviceGuard(guard)) {
          return false;
        }
        registerPayloadAllocator();
        return true;
      },
      py::arg("guard"),
      "Installs `guard` as the PrivateUse1 device guard. Returns False, and "
      "installs nothing, when one is already installed.");

  m.def(
      "register_python_privateuseone_hook",
      [](py::object hook) {
        checkInstance<PythonHooks>(
            hook, "PrivateUse1Hooks", "register_python_privateuseone_hook");
        return registerHooks(hook);
      },
      py::arg("hook"),
      "Installs `hook` as the PrivateUse1 hooks. Returns False, and installs "
      "nothing, when hooks are already installed.");

  m.def(
      "is_device_guard_registered",
      []() {
        return c10::impl::hasDeviceGuardImpl(c10::DeviceType::PrivateUse1);
      },
      "Whether PrivateUse1 has a device guard (from this module or any "
      "other extension).");

  m.def(
      "is_hook_registered",
      []() { return at::isPrivateUse1HooksRegistered(); },
      "Whether PrivateUse1 has hooks (from this module or any other "
      "extension).");

  // The device queries of the device module, answered by the guard so that
  // torch.<backend>, torch.accelerator and c10 agree.
  m.def(
      "device_count",
      []() { return static_cast<int>(privateUse1Guard().deviceCount()); },
      "Number of PrivateUse1 devices, as the device guard reports it.");
  m.def(
      "current_device",
      []() { return static_cast<int>(privateUse1Guard().getDevice().index()); },
      "Index of the current PrivateUse1 device of the calling thread.");
  m.def(
      "set_device",
      [](c10::DeviceIndex index) {
        privateUse1Guard().setDevice(
            c10::Device(c10::DeviceType::PrivateUse1, index));
      },
      py::arg("device_index"),
      "Makes `device_index` the current PrivateUse1 device of the calling "
      "thread.");
  m.def(
      "synchronize",
      [](c10::DeviceIndex index) {
        privateUse1Guard().synchronizeDevice(index);
      },
      py::arg("device_index"),
      py::call_guard<py::gil_scoped_release>(),
      "Waits for all work on PrivateUse1 device `device_index`.");

  m.def(
      "create_empty_tensor",
      [](std::vector<int64_t> shape,
         c10::ScalarType dtype,
         c10::DeviceIndex device_index) {
        return createEmptyTensor(shape, dtype, device_index);
      },
      py::arg("shape"),
      py::arg("dtype"),
      py::arg("device_index") = 0,
      "A PrivateUse1 tensor of the given shape and dtype that holds no data.");

  m.def(
      "payload",
      [](const at::Tensor& tensor) -> py::object {
        const auto& object = payloadImpl(tensor).slot()->object;
        if (!object.has_value()) {
          return py::none();
        }
        return py::reinterpret_borrow<py::object>(
            object->ptr(getPyInterpreter()));
      },
      py::arg("tensor"),
      "The device data of a payload tensor (None when none is set).");

  m.def(
      "set_payload",
      [](const at::Tensor& tensor, const py::object& payload) {
        auto& object = payloadImpl(tensor).slot()->object;
        object.reset();
        if (!payload.is_none()) {
          object.emplace(payload.inc_ref().ptr(), getPyInterpreter());
        }
      },
      py::arg("tensor"),
      py::arg("payload"),
      "Sets the device data of a payload tensor, for it and every tensor "
      "sharing its payload (its detached copies).");
}

void initModule(PyObject* module) {
  auto acc = py::handle(module).cast<py::module_>().def_submodule(
      "_acc", "Python-defined PrivateUse1 backends");
  initBindings(acc.ptr());
}

} // namespace torch::acc
