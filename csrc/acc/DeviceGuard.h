#pragma once

#include <torch/csrc/acc/PythonMethods.h>
#include <torch/csrc/acc/compat.h>

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace torch::acc {

// The Python base class `DeviceGuard`. A backend subclasses it in Python and
// defines any of the methods named in `DeviceGuardImpl::kMethods`; the ones it
// leaves out get the defaults documented there. It carries no state: the
// registered instance is the state.
struct PythonDeviceGuard {
  virtual ~PythonDeviceGuard() = default;
};

// A c10 device guard for PrivateUse1 that forwards to a Python object.
//
// Defaults, for every method the Python object does not define, describe a
// backend whose work runs synchronously on one default stream per device:
// - devices are indexed 0..device_count()-1 (device_count() defaults to 1),
//   and the current device is tracked per thread;
// - the current stream is tracked per thread and device, starting at the
//   default stream; a new stream or a pool stream is the default stream,
//   since all work on a synchronous device is already ordered;
// - streams and events are always complete, so query_* is true and
//   synchronize_* returns at once;
// - record/block/destroy of an event do nothing. The autograd engine calls
//   these at the end of every backward pass that has a non-CPU leaf, so they
//   must not raise; for a synchronous backend doing nothing is exact.
// - elapsed_time() raises: no timing can be made up.
class DeviceGuardImpl final : public c10::impl::DeviceGuardImplInterface {
 public:
  enum Method : size_t {
    kDeviceCount,
    kGetDevice,
    kSetDevice,
    kExchangeDevice,
    kGetStream,
    kGetDefaultStream,
    kGetStreamFromGlobalPool,
    kGetNewStream,
    kExchangeStream,
    kCreateEvent,
    kRecordEvent,
    kBlockEvent,
    kQueryEvent,
    kDestroyEvent,
    kSynchronizeEvent,
    kElapsedTime,
    kQueryStream,
    kSynchronizeStream,
    kSynchronizeDevice,
    kNumMethods,
  };
  static constexpr std::array<const char*, kNumMethods> kMethods = {
      "device_count",
      "get_device",
      "set_device",
      "exchange_device",
      "get_stream",
      "get_default_stream",
      "get_stream_from_global_pool",
      "get_new_stream",
      "exchange_stream",
      "create_event",
      "record_event",
      "block_event",
      "query_event",
      "destroy_event",
      "synchronize_event",
      "elapsed_time",
      "query_stream",
      "synchronize_stream",
      "synchronize_device",
  };

  // `guard` must be an instance of `DeviceGuard`; its `type_()` must be
  // PrivateUse1.
  explicit DeviceGuardImpl(py::handle guard);

  c10::DeviceType type() const override;
  c10::Device exchangeDevice(c10::Device d) const override;
  c10::Device getDevice() const override;
  void setDevice(c10::Device d) const override;
  void uncheckedSetDevice(c10::Device d) const noexcept override;
  c10::Stream getStream(c10::Device d) const TORCH_ACC_STREAM_NOEXCEPT override;
  c10::Stream getDefaultStream(c10::Device d) const override;
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool isHighPriority)
      const override;
  c10::Stream getNewStream(c10::Device d, int priority) const override;
  c10::Stream exchangeStream(c10::Stream s) const
      TORCH_ACC_STREAM_NOEXCEPT override;
  void destroyEvent(void* event, const c10::DeviceIndex device_index)
      const noexcept override;
  void record(
      void** event,
      const c10::Stream& stream,
      const c10::DeviceIndex device_index,
      const c10::EventFlag flag) const override;
  void block(void* event, const c10::Stream& stream) const override;
  bool queryEvent(void* event) const override;
  c10::DeviceIndex deviceCount() const noexcept override;
  bool queryStream(const c10::Stream& stream) const override;
  void synchronizeStream(const c10::Stream& stream) const override;
  void synchronizeEvent(void* event) const override;
  void synchronizeDevice(const c10::DeviceIndex device_index) const override;
  double elapsedTime(
      void* event1,
      void* event2,
      const c10::DeviceIndex device_index) const override;

 private:
  void checkIndex(c10::Device d) const;
  // `d`, or the current device when `d` has no index (torch.Stream(device=
  // "<name>") asks for a stream of the current device).
  c10::Device withIndex(c10::Device d) const;
  // Calls the Python stream method of getStream()/exchangeStream(). Where
  // those are noexcept, an error is reported and `fallback` answers instead.
  template <typename Arg>
  c10::Stream pythonStream(Method method, const Arg& arg, c10::Stream fallback)
      const TORCH_ACC_STREAM_NOEXCEPT;
  PythonMethods<kNumMethods> py_;
};

// Installs `guard` as PrivateUse1's device guard. Returns false, and installs
// nothing, when PrivateUse1 already has one.
bool registerDeviceGuard(py::handle guard);

// Whether PrivateUse1's device guard is one installed by registerDeviceGuard,
// that is, whether PrivateUse1 holds a Python backend.
bool hasPythonDeviceGuard();

} // namespace torch::acc
