#pragma once

#include <string>
#include <vector>

namespace torch::acc {

// Registers AutocastPrivateUse1 kernels for the aten operator overloads `ops`
// ("mm", "conv2d.padding"), with the cast policy CPU and CUDA autocast give
// their own lists:
// - "lower_precision_fp": floating-point device tensors are cast to the
//   autocast dtype (torch.get_autocast_dtype(<device>));
// - "fp32": they are cast to float32;
// - "promote": they are cast to the widest floating type among them.
// float64 tensors and tensors on other devices are left alone, and casts of
// leaf weights are cached, as at::autocast does. Overloads this torch does
// not have are skipped; returns the names registered.
std::vector<std::string> registerAutocastKernels(
    const std::vector<std::string>& ops,
    const std::string& policy);

} // namespace torch::acc
