#pragma once

#include <ATen/core/Tensor.h>

namespace torch::acc {

// A PrivateUse1 tensor with the given sizes (contiguous strides) and dtype
// whose storage holds no data, and whose payload is not set yet: the seed-style
// backends make such a tensor and then attach their device data to it.
at::Tensor createEmptyTensor(
    c10::IntArrayRef shape,
    c10::ScalarType dtype,
    c10::DeviceIndex device_index);

} // namespace torch::acc
