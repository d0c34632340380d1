#include <torch/csrc/acc/EmptyTensor.h>

#include <torch/csrc/acc/PayloadTensor.h>

#include <c10/core/impl/DeviceGuardImplInterface.h>

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
  const c10::Device device(c10::DeviceType::PrivateUse1, device_index);
  if (c10::impl::hasDeviceGuardImpl(device.type())) {
    const auto count =
        c10::impl::getDeviceGuardImpl(device.type())->deviceCount();
    TORCH_CHECK_VALUE(
        device_index >= 0 && device_index < count,
        "expected a device index in [0, ",
        static_cast<int>(count),
        ") for ",
        device.type(),
        ", but got ",
        static_cast<int>(device_index));
  } else {
    TORCH_CHECK_VALUE(
        device_index >= 0,
        "expected a non-negative device index, but got ",
        static_cast<int>(device_index));
  }
  c10::Storage storage(
      c10::Storage::use_byte_size_t(),
      0,
      c10::DataPtr(nullptr, device),
      /*allocator=*/nullptr,
      /*resizable=*/false);
  auto tensor = at::detail::make_tensor<PayloadTensorImpl>(
      std::move(storage),
      c10::scalarTypeToTypeMeta(dtype),
      c10::make_intrusive<PayloadSlot>());
  tensor.unsafeGetTensorImpl()->set_sizes_contiguous(shape);
  return tensor;
}

} // namespace torch::acc
