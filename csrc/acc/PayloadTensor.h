#pragma once

#include <c10/core/MemoryFormat.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/DimVector.h>
#include <torch/csrc/acc/Shutdown.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torch::acc {

namespace py = pybind11;

// Elements a payload of this layout spans (the extent of its element space).
int64_t layoutExtent(c10::IntArrayRef sizes, c10::IntArrayRef strides);

// Elements of storage a tensor's metadata reaches: its offset plus the extent
// of its layout.
int64_t tensorExtent(const at::Tensor& t);

// The device data of PrivateUse1 payload tensors: any Python object (a NumPy
// array, a JAX array, a handle to remote memory...), with the layout the
// object itself has. A tensor and its views and detached copies share one
// slot, the way CPU tensors share a storage: rebinding the payload of one is
// seen by all of them.
//
// A slot counts the bytes of its payload in its device's memory figures
// (payloadMemoryStats) while the payload is bound.
struct PayloadSlot final : c10::intrusive_ptr_target {
  explicit PayloadSlot(c10::DeviceIndex device) : device_(device) {}
  ~PayloadSlot() override;

  // Empty until a payload is bound. Set and read with the GIL held; released
  // on whichever thread drops the last tensor (see Shutdown.h).
  OwnedPyObject object;
  // The layout of `object` in elements (its own shape and strides). A tensor
  // whose sizes and strides are these, at offset 0, is the payload itself;
  // any other tensor on the slot is a view of it. Inline storage: a slot is
  // made for every kernel result, and most have few dimensions.
  c10::DimVector sizes;
  c10::DimVector strides;

  // A Python object that stands for this slot where PyTorch wants a storage
  // to tell which tensors share data (meta/fake tensor conversion); made on
  // first request.
  OwnedPyObject storage_token;
  // Records that the payloads of this slot and `other` share memory (an
  // element-size view and its base: view_as_real, view_as_complex), and so
  // does every live slot either already shares with. While one of them
  // lives, neither payload can grow (sharesMemory()): a new one would no
  // longer share that memory, where CPU grows the storage both tensors read.
  // Called with the GIL held, as is sharesMemory().
  static void shareMemory(
      const c10::intrusive_ptr<PayloadSlot>& a,
      const c10::intrusive_ptr<PayloadSlot>& b);
  bool sharesMemory() const;

  // A new payload storage for this slot (see PayloadTensorImpl), as large as
  // its payload; binding another payload keeps its size up to date. Made once,
  // when the slot's first tensor is.
  c10::Storage makeStorage();

  // Binds `payload` (a new reference is taken), of `dtype` with the given
  // layout.
  void bind(
      py::handle payload,
      c10::IntArrayRef sizes,
      c10::IntArrayRef strides,
      c10::ScalarType dtype);
  py::object get() const;
  // Releases the bound payload, if any: the slot then has none (and its
  // storage 0 bytes) until one is bound. Called with the GIL held.
  void unbind();

  // Elements the bound payload spans by its own layout (0 while none is).
  int64_t extent() const {
    return object ? layoutExtent(sizes, strides) : 0;
  }
  // Bytes the bound payload spans by its own layout (0 while none is).
  int64_t nbytes() const {
    return nbytes_;
  }

 private:
  // The live part of shares_memory_with_ (expired entries dropped).
  std::vector<c10::intrusive_ptr<PayloadSlot>> memorySharers();

  c10::DeviceIndex device_;
  int64_t nbytes_ = 0;
  // The storage makeStorage() made, whose size follows the payload's.
  c10::weak_intrusive_ptr<c10::StorageImpl> storage_{
      c10::intrusive_ptr<c10::StorageImpl>()};
  std::vector<c10::weak_intrusive_ptr<PayloadSlot>> shares_memory_with_;
};

// The memory figures of a device's payloads: the bytes of the payloads bound
// to live slots (each counted by its own layout's extent), and how many there
// are, as an allocator counts its allocations. A payload that shares memory
// with another (a NumPy view a kernel returned) counts in full.
struct PayloadMemoryStats {
  int64_t bytes = 0;
  int64_t peak_bytes = 0;
  int64_t allocated_bytes = 0; // Since the last accumulated reset.
  int64_t freed_bytes = 0;
  int64_t count = 0;
  int64_t peak_count = 0;
  int64_t allocated_count = 0;
  int64_t freed_count = 0;
};

PayloadMemoryStats payloadMemoryStats(c10::DeviceIndex device);
// The figures by torch's flat statistic names ("allocated_bytes.all.current",
// ...), as torch.cuda.memory_stats() names them. Nothing is cached, so the
// reserved and active figures are the allocated ones.
std::vector<std::pair<std::string, int64_t>> payloadMemoryFigures(
    c10::DeviceIndex device);
// Peaks become the current figures.
void resetPayloadPeakMemoryStats(c10::DeviceIndex device);
// The allocated and freed totals start again from zero.
void resetPayloadAccumulatedMemoryStats(c10::DeviceIndex device);

// A PrivateUse1 TensorImpl whose device data is a payload slot.
//
// It holds the slot's payload storage: one c10::StorageImpl per slot, shared
// by every tensor on the slot (views, detached copies), as large as the
// payload, without data. It answers what PyTorch asks of a storage without
// reading data: which tensors share it (Tensor::is_alias_of, which DDP's
// reducer asks) and its size (untyped_storage().nbytes()). Yet has_storage()
// is false: for ATen and torch's Python the tensor is a PrivateUse1 tensor
// without storage, as XLA's are (TensorIterator takes no data pointers of it,
// torch.save and copy.deepcopy go through its values), and data_ptr() raises
// an error that names the device and suggests .cpu().
//
// Tensors of create_empty_tensor() (the seed's tensor-level kernels) have a
// storage of their own instead, of 0 bytes, whose data pointer is null.
class PayloadTensorImpl final : public c10::TensorImpl {
 public:
  // `payload_storage`: whether `storage` is the slot's payload storage.
  PayloadTensorImpl(
      c10::Storage storage,
      caffe2::TypeMeta dtype,
      c10::intrusive_ptr<PayloadSlot> slot,
      bool payload_storage);

  const c10::intrusive_ptr<PayloadSlot>& slot() const {
    return slot_;
  }

  // Whether this tensor is its slot's payload itself rather than a view of it.
  bool isWholePayload() const;

  // Whether the storage is the slot's payload storage (not the storage of a
  // create_empty_tensor() tensor).
  bool hasPayloadStorage() const {
    return payload_storage_;
  }

  // False for a payload storage (see above).
  bool has_storage() const override;

  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(
      const c10::VariableVersion& version_counter,
      bool allow_tensor_metadata_change) const override;
  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(
      c10::VariableVersion&& version_counter,
      bool allow_tensor_metadata_change) const override;
  void shallow_copy_from(
      const c10::intrusive_ptr<c10::TensorImpl>& impl) override;

 private:
  const char* tensorimpl_type_name() const override;

  template <typename VariableVersion>
  c10::intrusive_ptr<c10::TensorImpl> shallowCopyAndDetach(
      VariableVersion&& version_counter,
      bool allow_tensor_metadata_change) const;

  c10::intrusive_ptr<PayloadSlot> slot_;
  bool payload_storage_;
};

// A payload tensor on `slot`, a new slot with a payload bound, with the given
// metadata: the slot's first tensor.
at::Tensor makePayloadTensor(
    c10::intrusive_ptr<PayloadSlot> slot,
    c10::ScalarType dtype,
    c10::IntArrayRef sizes,
    c10::IntArrayRef strides,
    int64_t storage_offset);

// A tensor on the slot and storage of `base`, with the given metadata: a view
// of it.
at::Tensor makePayloadView(
    const at::Tensor& base,
    c10::ScalarType dtype,
    c10::IntArrayRef sizes,
    c10::IntArrayRef strides,
    int64_t storage_offset);

// resize_ of a payload tensor, as on CPU: the tensor takes the new size with
// contiguous strides (or those of `memory_format`); its payload, which every
// alias and view shares, grows when the new size needs more elements than it
// has, keeping them.
void resizePayloadTensor(
    const at::Tensor& tensor,
    c10::IntArrayRef sizes,
    std::optional<c10::MemoryFormat> memory_format);

// untyped_storage().resize_(nbytes) of a payload tensor, as FSDP frees and
// reallocates the memory of its unsharded parameters: 0 releases the payload
// of every tensor on the slot; from 0, a new payload of `nbytes` (its values
// undefined, as a grown storage's) is bound, which those tensors then read.
// Any other resize is refused with an error: it would have to keep values.
// Called with the GIL held.
void resizePayloadStorage(const at::Tensor& tensor, int64_t nbytes);

// The payload impl of `tensor`, or nullptr when it is not a payload tensor.
PayloadTensorImpl* maybePayloadImpl(const at::Tensor& tensor);
// The payload impl of `tensor`; a clear error when it is not a payload tensor.
PayloadTensorImpl& payloadImpl(const at::Tensor& tensor);

} // namespace torch::acc
