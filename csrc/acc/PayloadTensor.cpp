#include <torch/csrc/acc/PayloadTensor.h>

#include <torch/csrc/acc/Hooks.h>

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

#include <array>
#include <atomic>
#include <limits>
#include <typeinfo>

namespace torch::acc {

int64_t layoutExtent(c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) {
      return 0;
    }
    last += (sizes[d] - 1) * strides[d];
  }
  return last + 1;
}

namespace {

// The memory figures of one device, updated without a lock by whichever
// thread binds or drops a payload.
struct MemoryCounters {
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> peak_bytes{0};
  std::atomic<int64_t> allocated_bytes{0};
  std::atomic<int64_t> freed_bytes{0};
  std::atomic<int64_t> count{0};
  std::atomic<int64_t> peak_count{0};
  std::atomic<int64_t> allocated_count{0};
  std::atomic<int64_t> freed_count{0};
};

void raisePeak(std::atomic<int64_t>& peak, int64_t value) {
  auto seen = peak.load(std::memory_order_relaxed);
  while (seen < value &&
         !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

// The counters of every possible device index; nullptr for an index no
// device has.
MemoryCounters* memoryCounters(c10::DeviceIndex device) {
  constexpr auto kDevices =
      static_cast<size_t>(std::numeric_limits<c10::DeviceIndex>::max()) + 1;
  // Never destroyed: slots die during static destruction too.
  static auto* counters = new std::array<MemoryCounters, kDevices>();
  return device >= 0 ? &(*counters)[static_cast<size_t>(device)] : nullptr;
}

void countAllocation(c10::DeviceIndex device, int64_t nbytes) {
  auto* c = memoryCounters(device);
  if (c == nullptr) {
    return;
  }
  constexpr auto relaxed = std::memory_order_relaxed;
  raisePeak(c->peak_bytes, c->bytes.fetch_add(nbytes, relaxed) + nbytes);
  raisePeak(c->peak_count, c->count.fetch_add(1, relaxed) + 1);
  c->allocated_bytes.fetch_add(nbytes, relaxed);
  c->allocated_count.fetch_add(1, relaxed);
}

void countRelease(c10::DeviceIndex device, int64_t nbytes) {
  auto* c = memoryCounters(device);
  if (c == nullptr) {
    return;
  }
  constexpr auto relaxed = std::memory_order_relaxed;
  c->bytes.fetch_sub(nbytes, relaxed);
  c->count.fetch_sub(1, relaxed);
  c->freed_bytes.fetch_add(nbytes, relaxed);
  c->freed_count.fetch_add(1, relaxed);
}

} // namespace

PayloadSlot::~PayloadSlot() {
  if (object) {
    countRelease(device_, nbytes_);
  }
}

void PayloadSlot::bind(
    py::handle payload,
    c10::IntArrayRef new_sizes,
    c10::IntArrayRef new_strides,
    c10::ScalarType dtype) {
  if (object) {
    countRelease(device_, nbytes_);
  }
  object = OwnedPyObject(payload);
  if (new_sizes.data() != sizes.data()) { // Not a rebind in place.
    sizes.assign(new_sizes.begin(), new_sizes.end());
    strides.assign(new_strides.begin(), new_strides.end());
  }
  nbytes_ = layoutExtent(sizes, strides) *
      static_cast<int64_t>(c10::elementSize(dtype));
  countAllocation(device_, nbytes_);
}

py::object PayloadSlot::get() const {
  return object.get();
}

PayloadMemoryStats payloadMemoryStats(c10::DeviceIndex device) {
  PayloadMemoryStats stats;
  if (const auto* c = memoryCounters(device)) {
    stats.bytes = c->bytes.load();
    stats.peak_bytes = c->peak_bytes.load();
    stats.allocated_bytes = c->allocated_bytes.load();
    stats.freed_bytes = c->freed_bytes.load();
    stats.count = c->count.load();
    stats.peak_count = c->peak_count.load();
    stats.allocated_count = c->allocated_count.load();
    stats.freed_count = c->freed_count.load();
  }
  return stats;
}

std::vector<std::pair<std::string, int64_t>> payloadMemoryFigures(
    c10::DeviceIndex device) {
  const auto stats = payloadMemoryStats(device);
  std::vector<std::pair<std::string, int64_t>> figures;
  const auto add = [&](const char* name,
                       int64_t current,
                       int64_t peak,
                       int64_t allocated,
                       int64_t freed) {
    const std::string prefix = c10::str(name, ".all.");
    figures.emplace_back(prefix + "current", current);
    figures.emplace_back(prefix + "peak", peak);
    figures.emplace_back(prefix + "allocated", allocated);
    figures.emplace_back(prefix + "freed", freed);
  };
  for (const char* name :
       {"allocated_bytes",
        "reserved_bytes",
        "active_bytes",
        "requested_bytes"}) {
    add(name,
        stats.bytes,
        stats.peak_bytes,
        stats.allocated_bytes,
        stats.freed_bytes);
  }
  for (const char* name : {"allocation", "active", "segment"}) {
    add(name,
        stats.count,
        stats.peak_count,
        stats.allocated_count,
        stats.freed_count);
  }
  return figures;
}

void resetPayloadPeakMemoryStats(c10::DeviceIndex device) {
  if (auto* c = memoryCounters(device)) {
    c->peak_bytes = c->bytes.load();
    c->peak_count = c->count.load();
  }
}

void resetPayloadAccumulatedMemoryStats(c10::DeviceIndex device) {
  if (auto* c = memoryCounters(device)) {
    c->allocated_bytes = 0;
    c->freed_bytes = 0;
    c->allocated_count = 0;
    c->freed_count = 0;
  }
}

namespace {

// The error of storage and data pointer access on a payload tensor. Every
// kernel result needs it, so it is built once, when PrivateUse1 has its final
// name (it can be renamed only once).
std::string noStorageMessage() {
  const auto build = [] {
    return c10::str(
        "tensors on ",
        c10::get_privateuse1_backend(),
        " have no storage: their data is a Python payload. Use .cpu() to get a "
        "tensor with storage, or torch_acc.payload() for the payload");
  };
  if (c10::is_privateuse1_backend_registered()) {
    static const std::string message = build();
    return message;
  }
  return build();
}

} // namespace

PayloadTensorImpl::PayloadTensorImpl(
    caffe2::TypeMeta dtype,
    c10::Device device,
    c10::intrusive_ptr<PayloadSlot> slot)
    : c10::TensorImpl(
          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
          dtype,
          device),
      slot_(std::move(slot)) {
  release_storage_and_set_meta_custom_data_ptr_error_msg_(noStorageMessage());
}

bool PayloadTensorImpl::isWholePayload() const {
  return storage_offset() == 0 && sizes().equals(slot_->sizes) &&
      strides().equals(slot_->strides);
}

const char* PayloadTensorImpl::tensorimpl_type_name() const {
  return "PayloadTensorImpl";
}

PayloadTensorImpl::PayloadTensorImpl(
    c10::Storage storage,
    caffe2::TypeMeta dtype,
    c10::intrusive_ptr<PayloadSlot> slot)
    : c10::TensorImpl(
          std::move(storage),
          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
          dtype),
      slot_(std::move(slot)) {}

template <typename VariableVersion>
c10::intrusive_ptr<c10::TensorImpl> PayloadTensorImpl::shallowCopyAndDetach(
    VariableVersion&& version_counter,
    bool allow_tensor_metadata_change) const {
  auto impl = has_storage()
      ? c10::make_intrusive<PayloadTensorImpl>(
            c10::Storage(storage()), dtype(), slot_)
      : c10::make_intrusive<PayloadTensorImpl>(dtype(), device(), slot_);
  copy_tensor_metadata(
      /*src_impl=*/this,
      /*dest_impl=*/impl.get(),
      /*version_counter=*/std::forward<VariableVersion>(version_counter),
      /*allow_tensor_metadata_change=*/allow_tensor_metadata_change);
  impl->refresh_numel();
  impl->refresh_contiguous();
  return impl;
}

c10::intrusive_ptr<c10::TensorImpl> PayloadTensorImpl::shallow_copy_and_detach(
    const c10::VariableVersion& version_counter,
    bool allow_tensor_metadata_change) const {
  return shallowCopyAndDetach(version_counter, allow_tensor_metadata_change);
}

c10::intrusive_ptr<c10::TensorImpl> PayloadTensorImpl::shallow_copy_and_detach(
    c10::VariableVersion&& version_counter,
    bool allow_tensor_metadata_change) const {
  return shallowCopyAndDetach(
      std::move(version_counter), allow_tensor_metadata_change);
}

void PayloadTensorImpl::shallow_copy_from(
    const c10::intrusive_ptr<c10::TensorImpl>& impl) {
  auto* src = dynamic_cast<PayloadTensorImpl*>(impl.get());
  TORCH_CHECK(
      src != nullptr,
      "expected a payload tensor to copy metadata from, but got one with "
      "dispatch keys ",
      impl->key_set());
  copy_tensor_metadata(
      /*src_impl=*/src,
      /*dest_impl=*/this,
      /*version_counter=*/version_counter(),
      /*allow_tensor_metadata_change=*/allow_tensor_metadata_change());
  slot_ = src->slot_;
  refresh_numel();
  refresh_contiguous();
}

namespace {

#if TORCH_ACC_HAVE_DEVICE_ALLOCATOR
using AllocatorBase = c10::DeviceAllocator;
#else
using AllocatorBase = c10::Allocator;
#endif

// It is also the device allocator that torch.accelerator's memory functions
// ask: its figures are those of the hooks (the backend's own, or else its
// live payloads').
class PayloadAllocator final : public AllocatorBase {
 public:
  c10::DataPtr allocate(size_t n) override {
    const c10::Device device(c10::DeviceType::PrivateUse1, 0);
    TORCH_CHECK(
        n == 0,
        "cannot allocate ",
        n,
        " bytes of storage on ",
        c10::get_privateuse1_backend(),
        ": its device data lives in Python payloads, not in storages; "
        "use .cpu() to get a tensor with storage");
    return c10::DataPtr(nullptr, device);
  }

  void copy_data(void* dest, const void* src, std::size_t count)
      const override {
    TORCH_CHECK(
        count == 0,
        "cannot copy storage bytes on ",
        c10::get_privateuse1_backend(),
        ": it has no storage memory");
  }

#if TORCH_ACC_HAVE_DEVICE_ALLOCATOR
  bool initialized() override {
    return true;
  }

  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {
    if (const auto* hooks = pythonHooks()) {
      hooks->emptyCache();
    }
  }

  // Payloads are Python objects whose lifetime Python manages; no storage of
  // ours is reused behind a stream's back.
  void recordStream(const c10::DataPtr& /*ptr*/, c10::Stream /*stream*/)
      override {}

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(
      c10::DeviceIndex device) override {
    const auto* hooks = pythonHooks();
    return hooks ? hooks->memoryStats(device)
                 : c10::CachingDeviceAllocator::DeviceStats();
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    if (const auto* hooks = pythonHooks()) {
      hooks->resetAccumulatedMemoryStats(device);
    }
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    if (const auto* hooks = pythonHooks()) {
      hooks->resetPeakMemoryStats(device);
    }
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    const auto* hooks = pythonHooks();
    TORCH_CHECK_NOT_IMPLEMENTED(
        hooks != nullptr,
        "the hooks of ",
        c10::get_privateuse1_backend(),
        " report no free and total memory");
    return hooks->memGetInfo(device);
  }
#endif
};

} // namespace

void registerPayloadAllocator() {
  if (c10::GetAllocator(c10::DeviceType::PrivateUse1) == nullptr) {
    // A static: the allocator table keeps a raw pointer until exit.
    static PayloadAllocator allocator;
    c10::SetAllocator(c10::DeviceType::PrivateUse1, &allocator);
  }
}

at::Tensor makePayloadTensor(
    c10::intrusive_ptr<PayloadSlot> slot,
    c10::ScalarType dtype,
    c10::DeviceIndex device_index,
    c10::IntArrayRef sizes,
    c10::IntArrayRef strides,
    int64_t storage_offset) {
  auto tensor = at::detail::make_tensor<PayloadTensorImpl>(
      c10::scalarTypeToTypeMeta(dtype),
      c10::Device(c10::DeviceType::PrivateUse1, device_index),
      std::move(slot));
  tensor.unsafeGetTensorImpl()->set_sizes_and_strides(
      sizes, strides, storage_offset);
  return tensor;
}

PayloadTensorImpl* maybePayloadImpl(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.is_privateuseone()) {
    return nullptr;
  }
  // The class is final, so comparing the dynamic type is exact, and cheaper
  // than a dynamic_cast on a path every kernel argument takes.
  auto* impl = tensor.unsafeGetTensorImpl();
  return typeid(*impl) == typeid(PayloadTensorImpl)
      ? static_cast<PayloadTensorImpl*>(impl)
      : nullptr;
}

PayloadTensorImpl& payloadImpl(const at::Tensor& tensor) {
  auto* impl = maybePayloadImpl(tensor);
  TORCH_CHECK_TYPE(
      impl != nullptr,
      "expected a payload tensor (a tensor of the Python backend ",
      c10::get_privateuse1_backend(),
      "), but got a tensor on ",
      tensor.device());
  return *impl;
}

} // namespace torch::acc
