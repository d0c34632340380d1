#pragma once

#include <torch/csrc/acc/PayloadTensor.h>

#include <ATen/core/dispatch/Dispatcher.h>

namespace torch::acc {

// The kernel bridge: C++ kernels that unwrap payload tensors, call a
// backend's Python function with payloads and plain Python values, and wrap
// the payloads it returns, with no Python tensor objects on the way.

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

// Binds `payload` to the whole-payload tensor `tensor`, whose sizes and
// strides become the payload's (in-place and out= results).
void rebind(const at::Tensor& tensor, py::handle payload);

// Sets the backend function `as_strided(payload, size, stride, storage_offset)`
// that makes the payload of a view.
void setViewFunction(py::object fn);

// Registers `fn` as the PrivateUse1 kernel of the aten operator `name`
// ("add.Tensor", "aten::mm"); kernels receive payloads and return payloads.
void registerKernel(const std::string& name, py::object fn);

// Registers the C++ view kernels (view, as_strided, transpose, slice, ...)
// for PrivateUse1: the result shares the payload of its base, and its
// metadata is computed directly for the common view operators, else by the
// operator's meta kernel.
void registerViewKernels();

// Installs the PrivateUse1 fallback for operators without a kernel: it calls
// `fn(op_name, overload_name, args, kwargs)` with tensors (not payloads).
void setFallback(py::object fn);

} // namespace torch::acc
