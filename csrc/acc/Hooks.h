#pragma once

#include <torch/csrc/acc/PythonMethods.h>
#include <torch/csrc/acc/compat.h>

#include <ATen/detail/PrivateUse1HooksInterface.h>
#if TORCH_ACC_HAVE_DEVICE_ALLOCATOR
#include <c10/core/CachingDeviceAllocator.h>
#endif

#include <mutex>
#include <unordered_map>

namespace torch::acc {

// The Python base class `PrivateUse1Hooks`. A backend subclasses it and
// defines any of the methods named in `Hooks::kMethods`.
struct PythonHooks {
  virtual ~PythonHooks() = default;
};

// PrivateUse1's at::PrivateUse1HooksInterface, forwarding to a Python object.
//
// Defaults for what the object does not define: the backend is built and
// available, every device has a primary context (a Python backend has no
// context to create lazily), init() does nothing, and device queries
// (count, current device) go to PrivateUse1's device guard, so that hooks and
// guard never disagree. Generators fail with a message naming the method to
// define.
//
// Generators: `get_new_generator(device_index)` returns a Python object that
// holds the state of a new generator (see PythonGeneratorImpl). The default
// generator of each device is made by it on first use and lives until exit.
//
// Pinned memory: a Python backend copies from any host memory, so the pinned
// allocator hands out plain CPU memory and records it, so that is_pinned() is
// true exactly for what it handed out (or what `is_pinned_ptr` recognizes).
//
// Memory figures (the device allocator behind torch.accelerator.memory_*):
// `memory_stats(device_index)` returns a dict of torch's flat statistic names
// ("allocated_bytes.all.current": bytes, ...), with `reset_peak_memory_stats`,
// `reset_accumulated_memory_stats`, `empty_cache` and `mem_get_info` beside
// it. A backend that defines none reports the bytes of its live payloads
// (payloadMemoryStats), and its resets reset those figures.
class Hooks final : public at::PrivateUse1HooksInterface {
 public:
  enum Method : size_t {
    kIsBuilt,
    kIsAvailable,
    kHasPrimaryContext,
    kInit,
    kIsPinnedPtr,
    kGetNewGenerator,
    kMemoryStats,
    kResetPeakMemoryStats,
    kResetAccumulatedMemoryStats,
    kEmptyCache,
    kMemGetInfo,
    kNumMethods,
  };
  static constexpr std::array<const char*, kNumMethods> kMethods = {
      "is_built",
      "is_available",
      "has_primary_context",
      "init",
      "is_pinned_ptr",
      "get_new_generator",
      "memory_stats",
      "reset_peak_memory_stats",
      "reset_accumulated_memory_stats",
      "empty_cache",
      "mem_get_info",
  };

  explicit Hooks(py::handle hooks);

#if TORCH_ACC_HOOKS_HAVE_AVAILABILITY
  bool isBuilt() const override;
  bool isAvailable() const override;
#endif
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override;
  void init() const override;
  c10::DeviceIndex deviceCount() const override;
  void setCurrentDevice(c10::DeviceIndex device) const override;
  c10::DeviceIndex getCurrentDevice() const override;
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override;
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override;
  bool isPinnedPtr(const void* data) const override;
  const at::Generator& getDefaultGenerator(
      c10::DeviceIndex device_index) const override;
  at::Generator getNewGenerator(
      c10::DeviceIndex device_index = -1) const override;
  c10::Allocator* getPinnedMemoryAllocator() const override;

#if TORCH_ACC_HAVE_DEVICE_ALLOCATOR
  c10::CachingDeviceAllocator::DeviceStats memoryStats(
      c10::DeviceIndex device_index) const;
  void resetPeakMemoryStats(c10::DeviceIndex device_index) const;
  void resetAccumulatedMemoryStats(c10::DeviceIndex device_index) const;
  void emptyCache() const;
  std::pair<size_t, size_t> memGetInfo(c10::DeviceIndex device_index) const;
#endif

 private:
#if TORCH_ACC_HAVE_DEVICE_ALLOCATOR
  // A reset of the figures memory_stats() reports: the Python method, or
  // nothing to reset when the backend reports no figures.
  void resetMemoryStats(Method method, c10::DeviceIndex device_index) const;
#endif

  // A valid device index for `device_index` (-1: the current device).
  c10::DeviceIndex checkedIndex(c10::DeviceIndex device_index) const;

  PythonMethods<kNumMethods> py_;
  // Default generators by device index. Node-based, so references handed out
  // stay valid as it grows; guarded by the mutex, which is never held while
  // Python runs.
  mutable std::mutex generators_mutex_;
  mutable std::unordered_map<c10::DeviceIndex, at::Generator>
      default_generators_;
};

// PrivateUse1's hooks when they are ours, else nullptr.
const Hooks* pythonHooks();

// Installs `hooks` as PrivateUse1's hooks. Returns false, and installs
// nothing, when PrivateUse1 already has hooks.
bool registerHooks(py::handle hooks);

// Times one call of a backend's kernel while a profiler is on, for the
// profiler's device time. A Python backend's kernel returns when its work is
// done, so the device is busy exactly while one runs: an operator's device
// time is the time its kernels ran, nothing on an operator that ran none. The
// profiler's PrivateUse1 events read the kernels' times (Hooks.cpp), and,
// where torch.profiler traces PrivateUse1 through a kineto plugin, each
// stretch of a kernel's own time is a kernel activity on the device, linked to
// the operator that ran it: a kernel that runs another (an operator on the
// device inside a kernel) pauses while the other runs, so that each
// nanosecond counts once, towards the innermost kernel running.
class KernelTiming {
 public:
  // `name` (the kernel's) must outlive the timing; `device` is the index of
  // the device it runs on.
  KernelTiming(const std::string& name, c10::DeviceIndex device);
  ~KernelTiming();
  KernelTiming(const KernelTiming&) = delete;
  KernelTiming& operator=(const KernelTiming&) = delete;

 private:
  bool timed_;
  int64_t start_ = 0;
#if TORCH_ACC_PROFILER_KINETO_PLUGIN
  // Ends the current stretch of this kernel's own time at `now_ns`: a
  // kernel activity.
  void pause(int64_t now_ns) noexcept;
  // Starts another stretch of it at `now_ns`.
  void resume(int64_t now_ns) {
    stretch_start_ = now_ns;
  }

  const std::string* name_ = nullptr;
  c10::DeviceIndex device_ = 0;
  int64_t stretch_start_ = 0;
  uint64_t correlation_id_ = 0; // The operator's that ran the kernel.
#endif
};

} // namespace torch::acc
