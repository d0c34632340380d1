r"""The series' edits of upstream files for PrivateUse2 and PrivateUse3 as device types.

PyTorch reserves three dispatch keys and backend components for backends defined outside
the tree (PrivateUse1, PrivateUse2, PrivateUse3) but only one device type. These edits give
the other two a device type each, so that up to three such backends are live at once, each
named at run time (its *slot*):

- c10: the device types, their names (a default name per slot, renamed once by the backend
  that takes it), parsing, printing, ``Backend`` values and the device type <-> backend
  component <-> dispatch key mappings, which follow from
  ``C10_FORALL_BACKEND_DEVICE_TYPES``. The PrivateUse1 functions are kept, as the slot-1
  case of the per-slot ones.

Each edit is ``(path, old, new)``: ``old`` occurs once in the v2.6.0 file (``gen_series.edit``
checks it).
"""

#: The googletest file of the slots (``series_rules.CPP_TESTS`` says where it goes).
CPP_TEST = "test/cpp/PrivateUseSlots_test.cpp"

_DEVICE_TYPE_H = "c10/core/DeviceType.h"
_DEVICE_TYPE_CPP = "c10/core/DeviceType.cpp"
_BACKEND_H = "c10/core/Backend.h"

C10_EDITS = [
    (
        _DEVICE_TYPE_H,
        """\
// This is most backends except PrivateUse2 and PrivateUse3
#define C10_FORALL_BACKEND_DEVICE_TYPES(_, extra) \\
""",
        """\
#define C10_FORALL_BACKEND_DEVICE_TYPES(_, extra) \\
""",
    ),
    (
        _DEVICE_TYPE_H,
        """\
  _(PrivateUse1, extra)

enum""",
        """\
  _(PrivateUse1, extra)                           \\
  _(PrivateUse2, extra)                           \\
  _(PrivateUse3, extra)

enum""",
    ),
    (
        _DEVICE_TYPE_H,
        """\
  PrivateUse1 = 20, // PrivateUse1 device
  // NB: If you add more devices:
  //  - Change the implementations of DeviceTypeName and isValidDeviceType
  //    in DeviceType.cpp
  //  - Change the number below
  COMPILE_TIME_MAX_DEVICE_TYPES = 21,
""",
        """\
  PrivateUse1 = 20, // PrivateUse1 device
  PrivateUse2 = 21, // PrivateUse2 device
  PrivateUse3 = 22, // PrivateUse3 device
  // NB: If you add more devices:
  //  - Change the implementations of DeviceTypeName and isValidDeviceType
  //    in DeviceType.cpp
  //  - Change the number below
  COMPILE_TIME_MAX_DEVICE_TYPES = 23,
""",
    ),
    (
        _DEVICE_TYPE_H,
        "constexpr DeviceType kPrivateUse1 = DeviceType::PrivateUse1;\n",
        """\
constexpr DeviceType kPrivateUse1 = DeviceType::PrivateUse1;
constexpr DeviceType kPrivateUse2 = DeviceType::PrivateUse2;
constexpr DeviceType kPrivateUse3 = DeviceType::PrivateUse3;
""",
    ),
    (
        _DEVICE_TYPE_H,
        "    COMPILE_TIME_MAX_DEVICE_TYPES <= 21,\n",
        "    COMPILE_TIME_MAX_DEVICE_TYPES <= 23,\n",
    ),
    (
        _DEVICE_TYPE_H,
        """\
C10_API bool is_privateuse1_backend_registered();

""",
        """\
C10_API bool is_privateuse1_backend_registered();

// PrivateUse1, PrivateUse2 and PrivateUse3 are the device types of backends
// defined outside PyTorch, three "slots" a backend takes at run time and
// renames, once. Each has a default name ("privateuseone", "privateusetwo",
// "privateusethree"), which parses before and after. The PrivateUse1
// functions above are the slot-1 case of the functions below.
//
// The macro lets code built against several releases ask whether this one
// has the three slots.
#define C10_PRIVATEUSE_BACKEND_SLOTS 3
constexpr int kPrivateUseBackendSlots = C10_PRIVATEUSE_BACKEND_SLOTS;

// Whether `d` is PrivateUse1, PrivateUse2 or PrivateUse3.
C10_API bool is_privateuse_device_type(DeviceType d);
// The device type of slot `slot`, from 1 (PrivateUse1) to
// kPrivateUseBackendSlots.
C10_API DeviceType privateuse_device_type(int slot);
// Renames the private-use device type `type` to `backend_name`, once: an error
// if it already has another name, if another slot has that name, or if it is
// an in-tree device name.
C10_API void register_privateuse_backend(
    DeviceType type,
    const std::string& backend_name);
C10_API std::string get_privateuse_backend(
    DeviceType type,
    bool lower_case = true);
C10_API bool is_privateuse_backend_registered(DeviceType type);
// The private-use device type whose name (default or registered) is `name`.
C10_API std::optional<DeviceType> privateuse_backend_of_name(
    const std::string& name);
C10_API bool is_privateuse_backend_name(const std::string& name);

""",
    ),
    (
        _DEVICE_TYPE_H,
        "#include <functional>\n#include <ostream>\n",
        "#include <functional>\n#include <optional>\n#include <ostream>\n",
    ),
    (
        _DEVICE_TYPE_CPP,
        """\
    case DeviceType::PrivateUse1:
      return get_privateuse1_backend(/*lower_case=*/lower_case);
""",
        """\
    case DeviceType::PrivateUse1:
    case DeviceType::PrivateUse2:
    case DeviceType::PrivateUse3:
      return get_privateuse_backend(d, /*lower_case=*/lower_case);
""",
    ),
    (
        _DEVICE_TYPE_CPP,
        """\
    case DeviceType::PrivateUse1:
      return true;
""",
        """\
    case DeviceType::PrivateUse1:
    case DeviceType::PrivateUse2:
    case DeviceType::PrivateUse3:
      return true;
""",
    ),
    (
        _DEVICE_TYPE_CPP,
        """\
static std::atomic<bool> privateuse1_backend_name_set;
static std::string privateuse1_backend_name;
static std::mutex privateuse1_lock;

std::string get_privateuse1_backend(bool lower_case) {
  // Applying the same atomic read memory ordering logic as in Note [Memory
  // ordering on Python interpreter tag].
  auto name_registered =
      privateuse1_backend_name_set.load(std::memory_order_acquire);
  // Guaranteed that if the flag is set, then privateuse1_backend_name has been
  // set, and will never be written to.
  auto backend_name =
      name_registered ? privateuse1_backend_name : "privateuseone";
  auto op_case = lower_case ? ::tolower : ::toupper;
  std::transform(
      backend_name.begin(), backend_name.end(), backend_name.begin(), op_case);
  return backend_name;
}

void register_privateuse1_backend(const std::string& backend_name) {
  std::lock_guard<std::mutex> guard(privateuse1_lock);
  TORCH_CHECK(
      !privateuse1_backend_name_set.load() ||
          privateuse1_backend_name == backend_name,
      "torch.register_privateuse1_backend() has already been set! Current backend: ",
      privateuse1_backend_name);

  static const std::array<std::string, 6> types = {
      "cpu", "cuda", "hip", "mps", "xpu", "mtia"};
  TORCH_CHECK(
      std::find(types.begin(), types.end(), backend_name) == types.end(),
      "Cannot register privateuse1 backend with in-tree device name: ",
      backend_name);

  privateuse1_backend_name = backend_name;
  // Invariant: once this flag is set, privateuse1_backend_name is NEVER written
  // to.
  privateuse1_backend_name_set.store(true, std::memory_order_relaxed);
}

bool is_privateuse1_backend_registered() {
  return privateuse1_backend_name_set.load(std::memory_order_acquire);
}
""",
        """\
//
// One flag and one name per private-use slot, one mutex for all of them: a
// name is checked against the other slots' names before it is set.
namespace {
constexpr std::array<const char*, kPrivateUseBackendSlots>
    privateuse_default_names = {
        "privateuseone",
        "privateusetwo",
        "privateusethree"};
constexpr std::array<const char*, kPrivateUseBackendSlots>
    privateuse_type_names = {"PrivateUse1", "PrivateUse2", "PrivateUse3"};
std::array<std::atomic<bool>, kPrivateUseBackendSlots>
    privateuse_backend_name_set;
std::array<std::string, kPrivateUseBackendSlots> privateuse_backend_names;
std::mutex privateuse_lock;

size_t privateuse_slot_index(DeviceType type) {
  TORCH_CHECK(
      is_privateuse_device_type(type),
      "expected a private-use device type (PrivateUse1, PrivateUse2 or "
      "PrivateUse3), but got device type ",
      static_cast<int>(type));
  return static_cast<size_t>(type) -
      static_cast<size_t>(DeviceType::PrivateUse1);
}

// The name of slot `slot`, as registered or the default one.
std::string privateuse_name(size_t slot) {
  // Applying the same atomic read memory ordering logic as in Note [Memory
  // ordering on Python interpreter tag].
  auto name_registered =
      privateuse_backend_name_set[slot].load(std::memory_order_acquire);
  // Guaranteed that if the flag is set, then the slot's name has been set,
  // and will never be written to.
  return name_registered ? privateuse_backend_names[slot]
                         : privateuse_default_names[slot];
}

std::string to_case(std::string name, bool lower_case) {
  auto op_case = lower_case ? ::tolower : ::toupper;
  std::transform(name.begin(), name.end(), name.begin(), op_case);
  return name;
}
} // namespace

bool is_privateuse_device_type(DeviceType d) {
  return d == DeviceType::PrivateUse1 || d == DeviceType::PrivateUse2 ||
      d == DeviceType::PrivateUse3;
}

DeviceType privateuse_device_type(int slot) {
  TORCH_CHECK(
      slot >= 1 && slot <= kPrivateUseBackendSlots,
      "expected a private-use backend slot from 1 to ",
      kPrivateUseBackendSlots,
      ", but got ",
      slot);
  return static_cast<DeviceType>(
      static_cast<int>(DeviceType::PrivateUse1) + slot - 1);
}

std::string get_privateuse_backend(DeviceType type, bool lower_case) {
  return to_case(privateuse_name(privateuse_slot_index(type)), lower_case);
}

void register_privateuse_backend(
    DeviceType type,
    const std::string& backend_name) {
  const auto slot = privateuse_slot_index(type);
  std::lock_guard<std::mutex> guard(privateuse_lock);
  TORCH_CHECK(
      !privateuse_backend_name_set[slot].load() ||
          privateuse_backend_names[slot] == backend_name,
      slot == 0 ? "torch.register_privateuse1_backend()"
                : privateuse_type_names[slot],
      " has already been set! Current backend: ",
      privateuse_backend_names[slot]);

  static const std::array<std::string, 6> types = {
      "cpu", "cuda", "hip", "mps", "xpu", "mtia"};
  TORCH_CHECK(
      std::find(types.begin(), types.end(), backend_name) == types.end(),
      "Cannot register ",
      slot == 0 ? "privateuse1" : privateuse_type_names[slot],
      " backend with in-tree device name: ",
      backend_name);
  for (size_t other = 0; other < privateuse_backend_names.size(); ++other) {
    TORCH_CHECK(
        other == slot ||
            to_case(privateuse_name(other), true) !=
                to_case(backend_name, true),
        "Cannot register ",
        privateuse_type_names[slot],
        " backend with the name of ",
        privateuse_type_names[other],
        ": ",
        backend_name);
  }

  privateuse_backend_names[slot] = backend_name;
  // Invariant: once this flag is set, the slot's name is NEVER written to.
  privateuse_backend_name_set[slot].store(true, std::memory_order_release);
}

bool is_privateuse_backend_registered(DeviceType type) {
  return privateuse_backend_name_set[privateuse_slot_index(type)].load(
      std::memory_order_acquire);
}

std::optional<DeviceType> privateuse_backend_of_name(const std::string& name) {
  for (int slot = 1; slot <= kPrivateUseBackendSlots; ++slot) {
    const auto type = privateuse_device_type(slot);
    if (get_privateuse_backend(type) == name) {
      return type;
    }
  }
  return std::nullopt;
}

bool is_privateuse_backend_name(const std::string& name) {
  return privateuse_backend_of_name(name).has_value();
}

std::string get_privateuse1_backend(bool lower_case) {
  return get_privateuse_backend(DeviceType::PrivateUse1, lower_case);
}

void register_privateuse1_backend(const std::string& backend_name) {
  register_privateuse_backend(DeviceType::PrivateUse1, backend_name);
}

bool is_privateuse1_backend_registered() {
  return is_privateuse_backend_registered(DeviceType::PrivateUse1);
}
""",
    ),
    (
        "c10/core/Device.cpp",
        """\
          {"privateuseone", DeviceType::PrivateUse1},
      }};
""",
        """\
          {"privateuseone", DeviceType::PrivateUse1},
          {"privateusetwo", DeviceType::PrivateUse2},
          {"privateusethree", DeviceType::PrivateUse3},
      }};
""",
    ),
    (
        "c10/core/Device.cpp",
        """\
  if (device_string == get_privateuse1_backend()) {
    return DeviceType::PrivateUse1;
  }
""",
        """\
  if (const auto type = privateuse_backend_of_name(device_string)) {
    return *type;
  }
""",
    ),
    (
        "c10/core/DispatchKey.h",
        "\nBackendComponent toBackendComponent(DeviceType device_type);\n",
        "\nC10_API BackendComponent toBackendComponent(DeviceType device_type);\n",
    ),
    (
        "c10/core/StorageImpl.cpp",
        """\
// A allowlist of device type, currently available is PrivateUse1
static ska::flat_hash_set<c10::DeviceType>& GetBackendMetaAllowlist() {
  static ska::flat_hash_set<c10::DeviceType> DeviceTypeAllowList{
      DeviceType::PrivateUse1};
""",
        """\
// A allowlist of device type, currently available are the private-use ones
static ska::flat_hash_set<c10::DeviceType>& GetBackendMetaAllowlist() {
  static ska::flat_hash_set<c10::DeviceType> DeviceTypeAllowList{
      DeviceType::PrivateUse1,
      DeviceType::PrivateUse2,
      DeviceType::PrivateUse3};
""",
    ),
    (
        "c10/core/StorageImpl.cpp",
        '      "for PrivateUse1. ",\n',
        '      "for PrivateUse1, PrivateUse2 and PrivateUse3. ",\n',
    ),
    (
        _BACKEND_H,
        "  PrivateUse1,\n  NumOptions\n",
        "  PrivateUse1,\n  PrivateUse2,\n  PrivateUse3,\n  NumOptions\n",
    ),
    (
        _BACKEND_H,
        """\
      t == DispatchKey::PrivateUse1 || t == DispatchKey::AutogradPrivateUse1) {
    return Backend::PrivateUse1;
""",
        """\
      t == DispatchKey::PrivateUse1 || t == DispatchKey::AutogradPrivateUse1) {
    return Backend::PrivateUse1;
  } else if (
      t == DispatchKey::PrivateUse2 || t == DispatchKey::AutogradPrivateUse2) {
    return Backend::PrivateUse2;
  } else if (
      t == DispatchKey::PrivateUse3 || t == DispatchKey::AutogradPrivateUse3) {
    return Backend::PrivateUse3;
""",
    ),
    (
        _BACKEND_H,
        """\
    case Backend::PrivateUse1:
      return DispatchKey::PrivateUse1;
""",
        """\
    case Backend::PrivateUse1:
      return DispatchKey::PrivateUse1;
    case Backend::PrivateUse2:
      return DispatchKey::PrivateUse2;
    case Backend::PrivateUse3:
      return DispatchKey::PrivateUse3;
""",
    ),
    (
        _BACKEND_H,
        """\
    case Backend::QuantizedPrivateUse1:
      return DeviceType::PrivateUse1;
""",
        """\
    case Backend::QuantizedPrivateUse1:
      return DeviceType::PrivateUse1;
    case Backend::PrivateUse2:
      return DeviceType::PrivateUse2;
    case Backend::PrivateUse3:
      return DeviceType::PrivateUse3;
""",
    ),
    (
        _BACKEND_H,
        """\
    case Backend::PrivateUse1:
      return "PrivateUseOne";
""",
        """\
    case Backend::PrivateUse1:
      return "PrivateUseOne";
    case Backend::PrivateUse2:
      return "PrivateUseTwo";
    case Backend::PrivateUse3:
      return "PrivateUseThree";
""",
    ),
]

_HOOKS_H = "aten/src/ATen/detail/PrivateUse1HooksInterface.h"
_HOOKS_CPP = "aten/src/ATen/detail/PrivateUse1HooksInterface.cpp"
_ACCELERATOR_CPP = "aten/src/ATen/DeviceAccelerator.cpp"
_MODULE_CPP = "torch/csrc/Module.cpp"

#: ATen and torch/csrc: hooks per slot (with the generators they give), the accelerator
#: over every slot, a storage resized by its own slot's hooks, and the Python names.
#: Applied after the series' own change to ``at::getAccelerator`` (the explicit choice).
ATEN_EDITS = [
    (
        _HOOKS_H,
        """\
TORCH_API bool isPrivateUse1HooksRegistered();

namespace detail {

TORCH_API const at::PrivateUse1HooksInterface& getPrivateUse1Hooks();
""",
        """\
TORCH_API bool isPrivateUse1HooksRegistered();

// The hooks of each private-use device type (c10::is_privateuse_device_type):
// the PrivateUse1 functions are the PrivateUse1 case. Each slot registers its
// own hooks once; they implement the same interface.
TORCH_API void RegisterPrivateUseHooksInterface(
    c10::DeviceType device_type,
    at::PrivateUse1HooksInterface* hook_);

TORCH_API bool isPrivateUseHooksRegistered(c10::DeviceType device_type);

namespace detail {

TORCH_API const at::PrivateUse1HooksInterface& getPrivateUse1Hooks();

TORCH_API const at::PrivateUse1HooksInterface& getPrivateUseHooks(
    c10::DeviceType device_type);
""",
    ),
    (
        _HOOKS_CPP,
        """\
static PrivateUse1HooksInterface* privateuse1_hooks = nullptr;
static std::mutex _hooks_mutex_lock;

TORCH_API void RegisterPrivateUse1HooksInterface(at::PrivateUse1HooksInterface* hook_) {
  std::lock_guard<std::mutex> lock(_hooks_mutex_lock);
  TORCH_CHECK(privateuse1_hooks == nullptr, "PrivateUse1HooksInterface only could be """
        """registered once.");
  privateuse1_hooks = hook_;
}

TORCH_API bool isPrivateUse1HooksRegistered() {
  return privateuse1_hooks != nullptr;
}

namespace detail {

TORCH_API const at::PrivateUse1HooksInterface& getPrivateUse1Hooks() {
  TORCH_CHECK(
      privateuse1_hooks != nullptr,
      "Please register PrivateUse1HooksInterface by `RegisterPrivateUse1HooksInterface` first.");
  return *privateuse1_hooks;
}
""",
        """\
// The hooks of each private-use slot, PrivateUse1 first.
static std::array<std::atomic<PrivateUse1HooksInterface*>, c10::kPrivateUseBackendSlots>
    privateuse_hooks{};
static std::mutex _hooks_mutex_lock;

static std::atomic<PrivateUse1HooksInterface*>& hooks_of(c10::DeviceType device_type) {
  TORCH_CHECK(
      c10::is_privateuse_device_type(device_type),
      "expected a private-use device type (PrivateUse1, PrivateUse2 or PrivateUse3), but got ",
      c10::DeviceTypeName(device_type));
  return privateuse_hooks[static_cast<size_t>(device_type) -
                          static_cast<size_t>(c10::DeviceType::PrivateUse1)];
}

TORCH_API void RegisterPrivateUseHooksInterface(
    c10::DeviceType device_type,
    at::PrivateUse1HooksInterface* hook_) {
  auto& hooks = hooks_of(device_type);
  std::lock_guard<std::mutex> lock(_hooks_mutex_lock);
  TORCH_CHECK(
      hooks.load() == nullptr,
      device_type == c10::kPrivateUse1 ? "PrivateUse1HooksInterface"
                                       : c10::DeviceTypeName(device_type),
      " only could be registered once.");
  hooks.store(hook_);
}

TORCH_API bool isPrivateUseHooksRegistered(c10::DeviceType device_type) {
  return hooks_of(device_type).load() != nullptr;
}

TORCH_API void RegisterPrivateUse1HooksInterface(at::PrivateUse1HooksInterface* hook_) {
  RegisterPrivateUseHooksInterface(c10::kPrivateUse1, hook_);
}

TORCH_API bool isPrivateUse1HooksRegistered() {
  return isPrivateUseHooksRegistered(c10::kPrivateUse1);
}

namespace detail {

TORCH_API const at::PrivateUse1HooksInterface& getPrivateUseHooks(
    c10::DeviceType device_type) {
  auto* hooks = hooks_of(device_type).load();
  TORCH_CHECK(
      hooks != nullptr,
      "Please register PrivateUse1HooksInterface for ",
      c10::DeviceTypeName(device_type),
      " by `RegisterPrivateUseHooksInterface` first.");
  return *hooks;
}

TORCH_API const at::PrivateUse1HooksInterface& getPrivateUse1Hooks() {
  TORCH_CHECK(
      isPrivateUse1HooksRegistered(),
      "Please register PrivateUse1HooksInterface by `RegisterPrivateUse1HooksInterface` first.");
  return getPrivateUseHooks(c10::kPrivateUse1);
}
""",
    ),
    (
        _HOOKS_CPP,
        "#include <ATen/detail/PrivateUse1HooksInterface.h>\n",
        "#include <ATen/detail/PrivateUse1HooksInterface.h>\n\n"
        "#include <array>\n#include <atomic>\n",
    ),
    (
        "aten/src/ATen/Context.h",
        """\
    } else if (opt_device_type == at::kPrivateUse1) {
      return at::detail::getPrivateUse1Hooks();
""",
        """\
    } else if (
        opt_device_type.has_value() &&
        c10::is_privateuse_device_type(*opt_device_type)) {
      return at::detail::getPrivateUseHooks(*opt_device_type);
""",
    ),
    (
        "aten/src/ATen/native/Resize.cpp",
        """\
  } else if (device_type == at::kPrivateUse1) {
    at::detail::getPrivateUse1Hooks().resizePrivateUse1Bytes(
""",
        """\
  } else if (c10::is_privateuse_device_type(device_type)) {
    at::detail::getPrivateUseHooks(device_type).resizePrivateUse1Bytes(
""",
    ),
    (
        _ACCELERATOR_CPP,
        """\
  if (is_privateuse1_backend_registered()) {
    // We explicitly allow PrivateUse1 and another device at the same time as we
    // use this for testing. Whenever a PrivateUse1 device is registered, use it
    // first.
    return kPrivateUse1;
  }
""",
        """\
  for (int slot = 1; slot <= c10::kPrivateUseBackendSlots; ++slot) {
    // We explicitly allow private-use devices and another device at the same
    // time as we use this for testing. Whenever a private-use device is
    // registered, use it first; of several, the lowest slot (PrivateUse1
    // first), unless setCurrentAccelerator chose another.
    if (c10::is_privateuse_backend_registered(
            c10::privateuse_device_type(slot))) {
      return c10::privateuse_device_type(slot);
    }
  }
""",
    ),
    (
        _ACCELERATOR_CPP,
        """\
    case at::kPrivateUse1:
      return true;
""",
        """\
    case at::kPrivateUse1:
    case at::kPrivateUse2:
    case at::kPrivateUse3:
      return true;
""",
    ),
    (
        _MODULE_CPP,
        """\
static PyObject* THModule_get_privateuse1_backend_name(
    PyObject* _unused,
    PyObject* arg) {
  HANDLE_TH_ERRORS
  return THPUtils_packString(c10::get_privateuse1_backend());
  END_HANDLE_TH_ERRORS
}
""",
        """\
static PyObject* THModule_get_privateuse1_backend_name(
    PyObject* _unused,
    PyObject* arg) {
  HANDLE_TH_ERRORS
  return THPUtils_packString(c10::get_privateuse1_backend());
  END_HANDLE_TH_ERRORS
}

// The device type of the private-use slot `slot` (an int from 1 to
// c10::kPrivateUseBackendSlots) that `function` was given.
static c10::DeviceType THModule_privateuse_slot(
    PyObject* slot,
    const char* function) {
  TORCH_CHECK_TYPE(
      THPUtils_checkLong(slot) && !PyBool_Check(slot),
      function,
      " expects the slot as an int, but got ",
      THPUtils_typename(slot));
  return c10::privateuse_device_type(
      static_cast<int>(THPUtils_unpackLong(slot)));
}

static PyObject* THModule_rename_privateuse_backend(
    PyObject* _unused,
    PyObject* args) {
  HANDLE_TH_ERRORS
  PyObject* slot = nullptr;
  PyObject* name = nullptr;
  if (!PyArg_ParseTuple(args, "OO", &slot, &name)) {
    return nullptr;
  }
  const auto device_type =
      THModule_privateuse_slot(slot, "_rename_privateuse_backend");
  TORCH_CHECK_TYPE(
      THPUtils_checkString(name),
      "_rename_privateuse_backend expects the name as a str, but got ",
      THPUtils_typename(name));
  c10::register_privateuse_backend(device_type, THPUtils_unpackString(name));
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

static PyObject* THModule_get_privateuse_backend_name(
    PyObject* _unused,
    PyObject* slot) {
  HANDLE_TH_ERRORS
  return THPUtils_packString(c10::get_privateuse_backend(
      THModule_privateuse_slot(slot, "_get_privateuse_backend_name")));
  END_HANDLE_TH_ERRORS
}

static PyObject* THModule_privateuse_backend_slots(
    PyObject* _unused,
    PyObject* noargs) {
  return THPUtils_packInt64(c10::kPrivateUseBackendSlots);
}
""",
    ),
    (
        _MODULE_CPP,
        """\
    {"_get_privateuse1_backend_name",
     THModule_get_privateuse1_backend_name,
     METH_NOARGS,
     nullptr},
""",
        """\
    {"_get_privateuse1_backend_name",
     THModule_get_privateuse1_backend_name,
     METH_NOARGS,
     nullptr},
    {"_rename_privateuse_backend",
     THModule_rename_privateuse_backend,
     METH_VARARGS,
     nullptr},
    {"_get_privateuse_backend_name",
     THModule_get_privateuse_backend_name,
     METH_O,
     nullptr},
    {"_privateuse_backend_slots",
     THModule_privateuse_backend_slots,
     METH_NOARGS,
     nullptr},
""",
    ),
    (
        "torch/_C/__init__.pyi.in",
        "def _get_privateuse1_backend_name() -> str: ...\n",
        """\
def _get_privateuse1_backend_name() -> str: ...
def _rename_privateuse_backend(slot: _int, backend: str) -> None: ...
def _get_privateuse_backend_name(slot: _int) -> str: ...
def _privateuse_backend_slots() -> _int: ...
""",
    ),
]
