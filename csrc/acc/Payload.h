#pragma once

#include <torch/csrc/acc/PayloadTensor.h>
#include <torch/csrc/utils/numpy_stub.h>

#include <optional>

namespace torch::acc {

// Payload objects: the Python object that is a payload tensor's device data,
// read (its sizes, dtype and strides), wrapped, bound to tensors and made into
// the payload of a view, through the backend's payload functions.

// A payload's sizes, dtype and strides: those of a torch.Tensor payload (a
// backend that keeps CPU tensors, say); a NumPy array's, read through NumPy's
// C API (every kernel result is one for the NumPy backend, and the attributes
// make a tuple per field); else its `shape`, `dtype` and `strides` (bytes,
// NumPy-style; contiguous when it has none).
class PayloadFields {
 public:
  explicit PayloadFields(py::handle payload);
  c10::DimVector sizes() const;
  // The payload's shape, or nullopt when it does not say (an object without
  // a `shape`, or with None); a tensor and a NumPy array always say.
  std::optional<c10::DimVector> maybeSizes() const;
  c10::ScalarType dtype() const;
  // The payload's dtype, or nullopt when it does not say.
  std::optional<c10::ScalarType> maybeDtype() const;
  // Strides in elements: the payload's own, else contiguous.
  c10::DimVector strides(c10::IntArrayRef sizes, c10::ScalarType dtype) const;
  // The payload's strides in elements, or nullopt when it does not say. A
  // payload without elements has no layout to keep (NumPy's strides are then
  // zeros): it is contiguous, as torch's empty tensors are.
  std::optional<c10::DimVector> maybeStrides(
      c10::IntArrayRef sizes,
      c10::ScalarType dtype) const;

 private:
  bool describesItself() const;
  // The attribute `name`, or nullopt when it is missing or None.
  std::optional<py::object> maybeAttr(PyObject* name) const;
  py::handle payload_;
  const at::Tensor* tensor_;
#ifdef USE_NUMPY
  PyArrayObject* array_ = nullptr;
#endif
};

// A payload tensor on device `device_index` made from a Python payload.
// Missing sizes and dtype come from `payload.shape` / `payload.dtype`; missing
// strides from `payload.strides` (bytes, NumPy-style) or else contiguous. A
// torch.Tensor payload gives its own metadata.
at::Tensor wrap(
    py::handle payload,
    c10::DeviceIndex device_index,
    std::optional<c10::IntArrayRef> sizes = std::nullopt,
    std::optional<c10::ScalarType> dtype = std::nullopt,
    std::optional<c10::IntArrayRef> strides = std::nullopt);

// The ints of a Python sequence (`what` names it in the error); items may be
// any objects with __index__, but not floats.
c10::DimVector toInts(py::handle seq, const char* what);

// The payload of `tensor` as the backend's kernels see it: the slot's payload
// for the whole payload, else what the backend's as_strided function makes of
// it for this view.
py::object materialize(const at::Tensor& tensor);

// The ScalarType of a payload's `dtype` attribute (a torch.dtype, a NumPy
// dtype, or anything whose str() is a dtype name such as "float32").
c10::ScalarType scalarTypeOf(py::handle dtype);

// Binds `payload` (of the tensor's dtype), what a kernel returned for a
// tensor it mutates (in-place and out= results), to `tensor`, with CPU's
// semantics for every tensor sharing its payload: when none does, the payload
// replaces the old one and the tensor takes its layout; else the tensor is
// resized as resize_ does and the values are written into its payload
// (through the backend's copy_into), so that aliases and views see them.
void rebind(const at::Tensor& tensor, py::handle payload);

// set_payload(): binds the first payload of a tensor made without one
// (create_empty_tensor), or rebinds as rebind() does.
void bindPayload(const at::Tensor& tensor, py::handle payload);

// Sets the backend function `copy_into(dst, src)` that writes a payload into
// another (or returns a new one, for immutable payloads).
void setCopyFunction(py::object fn);

// Sets the backend function `as_strided(payload, size, stride, storage_offset)`
// that makes the payload of a view. `cpu`: `fn` is CPU's as_strided on
// payloads that are CPU tensors (library.cpu_as_strided), which the core then
// runs itself for such payloads, without calling `fn`.
void setViewFunction(py::object fn, bool cpu = false);

} // namespace torch::acc
