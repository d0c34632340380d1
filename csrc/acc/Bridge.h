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

// resize_ of a payload tensor, as on CPU: the tensor takes the new size with
// contiguous strides (or those of `memory_format`); its payload, which every
// alias and view shares, grows when the new size needs more elements than it
// has, keeping them.
void resizePayloadTensor(
    const at::Tensor& tensor,
    c10::IntArrayRef sizes,
    std::optional<c10::MemoryFormat> memory_format);

// The tensor with its conjugate and negative bits applied (a copy when it has
// any): the plain values a payload kernel computes with.
at::Tensor resolveBits(const at::Tensor& t);

// Sets the backend function `copy_into(dst, src)` that writes a payload into
// another (or returns a new one, for immutable payloads).
void setCopyFunction(py::object fn);

// CPU's overlap rules for `dst.copy_(src)` on one payload (ATen's copy_
// leaves a device it does not know to _copy_from before its checks): an error
// where CPU raises, or where CPU's answer depends on the order it copies.
void checkCopyOverlap(const at::Tensor& dst, const at::Tensor& src);

// Turns the comparison of every kernel result with the operator's meta
// function on or off; returns whether it was on.
bool setCheckKernels(bool enabled);

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

// Registers what a torch release lacks for autograd on PrivateUse1: the
// autograd fallback torch's own devices have, and a detach kernel where
// torch's loses what a Python backend's kernel returns (see compat.h).
void registerAutogradKernels();

} // namespace torch::acc
