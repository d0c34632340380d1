#include <torch/csrc/acc/Hooks.h>

#include <torch/csrc/acc/DeviceGuard.h>
#include <torch/csrc/acc/Generator.h>
#include <torch/csrc/acc/PayloadTensor.h>

#include <c10/core/CPUAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/orchestration/observer.h>
#include <torch/csrc/profiler/stubs/base.h>
#if TORCH_ACC_GENERATOR_REGISTRY
#include <ATen/core/GeneratorForPrivateuseone.h>
#endif
#if TORCH_ACC_PROFILER_KINETO_PLUGIN
#include <ATen/record_function.h>
#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#endif

#include <atomic>
#include <mutex>
#include <new>
#include <set>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

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

// The kernels running on this thread, innermost last.
std::vector<KernelTiming*>& runningKernels() {
  thread_local std::vector<KernelTiming*> running;
  return running;
}

// Per thread, for each depth of kernels running inside kernels, the time of
// the kernels that ran at that depth, each with the kernels it ran: index 0
// for kernels that ran inside no other.
std::vector<int64_t>& kernelTimeByDepth() {
  thread_local std::vector<int64_t> ns;
  return ns;
}

// The profiler's PrivateUse1 event: the time of the kernels that ran at the
// depth a kernel started now would run at. An operator's device time, between
// the events the profiler records as it enters and leaves the operator, is
// then the time of the kernels it ran (theirs included), and an operator that
// ran none has none: a CPU operator inside a kernel, say.
struct DeviceMark {
  std::thread::id thread;
  size_t depth;
  int64_t ns;
};

DeviceMark deviceMark() {
  const size_t depth = runningKernels().size();
  const auto& by_depth = kernelTimeByDepth();
  return {
      std::this_thread::get_id(),
      depth,
      depth < by_depth.size() ? by_depth[depth] : 0};
}

#if TORCH_ACC_PROFILER_KINETO_PLUGIN
// torch.profiler's PrivateUse1 activities, through a kineto plugin
// (torch::profiler::impl::PrivateUse1ProfilerRegistry): each stretch of a
// kernel's own time is a CONCURRENT_KERNEL activity (a PrivateUse1 device
// event to torch), linked to the operator that ran the kernel by the
// correlation id kineto gives the plugin's session as the operator starts.

struct KernelStretch {
  std::string name;
  int64_t start_ns;
  int64_t end_ns;
  uint64_t correlation_id; // The operator's; 0 outside any.
  c10::DeviceIndex device;
  uint64_t thread;
};

// What the running session records. A session starts a new generation, so
// that a thread's correlation ids left from an earlier one are not read.
class KernelRecorder {
 public:
  static KernelRecorder& get() {
    static KernelRecorder recorder;
    return recorder;
  }

  bool recording() const {
    return recording_.load(std::memory_order_acquire);
  }

  uint64_t generation() const {
    return generation_.load(std::memory_order_acquire);
  }

  void start() {
    std::lock_guard<std::mutex> lock(mutex_);
    stretches_.clear();
    generation_.fetch_add(1);
    recording_.store(true, std::memory_order_release);
  }

  std::vector<KernelStretch> stop() {
    std::lock_guard<std::mutex> lock(mutex_);
    recording_.store(false, std::memory_order_release);
    return std::exchange(stretches_, {});
  }

  void add(KernelStretch stretch) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (recording_.load(std::memory_order_relaxed)) {
      stretches_.push_back(std::move(stretch));
    }
  }

 private:
  std::mutex mutex_;
  std::atomic<bool> recording_{false};
  std::atomic<uint64_t> generation_{0};
  std::vector<KernelStretch> stretches_;
};

// The correlation ids of the operators open on this thread, innermost last,
// as kineto hands them to the session.
struct OpenOperators {
  uint64_t generation = 0;
  std::vector<uint64_t> ids;

  static OpenOperators& get() {
    thread_local OpenOperators open;
    auto& recorder = KernelRecorder::get();
    if (open.generation != recorder.generation()) {
      open.generation = recorder.generation();
      open.ids.clear();
    }
    return open;
  }
};

class KernelSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    KernelRecorder::get().start();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    stretches_ = KernelRecorder::get().stop();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override {
    return {};
  }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, 0);
  }

  void processTrace(
      libkineto::ActivityLogger& logger,
      libkineto::getLinkedActivityCallback linked,
      int64_t /*startTime*/,
      int64_t /*endTime*/) override {
    if (!buffer_) { // Kineto took the buffer of an earlier processing.
      buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    }
    int32_t id = 0;
    for (const auto& stretch : stretches_) {
      buffer_->emplace_activity(
          buffer_->span,
          libkineto::ActivityType::CONCURRENT_KERNEL,
          stretch.name);
      auto& activity = *buffer_->activities.back();
      activity.startTime = stretch.start_ns;
      activity.endTime = stretch.end_ns;
      activity.id = ++id;
      activity.device = stretch.device;
      activity.resource = static_cast<int32_t>(stretch.thread);
      activity.threadId = static_cast<int32_t>(stretch.thread);
      if (linked && stretch.correlation_id != 0) {
        activity.linked = linked(static_cast<int32_t>(stretch.correlation_id));
      }
      activity.log(logger);
    }
    stretches_.clear();
    status_ = libkineto::TraceStatus::READY;
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return nullptr;
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    return {};
  }

  // Kineto keeps the buffer, and with it the activities it was given, for as
  // long as the trace it makes of them.
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

  void pushCorrelationId(uint64_t id) override {
    OpenOperators::get().ids.push_back(id);
  }

  void popCorrelationId() override {
    auto& open = OpenOperators::get();
    if (!open.ids.empty()) {
      open.ids.pop_back();
    }
  }

 private:
  std::vector<KernelStretch> stretches_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_ =
      std::make_unique<libkineto::CpuTraceBuffer>();
};

class KernelProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override {
    return name_;
  }

  const std::set<libkineto::ActivityType>& availableActivities()
      const override {
    return activities_;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& activity_types,
      const libkineto::Config& /*config*/) override {
    if (activity_types.count(libkineto::ActivityType::CONCURRENT_KERNEL) == 0) {
      return nullptr;
    }
    return std::make_unique<KernelSession>();
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/,
      int64_t /*duration_ms*/,
      const std::set<libkineto::ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_{"torch_acc"};
  std::set<libkineto::ActivityType> activities_{
      libkineto::ActivityType::CONCURRENT_KERNEL};
};
#endif

using ProfilerEvent = torch::profiler::impl::ProfilerVoidEventStub;

// The device side of torch.profiler for PrivateUse1 (its
// KINETO_PRIVATEUSE1_FALLBACK state, and the autograd profiler's legacy
// mode): events are device marks (deviceMark()).
class ProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device, ProfilerEvent* event, int64_t* cpu_ns)
      const override {
    if (device != nullptr) {
      *device = guard().getDevice().index();
    }
    *event = std::make_shared<DeviceMark>(deviceMark());
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
    const auto& from = *static_cast<const DeviceMark*>(start->get());
    const auto& to = *static_cast<const DeviceMark*>(end->get());
    // The events of an operator are taken at one depth of one thread: it runs
    // no longer than a kernel it runs inside of. A range that a future ends
    // on another thread (record_function's end callbacks) has marks of two
    // threads, which time nothing in common: no device time.
    if (from.thread != to.thread || from.depth != to.depth) {
      return 0.0f;
    }
    return static_cast<float>(to.ns - from.ns) / 1000.0f;
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

KernelTiming::KernelTiming(
    [[maybe_unused]] const std::string& name,
    [[maybe_unused]] c10::DeviceIndex device)
    : timed_(torch::profiler::impl::profilerEnabled()) {
  if (!timed_) {
    return;
  }
  // What may throw first, then what may not.
  auto& running = runningKernels();
  running.reserve(running.size() + 1);
  auto& by_depth = kernelTimeByDepth();
  if (by_depth.size() <= running.size()) {
    by_depth.resize(running.size() + 1, 0);
  }
  start_ = c10::getTime();
#if TORCH_ACC_PROFILER_KINETO_PLUGIN
  name_ = &name;
  device_ = device;
  if (!running.empty()) {
    running.back()->pause(start_);
  }
  if (KernelRecorder::get().recording()) {
    const auto& open = OpenOperators::get().ids;
    correlation_id_ = open.empty() ? 0 : open.back();
  }
  stretch_start_ = start_;
#endif
  running.push_back(this);
}

KernelTiming::~KernelTiming() {
  if (!timed_) {
    return;
  }
  const int64_t now = c10::getTime();
  auto& running = runningKernels();
  kernelTimeByDepth()[running.size() - 1] += now - start_;
  running.pop_back();
#if TORCH_ACC_PROFILER_KINETO_PLUGIN
  pause(now);
  if (!running.empty()) {
    running.back()->resume(now);
  }
#endif
}

#if TORCH_ACC_PROFILER_KINETO_PLUGIN
void KernelTiming::pause(int64_t now_ns) noexcept {
  auto& recorder = KernelRecorder::get();
  if (!recorder.recording()) {
    return;
  }
  try {
    recorder.add(
        KernelStretch{
            *name_,
            stretch_start_,
            now_ns,
            correlation_id_,
            device_,
            at::RecordFunction::currentThreadId()});
  } catch (const std::bad_alloc&) {
    // Out of memory for the trace (a destructor cannot throw): this stretch
    // is missing from it; the kernel's own result is unaffected.
  }
}
#endif

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
#if TORCH_ACC_PROFILER_KINETO_PLUGIN
  torch::profiler::impl::PrivateUse1ProfilerRegistry::instance()
      .registerFactory([]() -> std::unique_ptr<libkineto::IActivityProfiler> {
        return std::make_unique<KernelProfiler>();
      });
#endif
#if TORCH_ACC_GENERATOR_REGISTRY
  static at::_GeneratorRegister generators([](c10::DeviceIndex index) {
    return at::detail::getPrivateUse1Hooks().getNewGenerator(index);
  });
#endif
  return true;
}

} // namespace torch::acc
