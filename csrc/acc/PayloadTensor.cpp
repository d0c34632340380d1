#include <torch/csrc/acc/PayloadTensor.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
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

int64_t tensorExtent(const at::Tensor& t) {
  return t.storage_offset() + layoutExtent(t.sizes(), t.strides());
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

// A memory event for torch.profiler(profile_memory=True), as an allocator
// reports one: `nbytes` more (or, negative, fewer) at `slot`, and the device's
// figures after it. Not once the interpreter finalizes: then the thread's
// profiler state may be gone (the main thread's thread-locals are destroyed
// before the slots that static destruction releases).
void reportToProfiler(
    const void* slot,
    c10::DeviceIndex device,
    int64_t nbytes,
    int64_t total) {
  if (Py_IsInitialized() && c10::memoryProfilingEnabled()) {
    c10::reportMemoryUsageToProfiler(
        const_cast<void*>(slot),
        nbytes,
        static_cast<size_t>(total),
        static_cast<size_t>(total),
        c10::Device(c10::DeviceType::PrivateUse1, device));
  }
}

void countAllocation(
    const void* slot,
    c10::DeviceIndex device,
    int64_t nbytes) {
  auto* c = memoryCounters(device);
  if (c == nullptr) {
    return;
  }
  constexpr auto relaxed = std::memory_order_relaxed;
  const auto total = c->bytes.fetch_add(nbytes, relaxed) + nbytes;
  raisePeak(c->peak_bytes, total);
  raisePeak(c->peak_count, c->count.fetch_add(1, relaxed) + 1);
  c->allocated_bytes.fetch_add(nbytes, relaxed);
  c->allocated_count.fetch_add(1, relaxed);
  reportToProfiler(slot, device, nbytes, total);
}

void countRelease(const void* slot, c10::DeviceIndex device, int64_t nbytes) {
  auto* c = memoryCounters(device);
  if (c == nullptr) {
    return;
  }
  constexpr auto relaxed = std::memory_order_relaxed;
  const auto total = c->bytes.fetch_sub(nbytes, relaxed) - nbytes;
  c->count.fetch_sub(1, relaxed);
  c->freed_bytes.fetch_add(nbytes, relaxed);
  c->freed_count.fetch_add(1, relaxed);
  reportToProfiler(slot, device, -nbytes, total);
}

} // namespace

PayloadSlot::~PayloadSlot() {
  if (object) {
    countRelease(this, device_, nbytes_);
  }
}

void PayloadSlot::bind(
    py::handle payload,
    c10::IntArrayRef new_sizes,
    c10::IntArrayRef new_strides,
    c10::ScalarType dtype) {
  if (object) {
    countRelease(this, device_, nbytes_);
  }
  object = OwnedPyObject(payload);
  if (new_sizes.data() != sizes.data()) { // Not a rebind in place.
    sizes.assign(new_sizes.begin(), new_sizes.end());
    strides.assign(new_strides.begin(), new_strides.end());
  }
  nbytes_ = layoutExtent(sizes, strides) *
      static_cast<int64_t>(c10::elementSize(dtype));
  countAllocation(this, device_, nbytes_);
  if (auto storage = storage_.lock()) {
    storage->set_nbytes(nbytes_);
  }
}

py::object PayloadSlot::get() const {
  return object.get();
}

void PayloadSlot::unbind() {
  if (!object) {
    return;
  }
  countRelease(this, device_, nbytes_);
  object.reset();
  nbytes_ = 0;
  if (auto storage = storage_.lock()) {
    storage->set_nbytes(0);
  }
}

std::vector<c10::intrusive_ptr<PayloadSlot>> PayloadSlot::memorySharers() {
  std::vector<c10::intrusive_ptr<PayloadSlot>> live;
  std::vector<c10::weak_intrusive_ptr<PayloadSlot>> kept;
  for (const auto& weak : shares_memory_with_) {
    if (auto slot = weak.lock()) {
      live.push_back(slot);
      kept.push_back(weak);
    }
  }
  shares_memory_with_ = std::move(kept);
  return live;
}

void PayloadSlot::shareMemory(
    const c10::intrusive_ptr<PayloadSlot>& a,
    const c10::intrusive_ptr<PayloadSlot>& b) {
  if (a == b) {
    return;
  }
  // Sharing is transitive: a view of a view of z reads z's memory too.
  auto group = a->memorySharers();
  group.push_back(a);
  for (const auto& slot : b->memorySharers()) {
    group.push_back(slot);
  }
  group.push_back(b);
  for (const auto& x : group) {
    for (const auto& y : group) {
      const bool known = x == y ||
          std::any_of(x->shares_memory_with_.begin(),
                      x->shares_memory_with_.end(),
                      [&](const auto& weak) { return weak.lock() == y; });
      if (!known) {
        x->shares_memory_with_.emplace_back(y);
      }
    }
  }
}

bool PayloadSlot::sharesMemory() const {
  return std::any_of(
      shares_memory_with_.begin(),
      shares_memory_with_.end(),
      [](const auto& weak) { return !weak.expired(); });
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

c10::Storage PayloadSlot::makeStorage() {
  TORCH_INTERNAL_ASSERT(
      !storage_.lock(), "a payload slot's storage is made only once");
  c10::Storage storage(
      c10::Storage::use_byte_size_t(),
      nbytes_,
      c10::DataPtr(nullptr, c10::Device(c10::DeviceType::PrivateUse1, device_)),
      /*allocator=*/nullptr,
      /*resizable=*/false);
  // Its data pointer is null. Asking the storage itself for a mutable one
  // raises c10's error, as for a FakeTensor's storage; the immutable one
  // stays readable, because Storage::is_alias_of reads it.
  storage.unsafeGetStorageImpl()->set_throw_on_mutable_data_ptr();
  storage_ = storage.getWeakStorageImpl();
  return storage;
}

bool PayloadTensorImpl::isWholePayload() const {
  return storage_offset() == 0 && sizes().equals(slot_->sizes) &&
      strides().equals(slot_->strides);
}

const char* PayloadTensorImpl::tensorimpl_type_name() const {
  return "PayloadTensorImpl";
}

namespace {

// The error of data pointer access on a payload tensor. Every kernel result
// needs it, so it is built once, when PrivateUse1 has its final name (it can
// be renamed only once).
std::string noDataMessage() {
  const auto build = [] {
    return c10::str(
        "tensors on ",
        c10::get_privateuse1_backend(),
        " have no data in memory: their data is a Python payload. Use .cpu() "
        "to get a tensor with data in memory, or torch_acc.payload() for the "
        "payload");
  };
  if (c10::is_privateuse1_backend_registered()) {
    static const std::string message = build();
    return message;
  }
  return build();
}

} // namespace

PayloadTensorImpl::PayloadTensorImpl(
    c10::Storage storage,
    caffe2::TypeMeta dtype,
    c10::intrusive_ptr<PayloadSlot> slot,
    bool payload_storage)
    : c10::TensorImpl(
          std::move(storage),
          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
          dtype),
      slot_(std::move(slot)),
      payload_storage_(payload_storage) {
  if (payload_storage_) {
    // c10 keeps the message of data pointer access with the release of a
    // tensor's storage; the payload storage is then put back, readable.
    auto kept = std::move(storage_);
    release_storage_and_set_meta_custom_data_ptr_error_msg_(noDataMessage());
    storage_ = std::move(kept);
    storage_access_should_throw_ = false;
  }
}

bool PayloadTensorImpl::has_storage() const {
  return !payload_storage_ && c10::TensorImpl::has_storage();
}

template <typename VariableVersion>
c10::intrusive_ptr<c10::TensorImpl> PayloadTensorImpl::shallowCopyAndDetach(
    VariableVersion&& version_counter,
    bool allow_tensor_metadata_change) const {
  auto impl = c10::make_intrusive<PayloadTensorImpl>(
      c10::Storage(storage()), dtype(), slot_, payload_storage_);
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
  payload_storage_ = src->payload_storage_;
  refresh_numel();
  refresh_contiguous();
}

namespace {

at::Tensor makeTensor(
    c10::Storage storage,
    c10::intrusive_ptr<PayloadSlot> slot,
    bool payload_storage,
    c10::ScalarType dtype,
    c10::IntArrayRef sizes,
    c10::IntArrayRef strides,
    int64_t storage_offset) {
  auto tensor = at::detail::make_tensor<PayloadTensorImpl>(
      std::move(storage),
      c10::scalarTypeToTypeMeta(dtype),
      std::move(slot),
      payload_storage);
  tensor.unsafeGetTensorImpl()->set_sizes_and_strides(
      sizes, strides, storage_offset);
  return tensor;
}

} // namespace

at::Tensor makePayloadTensor(
    c10::intrusive_ptr<PayloadSlot> slot,
    c10::ScalarType dtype,
    c10::IntArrayRef sizes,
    c10::IntArrayRef strides,
    int64_t storage_offset) {
  auto storage = slot->makeStorage();
  return makeTensor(
      std::move(storage),
      std::move(slot),
      /*payload_storage=*/true,
      dtype,
      sizes,
      strides,
      storage_offset);
}

at::Tensor makePayloadView(
    const at::Tensor& base,
    c10::ScalarType dtype,
    c10::IntArrayRef sizes,
    c10::IntArrayRef strides,
    int64_t storage_offset) {
  const auto& impl = payloadImpl(base);
  return makeTensor(
      impl.storage(),
      impl.slot(),
      impl.hasPayloadStorage(),
      dtype,
      sizes,
      strides,
      storage_offset);
}

void resizePayloadTensor(
    const at::Tensor& tensor,
    c10::IntArrayRef sizes,
    std::optional<c10::MemoryFormat> memory_format) {
  auto& impl = payloadImpl(tensor);
  for (const auto size : sizes) {
    TORCH_CHECK(
        size >= 0,
        "Trying to create tensor with negative dimension ",
        size,
        ": ",
        sizes);
  }
  if (tensor.sizes().equals(sizes) && !memory_format) {
    return; // As on CPU: the same size keeps the strides.
  }
  const auto strides = c10::DimVector(
      at::empty(sizes, tensor.options().device(c10::kMeta))
          .contiguous(memory_format.value_or(c10::MemoryFormat::Contiguous))
          .strides());
  const auto needed = layoutExtent(sizes, strides) == 0
      ? 0
      : tensor.storage_offset() + layoutExtent(sizes, strides);
  auto& slot = *impl.slot();
  const auto available = slot.extent();
  if (needed > available) {
    const GilForCall gil; // resize_ reaches this without the GIL
    TORCH_CHECK(
        !slot.sharesMemory(),
        "cannot resize a tensor on ",
        tensor.device(),
        " from ",
        tensor.sizes(),
        " to ",
        sizes,
        ": its payload shares memory with another tensor's (an element-size "
        "view and its base: view_as_real, view_as_complex, .real, .imag), and "
        "a grown payload would no longer share it (CPU grows the storage both "
        "read). Expected a tensor that has room for ",
        needed,
        " elements, but this one has room for ",
        available,
        "; pass an out= tensor of the result's shape");
    // A larger payload for every tensor on the slot, with the elements of the
    // old one where they were (as CPU's storage grows, keeping its bytes).
    auto grown = at::empty({needed}, tensor.options());
    if (available > 0) {
      const auto whole = makePayloadView(
          tensor, tensor.scalar_type(), slot.sizes, slot.strides, 0);
      grown.as_strided(slot.sizes, slot.strides, 0).copy_(whole);
    }
    const auto& fresh = *payloadImpl(grown).slot();
    slot.bind(fresh.get(), fresh.sizes, fresh.strides, tensor.scalar_type());
  }
  impl.set_sizes_and_strides(sizes, strides, tensor.storage_offset());
}

void resizePayloadStorage(const at::Tensor& tensor, int64_t nbytes) {
  auto& impl = payloadImpl(tensor);
  TORCH_CHECK(
      impl.hasPayloadStorage(),
      "expected a tensor with a payload storage to resize the storage of, but "
      "got a tensor of create_empty_tensor() on ",
      tensor.device());
  const auto itemsize = static_cast<int64_t>(tensor.element_size());
  TORCH_CHECK_VALUE(
      nbytes >= 0 && nbytes % itemsize == 0,
      "expected a storage size in bytes that is a non-negative multiple of "
      "the element size ",
      itemsize,
      " of a tensor on ",
      tensor.device(),
      ", but got ",
      nbytes);
  auto& slot = *impl.slot();
  if (nbytes == slot.nbytes()) {
    return;
  }
  if (nbytes == 0) {
    slot.unbind();
    return;
  }
  TORCH_CHECK(
      !slot.object,
      "cannot resize the storage of a tensor on ",
      tensor.device(),
      " from ",
      slot.nbytes(),
      " to ",
      nbytes,
      " bytes: its payload would have to keep its values. Expected a resize "
      "to 0 bytes, or from 0 bytes (which binds a new payload)");
  const auto fresh = at::empty({nbytes / itemsize}, tensor.options());
  const auto& made = *payloadImpl(fresh).slot();
  slot.bind(made.get(), made.sizes, made.strides, tensor.scalar_type());
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
