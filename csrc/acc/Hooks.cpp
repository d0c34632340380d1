#include <torch/csrc/acc/Hooks.h>

#include <torch/csrc/acc/DeviceGuard.h>
#include <torch/csrc/acc/Generator.h>
#include <torch/csrc/acc/PayloadTensor.h>

#include <c10/core/CPUAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>
#if TORCH_ACC_GENERATOR_REGISTRY
#include <ATen/core/GeneratorForPrivateuseone.h>
#endif

#include <atomic>
#include <unordered_set>

namespace torch::acc {

namespace {

constexpr auto kPrivateUse1 = c10::DeviceType::PrivateUse1;

const c10::impl::DeviceGuardImplInterface& guard() {
  const auto* impl = c10::impl::getDeviceGuardImpl(kPrivateUse1);
  return *impl;
}

// The pinned memory allocator: CPU memory, recorded while it is alive.
class PinnedMemoryAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DataPtr memory = c10::GetCPUAllocator()->allocate(nbytes);
    void* data = memory.get();
    if (data == nullptr) {
      return memory; // Nothing allocated, nothing to record.
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_.insert(data);
    }
    return {
        data, new Block{std::move(memory)}, &release, c10::Device(c10::kCPU)};
  }

  void copy_data(void* dest, const void* src, std::size_t count)
      const override {
    default_copy_data(dest, src, count);
  }

  bool contains(const void* data) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_.count(data) != 0;
  }

  static PinnedMemoryAllocator& get() {
    // Never destroyed: tensors may outlive static destruction.
    static auto* allocator = new PinnedMemoryAllocator();
    return *allocator;
  }

 private:
  struct Block {
    c10::DataPtr memory;
  };

  static void release(void* ctx) {
    std::unique_ptr<Block> block(static_cast<Block*>(ctx));
    auto& self = get();
    std::lock_guard<std::mutex> lock(self.mutex_);
    self.live_.erase(block->memory.get());
  }

  mutable std::mutex mutex_;
  std::unordered_set<const void*> live_;
};

// Calls `method`, whose answer must be a bool (pybind11's conversion would
// take None, a number or any object with __bool__).
template <size_t N, typename... Args>
bool callBool(const PythonMethods<N>& py, size_t method, Args&&... args) {
  const GilForCall gil;
  const py::object result = py.call(method, std::forward<Args>(args)...);
  TORCH_CHECK_TYPE(
      PyBool_Check(result.ptr()),
      "expected ",
      py.owner(),
      ".",
      py.name(method),
      "() to return a bool, but got ",
      py::str(py::type::handle_of(result)).cast<std::string>());
  return result.ptr() == Py_True;
}

#if TORCH_ACC_HAVE_DEVICE_ALLOCATOR
// The statistic a flat name such as "allocated_bytes.all.current" names.
int64_t& statistic(
    c10::CachingDeviceAllocator::DeviceStats& stats,
    const std::string& name,
    const std::string& owner) {
  using c10::CachingAllocator::StatType;
  const auto first = name.find('.');
  const auto second =
      first == std::string::npos ? first : name.find('.', first + 1);
  c10::CachingAllocator::StatArray* array = nullptr;
  std::optional<StatType> pool;
  if (second != std::string::npos) {
    const std::unordered_map<std::string, c10::CachingAllocator::StatArray*>
        arrays = {
            {"allocation", &stats.allocation},
            {"segment", &stats.segment},
            {"active", &stats.active},
            {"inactive_split", &stats.inactive_split},
            {"allocated_bytes", &stats.allocated_bytes},
            {"reserved_bytes", &stats.reserved_bytes},
            {"active_bytes", &stats.active_bytes},
            {"inactive_split_bytes", &stats.inactive_split_bytes},
            {"requested_bytes", &stats.requested_bytes},
    };
    const std::unordered_map<std::string, StatType> pools = {
        {"all", StatType::AGGREGATE},
        {"small_pool", StatType::SMALL_POOL},
        {"large_pool", StatType::LARGE_POOL},
    };
    auto a = arrays.find(name.substr(0, first));
    auto p = pools.find(name.substr(first + 1, second - first - 1));
    if (a != arrays.end() && p != pools.end()) {
      array = a->second;
      pool = p->second;
    }
  }
  if (array != nullptr) {
    auto& stat = (*array)[static_cast<size_t>(*pool)];
    const auto field = name.substr(second + 1);
    if (field == "current") {
      return stat.current;
    } else if (field == "peak") {
      return stat.peak;
    } else if (field == "allocated") {
      return stat.allocated;
    } else if (field == "freed") {
      return stat.freed;
    }
  }
  TORCH_CHECK_VALUE(
      false,
      "expected ",
      owner,
      ".memory_stats() to name statistics as torch does, "
      "<statistic>.<all|small_pool|large_pool>.<current|peak|allocated|freed> "
      "(such as allocated_bytes.all.current), but got '",
      name,
      "'");
}
#endif

} // namespace

Hooks::Hooks(py::handle hooks)
    : py_(hooks,
          kMethods,
          py::str(py::type::handle_of(hooks).attr("__qualname__"))
              .cast<std::string>()) {}

#if TORCH_ACC_HOOKS_HAVE_AVAILABILITY
// The interface says these never throw; a backend whose check fails is not
// available (and says why).
bool Hooks::isBuilt() const {
  try {
    return !py_.has(kIsBuilt) || callBool(py_, kIsBuilt);
  } catch (const std::exception& e) {
    TORCH_WARN(e.what());
    return false;
  }
}

bool Hooks::isAvailable() const {
  try {
    return !py_.has(kIsAvailable) || callBool(py_, kIsAvailable);
  } catch (const std::exception& e) {
    TORCH_WARN(e.what());
    return false;
  }
}
#endif

bool Hooks::hasPrimaryContext(c10::DeviceIndex device_index) const {
  return !py_.has(kHasPrimaryContext) ||
      callBool(
          py_,
          kHasPrimaryContext,
          static_cast<int>(checkedIndex(device_index)));
}

void Hooks::init() const {
  if (py_.has(kInit)) {
    py_.call(kInit);
  }
}

c10::DeviceIndex Hooks::deviceCount() const {
  return guard().deviceCount();
}

void Hooks::setCurrentDevice(c10::DeviceIndex device) const {
  guard().setDevice(c10::Device(kPrivateUse1, device));
}

c10::DeviceIndex Hooks::getCurrentDevice() const {
  return guard().getDevice().index();
}

c10::DeviceIndex Hooks::exchangeDevice(c10::DeviceIndex device) const {
  return guard().exchangeDevice(c10::Device(kPrivateUse1, device)).index();
}

c10::DeviceIndex Hooks::maybeExchangeDevice(c10::DeviceIndex device) const {
  return exchangeDevice(device);
}

bool Hooks::isPinnedPtr(const void* data) const {
  return PinnedMemoryAllocator::get().contains(data) ||
      (py_.has(kIsPinnedPtr) &&
       callBool(py_, kIsPinnedPtr, reinterpret_cast<uintptr_t>(data)));
}

c10::Allocator* Hooks::getPinnedMemoryAllocator() const {
  return &PinnedMemoryAllocator::get();
}

#if TORCH_ACC_HAVE_DEVICE_ALLOCATOR
void Hooks::resetMemoryStats(Method method, c10::DeviceIndex device_index)
    const {
  const auto index = checkedIndex(device_index);
  if (py_.has(method)) {
    py_.call(method, static_cast<int>(index));
    return;
  }
  TORCH_CHECK(
      !py_.has(kMemoryStats),
      py_.owner(),
      " defines memory_stats() but no ",
      py_.name(method),
      "(device_index)");
  if (method == kResetPeakMemoryStats) {
    resetPayloadPeakMemoryStats(index);
  } else {
    resetPayloadAccumulatedMemoryStats(index);
  }
}

c10::CachingDeviceAllocator::DeviceStats Hooks::memoryStats(
    c10::DeviceIndex device_index) const {
  c10::CachingDeviceAllocator::DeviceStats stats;
  const auto index = checkedIndex(device_index);
  if (!py_.has(kMemoryStats)) {
    for (const auto& [name, value] : payloadMemoryFigures(index)) {
      statistic(stats, name, "the payload figures") = value;
    }
    return stats;
  }
  const GilForCall gil;
  const auto figures = py_.callAs<std::unordered_map<std::string, int64_t>>(
      kMemoryStats, "a dict of str to int", static_cast<int>(index));
  for (const auto& [name, value] : figures) {
    statistic(stats, name, py_.owner()) = value;
  }
  return stats;
}

void Hooks::resetPeakMemoryStats(c10::DeviceIndex device_index) const {
  resetMemoryStats(kResetPeakMemoryStats, device_index);
}

void Hooks::resetAccumulatedMemoryStats(c10::DeviceIndex device_index) const {
  resetMemoryStats(kResetAccumulatedMemoryStats, device_index);
}

void Hooks::emptyCache() const {
  if (py_.has(kEmptyCache)) {
    py_.call(kEmptyCache);
  }
}

std::pair<size_t, size_t> Hooks::memGetInfo(
    c10::DeviceIndex device_index) const {
  TORCH_CHECK_NOT_IMPLEMENTED(
      py_.has(kMemGetInfo),
      "the ",
      c10::get_privateuse1_backend(),
      " backend reports no free and total memory: its hooks (",
      py_.owner(),
      ") define no mem_get_info(device_index)");
  const auto index = checkedIndex(device_index);
  const GilForCall gil;
  const py::object info = py_.call(kMemGetInfo, static_cast<int>(index));
  const auto fail = [&]() {
    TORCH_CHECK_TYPE(
        false,
        "expected ",
        py_.owner(),
        ".mem_get_info() to return a (free, total) pair of non-negative "
        "ints, but got ",
        py::repr(info).cast<std::string>());
  };
  if (!PyTuple_Check(info.ptr()) || PyTuple_GET_SIZE(info.ptr()) != 2) {
    fail();
  }
  std::pair<size_t, size_t> figures;
  try {
    figures = info.cast<std::pair<size_t, size_t>>();
  } catch (py::cast_error&) {
    fail();
  }
  return figures;
}
#endif

c10::DeviceIndex Hooks::checkedIndex(c10::DeviceIndex device_index) const {
  return device_index == -1 ? getCurrentDevice()
                            : checkDeviceIndex(device_index);
}

at::Generator Hooks::getNewGenerator(c10::DeviceIndex device_index) const {
  TORCH_CHECK_NOT_IMPLEMENTED(
      py_.has(kGetNewGenerator),
      "the ",
      c10::get_privateuse1_backend(),
      " backend has no random number generator: its hooks (",
      py_.owner(),
      ") define no get_new_generator(device_index)");
  const auto index = checkedIndex(device_index);
  const GilForCall gil;
  py::object generator = py_.call(kGetNewGenerator, static_cast<int>(index));
  return at::make_generator<PythonGeneratorImpl>(
      index, generator, py_.owner() + ".get_new_generator");
}

const at::Generator& Hooks::getDefaultGenerator(
    c10::DeviceIndex device_index) const {
  const auto index = checkedIndex(device_index);
  {
    std::lock_guard<std::mutex> lock(generators_mutex_);
    auto it = default_generators_.find(index);
    if (it != default_generators_.end()) {
      return it->second;
    }
  }
  // Made without the lock (Python may let other threads run meanwhile); the
  // first one stored wins.
  at::Generator generator = getNewGenerator(index);
  std::lock_guard<std::mutex> lock(generators_mutex_);
  return default_generators_.emplace(index, std::move(generator)).first->second;
}

namespace {
std::atomic<const Hooks*> registered{nullptr};

using ProfilerEvent = torch::profiler::impl::ProfilerVoidEventStub;

// The device side of torch.profiler for PrivateUse1 (its
// KINETO_PRIVATEUSE1_FALLBACK state). A Python backend's kernel returns when
// its work is done, so the device is busy exactly while a kernel runs: an
// event is the kernel time of the recording thread so far (kernelTimeNs()),
// and an operator's device time, between the events the profiler records when
// it enters and when it leaves the operator, is the time its kernels ran (its
// nested operators' included).
class ProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device, ProfilerEvent* event, int64_t* cpu_ns)
      const override {
    if (device != nullptr) {
      *device = guard().getDevice().index();
    }
    *event = std::make_shared<int64_t>(kernelTimeNs());
    if (cpu_ns != nullptr) {
      *cpu_ns = c10::getTime();
    }
  }

  // Microseconds, as CUDA's stubs answer.
  float elapsed(const ProfilerEvent* start, const ProfilerEvent* end)
      const override {
    // The profiler asks only for pairs it recorded (KinetoEvent's elapsed
    // time is -1 without them).
    TORCH_INTERNAL_ASSERT(start != nullptr && *start && end != nullptr && *end);
    const auto from = *static_cast<const int64_t*>(start->get());
    const auto to = *static_cast<const int64_t*>(end->get());
    return static_cast<float>(to - from) / 1000.0f;
  }

  // A Python device has no timeline of its own to mark: its work runs on the
  // host, where the profiler's CPU events already show it.
  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}

  bool enabled() const override {
    return true;
  }

  void onEachDevice(std::function<void(int)> op) const override {
    for (c10::DeviceIndex i = 0; i < guard().deviceCount(); ++i) {
      c10::DeviceGuard on(c10::Device(kPrivateUse1, i));
      op(i);
    }
  }

  void synchronize() const override {
    guard().synchronizeDevice(guard().getDevice().index());
  }
};
} // namespace

const Hooks* pythonHooks() {
  return registered.load();
}

int64_t& kernelTimeNs() {
  thread_local int64_t ns = 0;
  return ns;
}

bool registerHooks(py::handle hooks) {
  // at::RegisterPrivateUse1HooksInterface() fails on a second registration;
  // the lock makes check-then-register atomic among this module's callers.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (at::isPrivateUse1HooksRegistered()) {
    return false;
  }
  // Lives for the rest of the process: at:: keeps a raw pointer to it.
  auto* ours = new Hooks(hooks);
  at::RegisterPrivateUse1HooksInterface(ours);
  registered = ours;
  // The profiler keeps a raw pointer to it. A function static, as CUDA's stubs
  // are: destroyed at exit, when no profiler runs any more.
  static ProfilerStubs profiler_stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&profiler_stubs);
#if TORCH_ACC_GENERATOR_REGISTRY
  static at::_GeneratorRegister generators([](c10::DeviceIndex index) {
    return at::detail::getPrivateUse1Hooks().getNewGenerator(index);
  });
#endif
  return true;
}

} // namespace torch::acc
