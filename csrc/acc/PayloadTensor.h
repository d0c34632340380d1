#pragma once

#include <c10/core/SafePyObject.h>
#include <c10/core/TensorImpl.h>

#include <optional>

namespace torch::acc {

// The device data of a PrivateUse1 payload tensor: any Python object
// (a NumPy array, a JAX array, a handle to remote memory...). A tensor and its
// shallow copies (detach(), autograd's saved and non-differentiable views)
// share one slot, so rebinding the payload of one is seen by all of them.
struct PayloadSlot final : c10::intrusive_ptr_target {
  // Empty until a payload is set. Set and read with the GIL held; released
  // through the interpreter, which takes the GIL (c10::SafePyObject).
  std::optional<c10::SafePyObject> object;
};

// A PrivateUse1 TensorImpl whose device data is a payload slot.
class PayloadTensorImpl final : public c10::TensorImpl {
 public:
  PayloadTensorImpl(
      c10::Storage storage,
      caffe2::TypeMeta dtype,
      c10::intrusive_ptr<PayloadSlot> slot);

  const c10::intrusive_ptr<PayloadSlot>& slot() const {
    return slot_;
  }

  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(
      const c10::VariableVersion& version_counter,
      bool allow_tensor_metadata_change) const override;
  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(
      c10::VariableVersion&& version_counter,
      bool allow_tensor_metadata_change) const override;
  void shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl)
      override;

 private:
  template <typename VariableVersion>
  c10::intrusive_ptr<c10::TensorImpl> shallowCopyAndDetach(
      VariableVersion&& version_counter,
      bool allow_tensor_metadata_change) const;

  c10::intrusive_ptr<PayloadSlot> slot_;
};

// Makes PrivateUse1's allocator one that holds no memory, unless the device
// already has an allocator. A Python backend keeps its data in payloads, so
// `torch.UntypedStorage(n, device=...)` with n > 0 raises an error that says so
// (instead of PyTorch dereferencing a missing allocator).
void registerPayloadAllocator();

// The payload impl of `tensor`; a clear error when it is not a payload tensor.
PayloadTensorImpl& payloadImpl(const at::Tensor& tensor);

} // namespace torch::acc
