#include <torch/csrc/acc/Allocator.h>

#include <torch/csrc/acc/Hooks.h>
#include <torch/csrc/acc/compat.h>

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

#include <utility>

namespace torch::acc {

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

} // namespace torch::acc
