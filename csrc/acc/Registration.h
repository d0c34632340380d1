#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DispatchKey.h>
#include <torch/library.h>

#include <optional>
#include <string>

namespace torch::acc {

// Kernel registration shared by the kernel bridge, the view kernels and the
// autocast kernels.

// A new IMPL library of namespace `ns` ("_" for fallbacks) for `key`, alive
// until exit like the kernels it registers.
torch::Library& newLibrary(
    const char* ns = "aten",
    c10::DispatchKey key = c10::DispatchKey::PrivateUse1);

// `name` ("add.Tensor", "aten::mm") with its namespace: "aten::add.Tensor".
std::string qualifiedAtenName(const std::string& name);

// The aten operator overload `name` ("add.Tensor", "aten::mm"), or nullopt
// where this torch release has none.
std::optional<c10::OperatorHandle> findAtenOp(const std::string& name);

// Sets PrivateUse1's entries of the ATen DispatchStubs that operators consult
// outside the dispatcher, so that they reach the backend's kernels: the
// backend choice of scaled_dot_product_attention (_fused_sdp_choice_stub) is
// the backend's kernel of aten::_fused_sdp_choice where it has one, else the
// math path (as with no entry). Once per process.
void registerDispatchStubs();

} // namespace torch::acc
