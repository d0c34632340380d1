#include <torch/csrc/acc/Payload.h>

#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/tensor_numpy.h>

#include <c10/util/strides.h>

#include <string>
#include <unordered_map>
#include <utility>

namespace torch::acc {

namespace {

// Backend functions, set once; strong references kept until exit (never
// released, so nothing touches Python at shutdown).
PyObject* view_fn = nullptr;
PyObject* copy_fn = nullptr;
// Whether view_fn is CPU's as_strided on CPU tensor payloads.
bool view_fn_cpu = false;

// Attribute names a payload is asked for, interned once: the string-taking
// attribute functions would make a new string object on every call.
struct AttrNames {
  PyObject* shape = PyUnicode_InternFromString("shape");
  PyObject* dtype = PyUnicode_InternFromString("dtype");
  PyObject* strides = PyUnicode_InternFromString("strides");
};

const AttrNames& attrNames() {
  static const AttrNames names; // Never released, like every interned name.
  return names;
}

py::object getAttr(py::handle obj, PyObject* name) {
  PyObject* attr = PyObject_GetAttr(obj.ptr(), name);
  if (attr == nullptr) {
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(attr);
}

// The tensor a payload is, or nullptr. THPVariable_Check without its
// isinstance() (which looks up __instancecheck__): most payloads are not
// tensors, and every kernel result asks.
const at::Tensor* payloadTensor(py::handle payload) {
  if (THPVariableClass == nullptr ||
      !PyType_IsSubtype(
          Py_TYPE(payload.ptr()),
          reinterpret_cast<PyTypeObject*>(THPVariableClass))) {
    return nullptr;
  }
  return &THPVariable_Unpack(payload.ptr());
}

#ifdef USE_NUMPY
// The NumPy array a payload is, or nullptr.
PyArrayObject* payloadArray(py::handle payload) {
  if (!torch::utils::is_numpy_available() || !PyArray_Check(payload.ptr())) {
    return nullptr;
  }
  return reinterpret_cast<PyArrayObject*>(payload.ptr());
}
#endif

// Strides in elements from NumPy-style strides in bytes.
c10::DimVector elementStrides(
    c10::DimVector bytes,
    size_t ndim,
    c10::ScalarType dtype) {
  const auto item = static_cast<int64_t>(c10::elementSize(dtype));
  TORCH_CHECK_VALUE(
      bytes.size() == ndim,
      "expected payload.strides to have ",
      ndim,
      " entries (one per dimension), but got ",
      bytes.size());
  for (auto& b : bytes) {
    TORCH_CHECK_VALUE(
        b >= 0 && b % item == 0,
        "expected payload.strides to be non-negative multiples of the item "
        "size ",
        item,
        ", but got ",
        c10::IntArrayRef(bytes),
        "; pass a contiguous payload or explicit strides");
    b /= item;
  }
  return bytes;
}

} // namespace

PayloadFields::PayloadFields(py::handle payload)
    : payload_(payload), tensor_(payloadTensor(payload)) {
#ifdef USE_NUMPY
  if (tensor_ == nullptr) {
    array_ = payloadArray(payload);
  }
#endif
}

c10::DimVector PayloadFields::sizes() const {
  if (tensor_ != nullptr) {
    return c10::DimVector(tensor_->sizes());
  }
#ifdef USE_NUMPY
  if (array_ != nullptr) {
    const npy_intp* dims = PyArray_DIMS(array_);
    return c10::DimVector(dims, dims + PyArray_NDIM(array_));
  }
#endif
  return toInts(getAttr(payload_, attrNames().shape), "payload.shape");
}

std::optional<c10::DimVector> PayloadFields::maybeSizes() const {
  if (describesItself()) {
    return sizes();
  }
  const auto shape = maybeAttr(attrNames().shape);
  if (!shape) {
    return std::nullopt;
  }
  return toInts(*shape, "payload.shape");
}

c10::ScalarType PayloadFields::dtype() const {
  if (tensor_ != nullptr) {
    return tensor_->scalar_type();
  }
#ifdef USE_NUMPY
  if (array_ != nullptr) {
    return scalarTypeOf(reinterpret_cast<PyObject*>(PyArray_DESCR(array_)));
  }
#endif
  return scalarTypeOf(getAttr(payload_, attrNames().dtype));
}

std::optional<c10::ScalarType> PayloadFields::maybeDtype() const {
  if (describesItself()) {
    return dtype();
  }
  const auto dtype = maybeAttr(attrNames().dtype);
  if (!dtype) {
    return std::nullopt;
  }
  return scalarTypeOf(*dtype);
}

c10::DimVector PayloadFields::strides(
    c10::IntArrayRef sizes,
    c10::ScalarType dtype) const {
  auto own = maybeStrides(sizes, dtype);
  return own ? std::move(*own) : c10::contiguous_strides(sizes);
}

std::optional<c10::DimVector> PayloadFields::maybeStrides(
    c10::IntArrayRef sizes,
    c10::ScalarType dtype) const {
  if (c10::multiply_integers(sizes) == 0 &&
      (describesItself() || maybeAttr(attrNames().strides))) {
    return c10::contiguous_strides(sizes);
  }
  if (tensor_ != nullptr) {
    return c10::DimVector(tensor_->strides());
  }
#ifdef USE_NUMPY
  if (array_ != nullptr) {
    const npy_intp* bytes = PyArray_STRIDES(array_);
    return elementStrides(
        c10::DimVector(bytes, bytes + PyArray_NDIM(array_)),
        sizes.size(),
        dtype);
  }
#endif
  const auto strides = maybeAttr(attrNames().strides);
  if (!strides) {
    return std::nullopt;
  }
  return elementStrides(
      toInts(*strides, "payload.strides"), sizes.size(), dtype);
}

bool PayloadFields::describesItself() const {
#ifdef USE_NUMPY
  if (array_ != nullptr) {
    return true;
  }
#endif
  return tensor_ != nullptr;
}

std::optional<py::object> PayloadFields::maybeAttr(PyObject* name) const {
  PyObject* attr = PyObject_GetAttr(payload_.ptr(), name);
  if (attr == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  auto value = py::reinterpret_steal<py::object>(attr);
  if (value.is_none()) {
    return std::nullopt;
  }
  return value;
}

c10::ScalarType scalarTypeOf(py::handle dtype) {
  if (THPDtype_Check(dtype.ptr())) {
    return reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
  }
  // Keyed by the dtype object (NumPy's are singletons); keys are kept alive.
  static std::unordered_map<PyObject*, c10::ScalarType> cache;
  auto it = cache.find(dtype.ptr());
  if (it != cache.end()) {
    return it->second;
  }
  static const std::unordered_map<std::string, c10::ScalarType> names = {
      {"bool", c10::kBool},
      {"uint8", c10::kByte},
      {"int8", c10::kChar},
      {"int16", c10::kShort},
      {"int32", c10::kInt},
      {"int64", c10::kLong},
      {"float16", c10::kHalf},
      {"bfloat16", c10::kBFloat16},
      {"float32", c10::kFloat},
      {"float64", c10::kDouble},
      {"complex64", c10::kComplexFloat},
      {"complex128", c10::kComplexDouble},
  };
  const auto name = py::str(dtype).cast<std::string>();
  auto found = names.find(name);
  TORCH_CHECK_TYPE(
      found != names.end(),
      "expected a payload dtype such as float32, but got ",
      name);
  cache.emplace(dtype.inc_ref().ptr(), found->second);
  return found->second;
}

c10::DimVector toInts(py::handle seq, const char* what) {
  const auto fail = [&]() {
    TORCH_CHECK_TYPE(
        false,
        "expected ",
        what,
        " to be a sequence of ints, but got ",
        py::str(py::type::handle_of(seq)).cast<std::string>());
  };
  PyObject* obj = seq.ptr();
  if (PyUnicode_Check(obj) || PyBytes_Check(obj) || !PySequence_Check(obj)) {
    fail();
  }
  // A new reference to `obj` itself for a tuple or list (payload shapes are
  // tuples), else a list of the items.
  PyObject* fast = PySequence_Fast(obj, "");
  if (fast == nullptr) {
    PyErr_Clear();
    fail();
  }
  const auto items = py::reinterpret_steal<py::object>(fast);
  const auto n = PySequence_Fast_GET_SIZE(fast);
  PyObject** item = PySequence_Fast_ITEMS(fast);
  c10::DimVector out(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (PyFloat_Check(item[i])) {
      fail();
    }
    out[i] = PyLong_AsLongLong(item[i]); // __index__ for non-ints
    if (out[i] == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      fail();
    }
  }
  return out;
}

at::Tensor wrap(
    py::handle payload,
    c10::DeviceIndex device_index,
    std::optional<c10::IntArrayRef> sizes,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::IntArrayRef> strides) {
  const PayloadFields fields(payload);
  // What the payload says of itself, where it says it, and what the caller
  // says must agree: a tensor reads its payload through this metadata, so a
  // dtype, shape or layout the payload does not have would read other memory
  // than the payload's.
  // Each attribute is read once: for payloads that are neither tensors nor
  // NumPy arrays, every read is a Python call.
  auto own_sizes = fields.maybeSizes();
  if (!own_sizes && !sizes) {
    own_sizes = fields.sizes(); // Raises the missing attribute's error.
  }
  c10::DimVector s;
  if (own_sizes) {
    s = std::move(*own_sizes);
    TORCH_CHECK_VALUE(
        !sizes || sizes->equals(s),
        "expected shape to be the payload's own shape ",
        c10::IntArrayRef(s),
        ", but got ",
        *sizes);
  } else {
    s.assign(sizes->begin(), sizes->end());
  }
  const bool payload_has_shape = own_sizes.has_value();
  for (const auto size : s) {
    TORCH_CHECK_VALUE(
        size >= 0,
        "expected non-negative sizes, but got ",
        c10::IntArrayRef(s));
  }
  auto own_dtype = fields.maybeDtype();
  if (!own_dtype && !dtype) {
    own_dtype = fields.dtype(); // Raises the missing attribute's error.
  }
  c10::ScalarType st{};
  if (own_dtype) {
    st = *own_dtype;
    TORCH_CHECK_VALUE(
        !dtype || *dtype == st,
        "expected dtype to be the payload's own dtype ",
        st,
        ", but got ",
        *dtype);
  } else {
    st = *dtype;
  }
  auto own_strides = fields.maybeStrides(s, st);
  c10::DimVector st_strides;
  if (strides && !own_strides) {
    st_strides.assign(strides->begin(), strides->end());
    TORCH_CHECK_VALUE(
        st_strides.size() == s.size(),
        "expected one stride per dimension (",
        s.size(),
        "), but got ",
        st_strides.size());
    for (const auto stride : st_strides) {
      TORCH_CHECK_VALUE(
          stride >= 0,
          "expected non-negative strides, but got ",
          c10::IntArrayRef(st_strides));
    }
    // Within the payload's elements, where the payload says how many it has.
    if (payload_has_shape) {
      const auto numel = c10::multiply_integers(s);
      int64_t last = 0;
      bool empty = false;
      for (size_t d = 0; d < s.size(); ++d) {
        empty = empty || s[d] == 0;
        last += (s[d] - 1) * st_strides[d];
      }
      TORCH_CHECK_VALUE(
          empty || last < numel,
          "expected strides ",
          c10::IntArrayRef(st_strides),
          " for shape ",
          c10::IntArrayRef(s),
          " to stay within the payload's ",
          numel,
          " elements, but they reach element ",
          last);
    }
  } else {
    st_strides =
        own_strides ? std::move(*own_strides) : c10::contiguous_strides(s);
    TORCH_CHECK_VALUE(
        !strides || strides->equals(st_strides),
        "expected strides to be the payload's own strides ",
        c10::IntArrayRef(st_strides),
        " (in elements), but got ",
        *strides);
  }
  auto slot = c10::make_intrusive<PayloadSlot>(device_index);
  slot->bind(payload, s, st_strides, st);
  return makePayloadTensor(std::move(slot), st, s, st_strides, 0);
}

namespace {

// Writes the payload `value` (of the tensor's shape and dtype) into the
// payload of `tensor` through the backend's copy_into function. A backend
// whose payloads are immutable returns a new payload, which replaces that of
// a whole-payload tensor laid out as the slot is.
void writeInto(const at::Tensor& tensor, py::handle value) {
  auto& impl = payloadImpl(tensor);
  TORCH_CHECK(
      copy_fn != nullptr,
      "the ",
      c10::get_privateuse1_backend(),
      " backend has no copy_into function, so a payload cannot be written "
      "into a tensor that shares its payload; register one with "
      "torch_acc.library.impl_payload(copy_into=...)");
  const py::object given = materialize(tensor);
  const py::object result = py::handle(copy_fn)(given, value);
  if (result.is(given) || result.is_none()) {
    return;
  }
  auto& slot = *impl.slot();
  const PayloadFields fields(result);
  const auto dtype = fields.dtype();
  const auto sizes = fields.sizes();
  TORCH_CHECK(
      impl.isWholePayload() && dtype == tensor.scalar_type() &&
          c10::IntArrayRef(sizes).equals(slot.sizes) &&
          c10::IntArrayRef(fields.strides(sizes, dtype)).equals(slot.strides),
      "the ",
      c10::get_privateuse1_backend(),
      " backend's copy_into returned a new payload (",
      dtype,
      " ",
      c10::IntArrayRef(sizes),
      ") for a tensor of ",
      tensor.scalar_type(),
      " ",
      tensor.sizes(),
      " that shares its payload with other tensors",
      impl.isWholePayload() ? "" : " (a view)",
      "; copy_into must write into the payload it is given, or return one "
      "laid out as it is");
  slot.bind(result, slot.sizes, slot.strides, dtype);
}

} // namespace

void rebind(const at::Tensor& tensor, py::handle result) {
  auto& impl = payloadImpl(tensor);
  const PayloadFields fields(result);
  const auto dtype = fields.dtype();
  TORCH_CHECK(
      dtype == tensor.scalar_type(),
      "expected a ",
      tensor.scalar_type(),
      " payload for a tensor of dtype ",
      tensor.scalar_type(),
      ", but got ",
      dtype);
  const auto sizes = fields.sizes();
  const auto strides = fields.strides(sizes, dtype);
  auto& slot = *impl.slot();
  if (!slot.object || impl.slot().use_count() == 1) {
    // No other tensor reads this payload: the result replaces it.
    slot.bind(result, sizes, strides, dtype);
    impl.set_sizes_and_strides(sizes, strides, 0);
    return;
  }
  if (impl.isWholePayload() && c10::IntArrayRef(sizes).equals(slot.sizes) &&
      c10::IntArrayRef(strides).equals(slot.strides)) {
    // Laid out as the payload it replaces: every alias and view reads the
    // same elements of it.
    slot.bind(result, sizes, strides, dtype);
    return;
  }
  // Shared with aliases or views, which must see the change as on CPU: the
  // tensor is resized as resize_ does (its payload grows, keeping its
  // elements, when the new size needs more), then the values are written.
  if (!tensor.sizes().equals(sizes)) {
    resizePayloadTensor(tensor, sizes, std::nullopt);
  }
  writeInto(tensor, result);
}

void bindPayload(const at::Tensor& tensor, py::handle payload) {
  auto& impl = payloadImpl(tensor);
  if (!impl.slot()->object) {
    TORCH_CHECK(
        tensor.storage_offset() == 0,
        "expected a tensor at storage offset 0 to set the payload of, but "
        "got offset ",
        tensor.storage_offset());
    impl.slot()->bind(
        payload, tensor.sizes(), tensor.strides(), tensor.scalar_type());
    return;
  }
  rebind(tensor, payload);
}

py::object materialize(const at::Tensor& tensor) {
  auto& impl = payloadImpl(tensor);
  const auto& slot = *impl.slot();
  TORCH_CHECK(
      static_cast<bool>(slot.object),
      "a tensor on ",
      tensor.device(),
      " has no payload: it was made by create_empty_tensor() and never given "
      "one (set_payload), or its storage was resized to 0 bytes");
  if (impl.isWholePayload()) {
    return slot.get();
  }
  TORCH_CHECK(
      view_fn != nullptr,
      "the ",
      c10::get_privateuse1_backend(),
      " backend has no as_strided function, so views of its tensors cannot "
      "be given to its kernels; register one with "
      "torch_acc.library.impl_payload(as_strided=...)");
  py::object whole = slot.get();
  if (view_fn_cpu && THPVariable_Check(whole.ptr())) {
    // What view_fn computes, without a Python call: a view is a payload for
    // each kernel it is given to.
    const auto& payload = THPVariable_Unpack(whole.ptr());
    return py::reinterpret_steal<py::object>(
        THPVariable_Wrap(payload.as_strided(
            tensor.sizes(),
            tensor.strides(),
            payload.storage_offset() + tensor.storage_offset())));
  }
  return py::handle(view_fn)(
      whole,
      py::tuple(py::cast(tensor.sizes().vec())),
      py::tuple(py::cast(tensor.strides().vec())),
      tensor.storage_offset());
}

void setCopyFunction(py::object fn) {
  TORCH_CHECK(copy_fn == nullptr, "copy_into is already set for this backend");
  copy_fn = fn.release().ptr();
}

void setViewFunction(py::object fn, bool cpu) {
  TORCH_CHECK(view_fn == nullptr, "as_strided is already set for this backend");
  view_fn = fn.release().ptr();
  view_fn_cpu = cpu;
}

} // namespace torch::acc
