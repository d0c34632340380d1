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
// Every answer of the Python object is checked where it is read: device
// indices in [0, device_count()), device_count() in [0, the largest
// c10::DeviceIndex], streams of the device asked for, bools where a bool is
// expected. A wrong answer is an error naming the guard's class, the method
// and what it returned.
//
// Some methods are called where an error cannot propagate: getStream() (every
// autograd node records the stream of its inputs in a noexcept function),
// exchangeStream() (stream guards' destructors), uncheckedSetDevice(),
// deviceCount(), destroyEvent(), and setDevice() on threads that do not hold
// the GIL (the autograd engine sets the device of its device threads with
// nothing to catch an error). There, an error is kept for the calling thread
// (keepError()) and the call answers as the defaults below would; the next
// call on the thread that can raise (any other method of this guard,
// raisePendingError()) raises the kept error. torch_acc's backward raises it
// at the end of the pass.
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
  // deviceCount(), raising a clear error where the Python answer is not a
  // count.
  c10::DeviceIndex checkedDeviceCount() const;
  // `index`, when it names a device: else an error naming the count and, when
  // the count is 0 for a wrong answer of device_count(), that answer.
  c10::DeviceIndex checkedIndex(int64_t index) const;
  // setDevice() raising every error where it happens.
  void setDeviceOrThrow(c10::Device d) const;
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
  // setDevice() without raising a kept error first.
  void applyDevice(c10::Device d) const;
  // Checks that `index`, answered by Python `method`, names a device.
  c10::DeviceIndex answeredIndex(Method method, int64_t index) const;
  // Checks that `stream`, answered by Python `method` for device `d`, is a
  // stream of `d`.
  void checkStream(Method method, const c10::Stream& stream, c10::Device d)
      const;
  bool boolAnswer(Method method, const py::object& result) const;
  // `d`, or the current device when `d` has no index (torch.Stream(device=
  // "<name>") asks for a stream of the current device).
  c10::Device withIndex(c10::Device d) const;
  // Calls the Python stream method of getStream()/exchangeStream() for
  // device `d`: an error, or a stream of another device, is kept and
  // `fallback` answers instead.
  template <typename Arg>
  c10::Stream pythonStream(
      Method method,
      const Arg& arg,
      c10::Device d,
      c10::Stream fallback) const noexcept;
  // Throws when `d`'s index names no device although the device count is
  // known (the caller's mistake, which CUDA raises as well); returns false,
  // having kept the error, when the count itself is wrong.
  bool streamDeviceValid(c10::Device d) const TORCH_ACC_STREAM_NOEXCEPT;
  PythonMethods<kNumMethods> py_;
};

// Keeps the error being handled (call it in a catch block) for the calling
// thread, to be raised by the next raisePendingError() there. `call` names
// the guard call that failed, `instead` what was done instead. The first
// error kept wins.
void keepError(const std::string& call, const std::string& instead) noexcept;

// Raises, and forgets, the error kept on the calling thread, if any.
void raisePendingError();

// `index` when it names a PrivateUse1 device; else a clear error, naming the
// Python guard's wrong device_count() answer when that is why there is none.
c10::DeviceIndex checkDeviceIndex(int64_t index);

// Installs `guard` as PrivateUse1's device guard. Returns false, and installs
// nothing, when PrivateUse1 already has one.
bool registerDeviceGuard(py::handle guard);

// Whether PrivateUse1's device guard is one installed by registerDeviceGuard,
// that is, whether PrivateUse1 holds a Python backend.
bool hasPythonDeviceGuard();

} // namespace torch::acc
