#pragma once

namespace torch::acc {

// The C++ kernels of PrivateUse1 views and metadata: they take no GIL and call
// no Python, except resize_ when the payload must grow (a new payload from the
// backend). A view shares its base's payload; only its metadata is computed.

// Registers the C++ view kernels (view, as_strided, transpose, slice, ...)
// for PrivateUse1: the result shares the payload of its base, and its
// metadata is computed directly for the common view operators, else by the
// operator's meta kernel; also the in-place view operators, view(dtype) and
// resize_.
void registerViewKernels();

// Registers what a torch release lacks for autograd on PrivateUse1: the
// autograd fallback torch's own devices have, and a detach kernel where
// torch's loses what a Python backend's kernel returns (see compat.h).
void registerAutogradKernels();

} // namespace torch::acc
