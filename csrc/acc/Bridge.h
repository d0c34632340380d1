#pragma once

#include <torch/csrc/acc/Payload.h>

#include <ATen/core/dispatch/Dispatcher.h>

namespace torch::acc {

// The kernel bridge: C++ kernels that unwrap payload tensors, call a
// backend's Python function with payloads and plain Python values, and wrap
// the payloads it returns, with no Python tensor objects on the way (payload
// objects: Payload.h; views, which never call Python: Views.h).

// The tensor with its conjugate and negative bits applied (a copy when it has
// any): the plain values a payload kernel computes with.
at::Tensor resolveBits(const at::Tensor& t);

// CPU's overlap rules for `dst.copy_(src)` on one payload (ATen's copy_
// leaves a device it does not know to _copy_from before its checks): an error
// where CPU raises, or where CPU's answer depends on the order it copies.
void checkCopyOverlap(const at::Tensor& dst, const at::Tensor& src);

// Turns the comparison of every kernel result with the operator's meta
// function on or off; returns whether it was on.
bool setCheckKernels(bool enabled);

// Registers `fn` as the PrivateUse1 kernel of the aten operator `name`
// ("add.Tensor", "aten::mm"); kernels receive payloads and return payloads.
// With `cpu_passthrough`, `fn` declares that it runs CPU's kernel of the
// operator on payloads that are CPU tensors: the bridge then does so itself,
// without calling it, unless the operator takes a generator.
void registerKernel(
    const std::string& name,
    py::object fn,
    bool cpu_passthrough = false);

// Installs the PrivateUse1 fallback for operators without a kernel: it calls
// `fn(op_name, overload_name, args, kwargs)` with tensors (not payloads).
void setFallback(py::object fn);

} // namespace torch::acc
