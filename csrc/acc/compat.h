#pragma once

// Differences between the torch releases this code supports (2.6 to 2.14),
// in one place. Everything else in csrc/acc is version-independent.

#include <torch/version.h>

#define TORCH_ACC_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||            \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// at::AcceleratorHooksInterface gained isBuilt()/isAvailable() in 2.7; before,
// PrivateUse1 availability was only known to the Python device module.
#define TORCH_ACC_HOOKS_HAVE_AVAILABILITY TORCH_ACC_TORCH_AT_LEAST(2, 7)

// DeviceGuardImplInterface::getStream() and exchangeStream() were noexcept up
// to 2.6; later releases let them throw. On the old interface a Python error
// there cannot propagate.
#define TORCH_ACC_STREAM_QUERIES_NOEXCEPT (!TORCH_ACC_TORCH_AT_LEAST(2, 7))
#if TORCH_ACC_STREAM_QUERIES_NOEXCEPT
#define TORCH_ACC_STREAM_NOEXCEPT noexcept
#else
#define TORCH_ACC_STREAM_NOEXCEPT
#endif

// torch.Generator(device=<PrivateUse1>) asks the hooks' getNewGenerator()
// from 2.7; 2.6 asks the generator registry of
// ATen/core/GeneratorForPrivateuseone.h instead.
#define TORCH_ACC_GENERATOR_REGISTRY (!TORCH_ACC_TORCH_AT_LEAST(2, 7))

// c10::DeviceAllocator, the allocator interface behind torch.accelerator's
// memory_allocated() and friends, is in 2.13 and not in 2.6 (added in 2.9;
// the releases between are not checked).
#define TORCH_ACC_HAVE_DEVICE_ALLOCATOR TORCH_ACC_TORCH_AT_LEAST(2, 9)

// detach()'s ADInplaceOrView kernel shallow-copies the backend kernel's result
// into a new TensorImpl in 2.6, which drops the result's Python object (a
// backend's tensor subclass); 2.13 keeps a result that the kernel made fresh
// (make_variable_non_differentiable_view's is_fresh_tensor). The releases
// between are not checked.
#define TORCH_ACC_DETACH_COPIES_FRESH_RESULT (!TORCH_ACC_TORCH_AT_LEAST(2, 7))

// torch.profiler traces PrivateUse1 through a kineto plugin that a backend
// registers with torch::profiler::impl::PrivateUse1ProfilerRegistry in 2.13
// (2.6 has neither, and times PrivateUse1 through its profiler stubs alone;
// the releases between are not checked). setup.py defines USE_KINETO where
// the wheel was built with kineto.
#if defined(USE_KINETO) && TORCH_ACC_TORCH_AT_LEAST(2, 13)
#define TORCH_ACC_PROFILER_KINETO_PLUGIN 1
#else
#define TORCH_ACC_PROFILER_KINETO_PLUGIN 0
#endif
