#include <torch/csrc/acc/Module.h>

#include <torch/csrc/Device.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/acc/Allocator.h>
#include <torch/csrc/acc/Autocast.h>
#include <torch/csrc/acc/Bridge.h>
#include <torch/csrc/acc/DeviceGuard.h>
#include <torch/csrc/acc/EmptyTensor.h>
#include <torch/csrc/acc/Hooks.h>
#include <torch/csrc/acc/Payload.h>
#include <torch/csrc/acc/PayloadTensor.h>
#include <torch/csrc/acc/Registration.h>
#include <torch/csrc/acc/Shutdown.h>
#include <torch/csrc/acc/Views.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/utils/python_numbers.h>
#include <torch/csrc/utils/python_strings.h>

#include <ATen/Context.h>
#include <ATen/ScalarOps.h>

#ifdef USE_DISTRIBUTED
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

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

// The index of the device `device` names: None for the current device, an
// int index, or a torch.device (or its string) of this backend. An index that
// names no device is an error.
c10::DeviceIndex deviceIndexOf(PyObject* device) {
  if (device == Py_None) {
    return privateUse1Guard().getDevice().index();
  }
  if (PyLong_Check(device)) {
    const auto index = PyLong_AsLongLong(device);
    if (index == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      TORCH_CHECK_VALUE(
          false,
          "expected a device index for ",
          c10::get_privateuse1_backend(),
          ", but got ",
          py::repr(device).cast<std::string>());
    }
    return checkDeviceIndex(index);
  }
  // Anything else is what torch.device() accepts (a rare path).
  py::object parsed = THPDevice_Check(device)
      ? py::reinterpret_borrow<py::object>(device)
      : py::module_::import("torch").attr("device")(py::handle(device));
  const auto d = reinterpret_cast<THPDevice*>(parsed.ptr())->device;
  TORCH_CHECK_VALUE(
      d.type() == c10::DeviceType::PrivateUse1,
      "expected a ",
      c10::get_privateuse1_backend(),
      " device, but got ",
      d);
  if (!d.has_index()) {
    return privateUse1Guard().getDevice().index();
  }
  return checkDeviceIndex(d.index());
}

const DeviceGuardImpl& pythonGuard() {
  const auto* guard = dynamic_cast<const DeviceGuardImpl*>(&privateUse1Guard());
  TORCH_CHECK(
      guard != nullptr,
      "expected ",
      c10::get_privateuse1_backend(),
      " to be a Python backend (its device guard one of torch_acc), but it is "
      "not");
  return *guard;
}

// wrap(payload, *, shape=None, dtype=None, device=None, strides=None), the
// public torch_acc.wrap. A plain CPython function rather than a pybind11
// binding: making a tensor around existing data should cost less than
// torch.empty(), and pybind11's argument matching alone costs a good part of
// that.
PyObject* pyWrap(
    PyObject* /*module*/,
    PyObject* const* args,
    Py_ssize_t nargs,
    PyObject* kwnames) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(
      nargs == 1,
      "wrap() takes 1 positional argument (the payload) but ",
      nargs,
      " were given");
  PyObject* shape = Py_None;
  PyObject* dtype = Py_None;
  PyObject* device = Py_None;
  PyObject* strides = Py_None;
  const auto nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, i);
    PyObject* value = args[nargs + i];
    if (PyUnicode_CompareWithASCIIString(name, "shape") == 0) {
      shape = value;
    } else if (PyUnicode_CompareWithASCIIString(name, "dtype") == 0) {
      dtype = value;
    } else if (PyUnicode_CompareWithASCIIString(name, "device") == 0) {
      device = value;
    } else if (PyUnicode_CompareWithASCIIString(name, "strides") == 0) {
      strides = value;
    } else {
      TORCH_CHECK_TYPE(
          false,
          "wrap() got an unexpected keyword argument '",
          THPUtils_unpackString(name),
          "'");
    }
  }
  std::optional<c10::DimVector> sizes;
  if (shape != Py_None) {
    sizes = toInts(shape, "shape");
  }
  std::optional<c10::DimVector> stride_values;
  if (strides != Py_None) {
    stride_values = toInts(strides, "strides");
  }
  return THPVariable_Wrap(wrap(
      args[0],
      deviceIndexOf(device),
      sizes ? std::optional<c10::IntArrayRef>(*sizes) : std::nullopt,
      dtype == Py_None ? std::nullopt
                       : std::optional<c10::ScalarType>(scalarTypeOf(dtype)),
      stride_values ? std::optional<c10::IntArrayRef>(*stride_values)
                    : std::nullopt));
  END_HANDLE_TH_ERRORS
}

// Functions bound without pybind11 (see pyWrap).
PyMethodDef methods[] = {
    {"wrap",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(pyWrap)),
     METH_FASTCALL | METH_KEYWORDS,
     // The first lines are the signature inspect.signature() reads.
     R"(wrap(payload, *, shape=None, dtype=None, device=None, strides=None)
--

A tensor on the Python backend's device whose data is ``payload``.

``shape`` and ``dtype`` default to ``payload.shape`` and ``payload.dtype`` (a NumPy or
torch dtype); ``strides`` (in elements) to ``payload.strides`` (in bytes, NumPy-style)
or contiguous. ``device`` (an index, or a device of this backend) defaults to the current
device. The result is a plain ``torch.Tensor``; storage access on it raises an error
suggesting ``.cpu()``.

Example::

    >>> # xdoctest: +SKIP
    >>> t = wrap(np.ones((2, 3), np.float32))
    >>> t.shape, t.dtype, type(t) is torch.Tensor
    (torch.Size([2, 3]), torch.float32, True)
)"},
    {nullptr, nullptr, 0, nullptr},
};

} // namespace

void initBindings(PyObject* module) {
  auto m = py::handle(module).cast<py::module_>();
  if (PyModule_AddFunctions(module, methods) != 0) {
    throw py::error_already_set();
  }

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
            guard, "DeviceGuard", "register_python_privateuseone_device_guard");
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
      "begin_exit",
      &beginExit,
      py::arg("timeout_s"),
      "Called at interpreter exit: other threads may no longer call into "
      "Python (kernels raise, payload releases leak); waits up to timeout_s "
      "seconds for the calls running. Returns whether they all returned (see "
      "csrc/acc/Shutdown.h).");

  m.def(
      "after_fork_in_child",
      &afterForkInChild,
      py::arg("refuse"),
      "Called in a forked child: forgets the calls of the parent's threads; "
      "with a message, every later call into the backend's Python raises it "
      "(see csrc/acc/Shutdown.h).");

  m.def(
      "is_python_backend",
      []() { return hasPythonDeviceGuard(); },
      "Whether PrivateUse1 holds a Python backend (its device guard is a "
      "DeviceGuard of this module).");

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
      "Number of PrivateUse1 devices, as the device guard reports it (0, "
      "with a warning, where its answer is not a count).");
  m.def(
      "current_device",
      []() { return static_cast<int>(privateUse1Guard().getDevice().index()); },
      "Index of the current PrivateUse1 device of the calling thread.");
  m.def(
      "device_index",
      [](const py::object& device) {
        return static_cast<int>(deviceIndexOf(device.ptr()));
      },
      py::arg("device"),
      "The index of the PrivateUse1 device `device` names (None: the current "
      "device; an int; a torch.device or its string); an error where it "
      "names no device.");
  m.def(
      "set_device",
      [](const py::object& device) {
        pythonGuard().setDeviceOrThrow(
            c10::Device(
                c10::DeviceType::PrivateUse1, deviceIndexOf(device.ptr())));
      },
      py::arg("device_index"),
      "Makes `device_index` the current PrivateUse1 device of the calling "
      "thread.");
  m.def(
      "synchronize",
      [](const py::object& device) {
        const auto index = deviceIndexOf(device.ptr());
        const py::gil_scoped_release no_gil;
        privateUse1Guard().synchronizeDevice(index);
      },
      py::arg("device_index"),
      "Waits for all work on PrivateUse1 device `device_index`.");

  m.def(
      "raise_pending_error",
      &raisePendingError,
      "Raises the error the device guard kept on this thread where it could "
      "not raise it (see csrc/acc/DeviceGuard.h), if any.");

  m.def(
      "default_generator",
      [](c10::DeviceIndex index) {
        return at::globalContext().defaultGenerator(
            c10::Device(c10::DeviceType::PrivateUse1, index));
      },
      py::arg("device_index"),
      "The default torch.Generator of PrivateUse1 device `device_index` (-1: "
      "the current device), made by the hooks' get_new_generator().");

  m.def(
      "register_autocast_kernels",
      &registerAutocastKernels,
      py::arg("ops"),
      py::arg("policy"),
      "Registers AutocastPrivateUse1 kernels with cast policy `policy` "
      "('lower_precision_fp', 'fp32' or 'promote') for the aten overloads "
      "`ops`; returns those this torch has.");

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
        if (!payloadImpl(tensor).slot()->object) {
          return py::none();
        }
        return materialize(tensor);
      },
      py::arg("tensor"),
      "The device data of a payload tensor as its kernels see it (None when "
      "none is set).");

  m.def(
      "materialize",
      &materialize,
      py::arg("tensor"),
      "The device data of a payload tensor as its kernels see it; an error "
      "that says why where it has none.");

  m.def(
      "set_payload",
      [](const at::Tensor& tensor, const py::object& payload) {
        bindPayload(tensor, payload);
      },
      py::arg("tensor"),
      py::arg("payload"),
      "Binds the device data of a payload tensor made without one (laid out "
      "as the tensor is), or replaces it as an in-place result replaces it.");

  m.def(
      "storage_token",
      [](const at::Tensor& tensor) -> py::object {
        return payloadImpl(tensor).slot()->storage_token.get();
      },
      py::arg("tensor"),
      "The object standing for the payload of `tensor` where a storage is "
      "expected (None until set).");

  m.def(
      "set_storage_token",
      [](const at::Tensor& tensor, const py::object& token) {
        payloadImpl(tensor).slot()->storage_token = OwnedPyObject(token);
      },
      py::arg("tensor"),
      py::arg("token"),
      "Sets the object standing for the payload of `tensor` where a storage "
      "is expected.");

  m.def(
      "whole_payload",
      [](const at::Tensor& tensor) -> py::object {
        const auto& slot = *payloadImpl(tensor).slot();
        if (!slot.object) {
          return py::none();
        }
        return py::make_tuple(
            slot.get(),
            std::vector<int64_t>(slot.sizes.begin(), slot.sizes.end()),
            std::vector<int64_t>(slot.strides.begin(), slot.strides.end()));
      },
      py::arg("tensor"),
      "(payload, sizes, strides): the payload that `tensor` and every alias "
      "and view of it read, with its layout in elements (None when none is "
      "set).");

  m.def(
      "replace_whole_payload",
      [](const at::Tensor& tensor,
         const py::object& payload,
         const std::vector<int64_t>& sizes,
         const std::vector<int64_t>& strides) {
        auto& slot = *payloadImpl(tensor).slot();
        TORCH_CHECK(
            static_cast<bool>(slot.object) &&
                c10::IntArrayRef(sizes).equals(slot.sizes) &&
                c10::IntArrayRef(strides).equals(slot.strides),
            "expected a payload laid out as the one it replaces (sizes ",
            c10::IntArrayRef(slot.sizes),
            ", strides ",
            c10::IntArrayRef(slot.strides),
            "), but got sizes ",
            c10::IntArrayRef(sizes),
            ", strides ",
            c10::IntArrayRef(strides));
        slot.bind(payload, sizes, strides, tensor.scalar_type());
      },
      py::arg("tensor"),
      py::arg("payload"),
      py::arg("sizes"),
      py::arg("strides"),
      "Replaces the payload that `tensor` and its aliases and views read with "
      "`payload`, whose layout (sizes, strides, as the caller read them) "
      "must be the replaced one's: every tensor keeps its elements.");

  m.def(
      "mark_shared_memory",
      [](const at::Tensor& a, const at::Tensor& b) {
        PayloadSlot::shareMemory(payloadImpl(a).slot(), payloadImpl(b).slot());
      },
      py::arg("a"),
      py::arg("b"),
      "Records that the payloads of `a` and `b` share memory (an "
      "element-size view and its base): while both live, neither can grow "
      "(resize_), which would end the sharing.");

  m.def(
      "payload_nbytes",
      [](const at::Tensor& tensor) {
        return payloadImpl(tensor).slot()->nbytes();
      },
      py::arg("tensor"),
      "Bytes the payload of `tensor` spans, by its own layout and dtype (0 "
      "while it has none).");

  m.def(
      "payload_memory_stats",
      [](int64_t device_index) {
        py::dict stats;
        for (const auto& [name, value] :
             payloadMemoryFigures(checkDeviceIndex(device_index))) {
          stats[py::str(name)] = value;
        }
        return stats;
      },
      py::arg("device_index"),
      "The memory figures of the live payloads on device `device_index`, by "
      "torch's statistic names (allocated_bytes.all.current...).");

  m.def(
      "reset_payload_peak_memory_stats",
      [](int64_t device_index) {
        resetPayloadPeakMemoryStats(checkDeviceIndex(device_index));
      },
      py::arg("device_index"),
      "Makes the peak payload figures of device `device_index` the current "
      "ones.");

  m.def(
      "reset_payload_accumulated_memory_stats",
      [](int64_t device_index) {
        resetPayloadAccumulatedMemoryStats(checkDeviceIndex(device_index));
      },
      py::arg("device_index"),
      "Starts the allocated and freed payload totals of device "
      "`device_index` again from zero.");

  m.def(
      "resize_payload_storage",
      &resizePayloadStorage,
      py::arg("tensor"),
      py::arg("nbytes"),
      "untyped_storage().resize_(nbytes) of the payload tensor `tensor`: 0 "
      "releases its payload, and from 0 a new one (its values undefined) is "
      "bound; any other resize raises.");

#ifdef USE_DISTRIBUTED
  m.def(
      "process_group_reference",
      [](py::handle group) {
        auto* pg = py::cast<c10d::ProcessGroup*>(group);
        TORCH_CHECK(
            pg != nullptr,
            "expected process_group_reference() to get a process group, but "
            "got None");
        using Reference = c10::intrusive_ptr<c10d::ProcessGroup>;
        return py::capsule(
            new Reference(Reference::reclaim_copy(pg)), [](void* reference) {
              // A gloo backend's destructor joins its workers, and a worker
              // may need the GIL to free its last work's tensors.
              py::gil_scoped_release no_gil;
              delete static_cast<Reference*>(reference);
            });
      },
      py::arg("group"),
      "A reference to the C++ object of the process group `group` that lets "
      "go of it with the GIL released: where it is the last, the group and "
      "its backends are destroyed without the GIL.");
#endif

  m.def(
      "is_payload_tensor",
      [](const at::Tensor& tensor) {
        auto* impl = maybePayloadImpl(tensor);
        return impl != nullptr && impl->hasPayloadStorage();
      },
      py::arg("tensor"),
      "Whether `tensor` is a payload tensor, whose storage stands for its "
      "payload (not a tensor of create_empty_tensor()).");

  m.def(
      "register_kernel",
      &registerKernel,
      py::arg("name"),
      py::arg("fn"),
      py::kw_only(),
      py::arg("cpu_passthrough") = false,
      "Registers `fn`, which takes and returns payloads, as the PrivateUse1 "
      "kernel of an aten operator overload. With cpu_passthrough, `fn` runs "
      "CPU's kernel on payloads that are CPU tensors, and the bridge does "
      "that itself unless the operator takes a generator.");

  m.def(
      "set_as_strided",
      [](py::object fn, bool cpu) {
        setViewFunction(std::move(fn), cpu);
        registerViewKernels();
      },
      py::arg("fn"),
      py::kw_only(),
      py::arg("cpu") = false,
      "Sets the backend's as_strided(payload, size, stride, storage_offset) "
      "and registers the view kernels that rely on it. With cpu, `fn` is "
      "CPU's as_strided on CPU tensor payloads, which the core runs itself.");

  m.def(
      "set_copy_into",
      &setCopyFunction,
      py::arg("fn"),
      "Sets the backend's copy_into(dst, src), which writes a payload into "
      "the payload of a tensor that shares it with others.");

  m.def(
      "check_copy_overlap",
      &checkCopyOverlap,
      py::arg("dst"),
      py::arg("src"),
      "Raises CPU's error where dst.copy_(src) writes elements it reads.");

  m.def(
      "wrapped_number",
      [](py::handle value) {
        c10::Scalar scalar;
        if (PyBool_Check(value.ptr())) {
          scalar = value.ptr() == Py_True;
        } else if (THPUtils_checkLong(value.ptr())) {
          scalar = THPUtils_unpackLong(value.ptr());
        } else if (PyFloat_Check(value.ptr())) {
          scalar = THPUtils_unpackDouble(value.ptr());
        } else if (PyComplex_Check(value.ptr())) {
          scalar = THPUtils_unpackComplexDouble(value.ptr());
        } else {
          TORCH_CHECK_TYPE(
              false,
              "wrapped_number(): expected a bool, int, float or complex, but "
              "got ",
              Py_TYPE(value.ptr())->tp_name);
        }
        auto t = at::scalar_to_tensor(scalar);
        t.unsafeGetTensorImpl()->set_wrapped_number(true);
        return t;
      },
      py::arg("value"),
      "A CPU tensor holding a Python number as torch wraps one given for a "
      "Tensor argument: it takes part in type promotion as the number does "
      "(the bridge gives a kernel such an argument as the number).");

  m.def(
      "set_check_kernels",
      &setCheckKernels,
      py::arg("enabled"),
      "Turns the comparison of every kernel result with the operator's meta "
      "function on or off; returns whether it was on.");

  m.def(
      "set_fallback",
      [](py::object fn) {
        setFallback(std::move(fn));
        registerAutogradKernels();
        registerDispatchStubs();
      },
      py::arg("fn"),
      "Installs fn(op_name, overload_name, args, kwargs) as the PrivateUse1 "
      "fallback for operators without a kernel, the autograd kernels that "
      "keep what the backend's kernels return, and the DispatchStub entries "
      "that reach the backend's kernels.");
}

void initModule(PyObject* module) {
  auto acc = py::handle(module).cast<py::module_>().def_submodule(
      "_acc", "Python-defined PrivateUse1 backends");
  initBindings(acc.ptr());
}

} // namespace torch::acc
