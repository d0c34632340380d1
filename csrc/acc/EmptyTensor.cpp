#include <torch/csrc/acc/EmptyTensor.h>

#include <torch/csrc/acc/DeviceGuard.h>
#include <torch/csrc/acc/PayloadTensor.h>

namespace torch::acc {

at::Tensor createEmptyTensor(
    c10::IntArrayRef shape,
    c10::ScalarType dtype,
    c10::DeviceIndex device_index) {
  for (const auto size : shape) {
    TORCH_CHECK_VALUE(
        size >= 0,
        "expected non-negative sizes for create_empty_tensor(), but got ",
        shape);
  }
  const c10::Device device(
      c10::DeviceType::PrivateUse1, checkDeviceIndex(device_index));
  c10::Storage storage(
      c10::Storage::use_byte_size_t(),
      0,
      c10::DataPtr(nullptr, device),
      /*allocator=*/nullptr,
      /*resizable=*/false);
  auto tensor = at::detail::make_tensor<PayloadTensorImpl>(
      std::move(storage),
      c10::scalarTypeToTypeMeta(dtype),
      c10::make_intrusive<PayloadSlot>(device.index()),
      /*payload_storage=*/false);
  tensor.unsafeGetTensorImpl()->set_sizes_contiguous(shape);
  return tensor;
}

} // namespace torch::acc
